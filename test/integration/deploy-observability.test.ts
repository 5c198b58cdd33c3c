/**
 * The starting points under deploy/ (the Grafana dashboard and the Prometheus rules) name only metrics the
 * gateway exports: every PromQL expression of both files is reduced to the metric names it reads, and each
 * one must be on a running gateway's `/metrics` (management port) as `# TYPE`/`# HELP` — a histogram's
 * `_bucket`/`_sum`/`_count` through its base name, a recording rule's name through its `record:`. A renamed
 * or misspelt metric fails here instead of drawing an empty panel or an alert that can never fire.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { bearer, login, ROOT } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';


const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'iam-gateway-dashboard.json');
const RULES = join(ROOT, 'deploy', 'prometheus', 'iam-gateway-rules.yaml');

/** PromQL words that are not metric names (operators and grouping keywords; functions are followed by `(`). */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'atan2', 'inf', 'nan']);

/** The metric (or recorded series) names a PromQL expression reads, Grafana variables allowed. */
function metricNames(expr: string): string[] {
  const text = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // string literals (label values, regexes)
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // range and subquery selectors ($__rate_interval included)
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
    .replace(/\boffset\s+-?[\w$]+/g, ' ')
    // Grafana's label_values(metric, label): the metric only; label_values(label): nothing.
    .replace(/\blabel_values\s*\(\s*([^,()]*?)\s*,[^)]*\)/g, ' $1 ')
    .replace(/\blabel_values\s*\([^,()]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ') // Grafana variables elsewhere
    .replace(/(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w:])/g, ' '); // numbers
  const names: string[] = [];
  for (const match of text.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = text.slice(match.index + match[0].length);
    if (/^\s*\(/.test(after)) continue; // a function or aggregation
    if (KEYWORDS.has(match[0].toLowerCase())) continue;
    names.push(match[0]);
  }
  return names;
}

/** Every PromQL expression of the dashboard: panel targets (rows included) and the variables' queries. */
function dashboardExpressions(dashboard: Record<string, any>): string[] {
  const found: string[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (node === null || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === 'expr' && typeof value === 'string') found.push(value);
      else walk(value);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    found.push(typeof variable.query === 'string' ? variable.query : variable.query.query);
  }
  return found;
}

/** A Prometheus duration (`30s`, `5m`, `0m`) in seconds. */
function promSeconds(duration: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(duration);
  if (match === null) throw new Error(`not a Prometheus duration: ${duration}`);
  return Number(match[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[match[2] as 'ms' | 's' | 'm' | 'h'];
}

/** Splits `A / B` at its last division outside parentheses, braces, brackets and strings; null without one. */
function splitDivision(expr: string): { numerator: string; denominator: string } | null {
  let depth = 0;
  let quote: string | null = null;
  let at = -1;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i]!;
    if (quote !== null) {
      if (c === '\\') i++;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if ('({['.includes(c)) depth++;
    else if (')}]'.includes(c)) depth--;
    else if (c === '/' && depth === 0) at = i;
  }
  return at < 0 ? null : { numerator: expr.slice(0, at).trim(), denominator: expr.slice(at + 1).trim() };
}

/** The label sets of every sample on a /metrics page, by series name. */
function sampleLabels(text: string): Map<string, Array<Record<string, string>>> {
  const found = new Map<string, Array<Record<string, string>>>();
  for (const match of text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? \S+$/gm)) {
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((label) => [label[1]!, label[2]!]));
    found.set(match[1]!, [...(found.get(match[1]!) ?? []), labels]);
  }
  return found;
}

/**
 * The series selectors of a PromQL expression with their label matchers (`=`, `!=`, `=~`, `!~`), the Grafana
 * variables' (`$job`, `$instance`) left out: they match whatever is scraped.
 */
function selectors(expr: string): Array<{ name: string; text: string; matchers: Array<(labels: Record<string, string>) => boolean> }> {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}/g)].map((match) => {
    const kept = [...match[2]!.matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)].filter((matcher) => !matcher[3]!.includes('$'));
    const matchers = kept.map(([, label, op, value]) => (labels: Record<string, string>): boolean => {
      const actual = labels[label!] ?? '';
      if (op === '=') return actual === value;
      if (op === '!=') return actual !== value;
      const full = new RegExp(`^(?:${value!})$`).test(actual);
      return op === '=~' ? full : !full;
    });
    return { name: match[1]!, text: `${match[1]!}{${kept.map(([, label, op, value]) => `${label!}${op!}"${value!}"`).join(', ')}}`, matchers };
  });
}

/** `# TYPE` of every metric on a /metrics page, by name. */
function exportedTypes(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const match of text.matchAll(/^# (TYPE|HELP) ([a-zA-Z_:][a-zA-Z0-9_:]*) ?(.*)$/gm)) {
    if (match[1] === 'TYPE') types.set(match[2]!, match[3]!);
    else if (!types.has(match[2]!)) types.set(match[2]!, 'unknown');
  }
  return types;
}

/** The names used that are neither exported (a histogram's series through its base name) nor recorded. */
function unknownNames(used: Iterable<string>, exported: Map<string, string>, recorded: ReadonlySet<string>): string[] {
  const unknown = new Set<string>();
  for (const name of used) {
    if (exported.has(name) || recorded.has(name)) continue;
    const series = /^(.*)_(bucket|sum|count)$/.exec(name);
    const base = series?.[1];
    if (base !== undefined && ['histogram', 'summary'].includes(exported.get(base) ?? '')) continue;
    unknown.add(name);
  }
  return [...unknown].sort();
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Record<string, any>;
const rules = parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ name: string; rules: Array<Record<string, any>> }> };
const ruleList = rules.groups.flatMap((group) => group.rules);
const recorded = new Set(ruleList.filter((rule) => typeof rule.record === 'string').map((rule) => rule.record as string));
const expressions = [...dashboardExpressions(dashboard).map((expr) => ({ file: 'dashboard', expr })), ...ruleList.map((rule) => ({ file: 'rules', expr: String(rule.expr) }))];
const used = new Set(expressions.flatMap(({ expr }) => metricNames(expr)));

let fixture: GatewayWithUpstream;
let exported: Map<string, string>;
let metricsText: string;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  const { gateway } = fixture;
  // The events that create the lazily made series: a login, an allowed and a denied request, a reload, a logout.
  const alice = await login(gateway.url, 'alice');
  expect((await fetch(`${gateway.url}/api/projects/1`, { headers: bearer(alice.accessToken) })).status).toBe(200);
  expect((await fetch(`${gateway.url}/api/admin/stats`, { headers: bearer(alice.accessToken) })).status).toBe(403);
  await gateway.services!.policyReloader.reload('test');
  expect((await fetch(`${gateway.url}/iam/auth/logout`, { method: 'POST', headers: bearer(alice.accessToken) })).status).toBeLessThan(300);
  metricsText = await (await fetch(`${gateway.managementUrl}/metrics`)).text();
  exported = exportedTypes(metricsText);
});

afterAll(() => fixture?.close());

describe('the metric names of a PromQL expression', () => {
  it('are found behind functions, aggregations, matchers, ranges, groupings, variables and numbers', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (route, le) (rate(iam_a_seconds_bucket{job=~"$job", x="y}"}[$__rate_interval]))) / on (job) group_left (route) iam_b_total offset 5m > 1e3 and time() - iam_c_timestamp_seconds > bool 600 unless job:iam_d:rate5m',
      ),
    ).toEqual(['iam_a_seconds_bucket', 'iam_b_total', 'iam_c_timestamp_seconds', 'job:iam_d:rate5m']);
    expect(metricNames('label_values(iam_policy_routes{job=~"$job"}, instance)')).toEqual(['iam_policy_routes']);
    expect(metricNames('label_values(job)')).toEqual([]);
  });

  it('a name the gateway does not export is reported (so this test fails on a misspelt metric)', () => {
    const page = new Map([
      ['iam_real_total', 'counter'],
      ['iam_real_seconds', 'histogram'],
    ]);
    const names = ['iam_real_total', 'iam_real_seconds_bucket', 'iam_real_seconds_count', 'iam_real_total_bucket', 'iam_nope_total', 'job:recorded:rate5m', 'iam_pending_seconds_bucket'];
    expect(unknownNames(names, page, new Set(['job:recorded:rate5m']))).toEqual(['iam_nope_total', 'iam_pending_seconds_bucket', 'iam_real_total_bucket']);
  });
});

describe('deploy/grafana and deploy/prometheus', () => {
  it('both files hold PromQL (the check below is not vacuous)', () => {
    expect(dashboardExpressions(dashboard).length).toBeGreaterThan(20);
    expect(ruleList.filter((rule) => rule.alert).length).toBeGreaterThanOrEqual(7);
    expect(used.size).toBeGreaterThan(20);
  });

  it('every metric named by the dashboard or a rule is on the gateway’s /metrics', () => {
    const unknown = expressions.flatMap(({ file, expr }) => unknownNames(metricNames(expr), exported, recorded).map((name) => `${file}: ${name} (in ${expr})`));
    expect(unknown).toEqual([]);
  });

  it('every recorded series a rule or panel reads is recorded by a rule of the file', () => {
    const recordedLike = [...used].filter((name) => name.includes(':'));
    expect(recordedLike.filter((name) => !recorded.has(name))).toEqual([]);
  });

  it('the dashboard is schemaVersion 39 with its Prometheus data source as the ${DS_PROMETHEUS} input, used by every panel and query', () => {
    expect(dashboard.schemaVersion).toBe(39);
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    const sources: unknown[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (node === null || typeof node !== 'object') return;
      for (const [key, value] of Object.entries(node)) {
        if (key === 'datasource') sources.push(value);
        else walk(value);
      }
    };
    walk(dashboard.panels);
    walk(dashboard.templating);
    expect(sources.length).toBeGreaterThan(20);
    for (const source of sources) expect(source).toEqual({ type: 'prometheus', uid: '${DS_PROMETHEUS}' });
    const ids = (dashboard.panels as Array<{ id: number }>).map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every alert has a severity label and summary and description annotations; every rule is a record or an alert', () => {
    for (const rule of ruleList) {
      expect(typeof rule.expr).toBe('string');
      if (rule.record !== undefined) {
        expect(rule.record).toMatch(/^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$/);
        continue;
      }
      expect(rule.alert).toMatch(/^IamGateway[A-Za-z]+$/);
      expect(['critical', 'warning', 'info']).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary).toEqual(expect.any(String));
      expect(rule.annotations?.description).toEqual(expect.any(String));
    }
  });

  it('IamGatewayPolicyReloadFailing fires within a minute of a failed reload and lasts while the directory is broken', () => {
    const rule = ruleList.find((entry) => entry.alert === 'IamGatewayPolicyReloadFailing')!;
    // The gauge the policy holder sets (test/integration/metrics.test.ts moves it): a state, not a window over a
    // counter that would fire late (waiting for increase()) or clear while the files are still broken.
    expect(metricNames(rule.expr)).toEqual(['iam_policy_reload_failing']);
    expect(rule.expr).not.toMatch(/\[/);
    expect(exported.get('iam_policy_reload_failing')).toBe('gauge');
    expect(promSeconds(String(rule.for ?? '0m'))).toBeLessThanOrEqual(60);
  });

  it('a ratio panel shows 0, not "No data", on a healthy gateway: its numerator is filled with 0 where the denominator has traffic', () => {
    const ratios = dashboardExpressions(dashboard)
      .map((expr) => ({ expr, division: splitDivision(expr) }))
      .filter((entry) => entry.division !== null);
    expect(ratios.length).toBeGreaterThanOrEqual(2);
    for (const { expr, division } of ratios) {
      // (failures or 0 * total) / total: the failure series is absent until the first failure (a counter with labels
      // has no sample before its first inc), and without the fallback the whole ratio would be absent too.
      const { numerator, denominator } = division!;
      expect({ expr, zeroFilled: numerator.endsWith(` or 0 * ${denominator})`) && numerator.startsWith('(') }).toEqual({ expr, zeroFilled: true });
    }
  });

  it('a panel never goes blank on a healthy gateway: a selector with no sample on /metrics has a 0 fallback', () => {
    // A labelled counter has no sample before its first inc (5xx answers by route): a panel of such a selector alone,
    // or a ratio with it as numerator, would show "No data" rather than 0 while the metric itself has traffic.
    // Pre-created series (store and resolver errors, audit drops) need nothing, nor a metric with no sample at all
    // (no resolver in this policy: "No data" is then the truth). This gateway served an allowed and a denied
    // request and a reload: healthy.
    const samples = sampleLabels(metricsText);
    const blank = dashboardExpressions(dashboard).flatMap((expr) =>
      selectors(expr)
        .filter(({ name }) => (samples.get(name) ?? []).length > 0)
        .filter(({ name, matchers }) => !samples.get(name)!.some((labels) => matchers.every((matcher) => matcher(labels))))
        .map(({ text }) => ({ expr, text })),
    );
    expect(blank.map(({ text }) => text)).toContain('iam_http_requests_total{status_class="5xx"}');
    for (const { expr, text } of blank) expect({ text, fallback: /\bor (on \(\) |0 \* )/.test(expr) }).toEqual({ text, fallback: true });
  });
});
