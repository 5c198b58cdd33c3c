/**
 * `iam-gateway policy replay NEW_DIR` (docs/policy-changes.md): the recorded requests — access-log lines and the
 * audit trail's denials — decided again by the policy in NEW_DIR with today's grants, and counted: allow → deny,
 * deny → allow, unchanged, per route and per user, with a few examples per changed route.
 *
 * No resolver is ever called. Where the new decision needs a resource's scopes from a resolver, the recorded
 * outcome is reused when the route that made the recorded decision (the live policy's) checked the same resource
 * the same way, with the same resolver (its URL, and its answer read the same way), and the recorded decision got that far; otherwise the line is counted as needing a resolver. Input is
 * streamed line by line, and what is kept is bounded (counts, at most {@link MAX_EXAMPLES} examples per route, at
 * most {@link MAX_USERS} users), so a gigabyte of log replays in bounded memory.
 */
import type { CompiledPolicy, CompiledRoute } from '../policy/compiled-policy';
import { sameResolution } from '../policy/resolver-answer';
import type { AuthorizationDecision } from '../authz/decision';
import type { DecisionEngine } from '../authz/decision-engine';
import { terminalText } from '../observability/terminal-text';
import { segmentsOf } from './request-classes';

/** A request as it was recorded and decided. */
export interface RecordedDecision {
  method: string;
  /** The normalized path (no query). */
  path: string;
  /** The route pattern that decided it then, or null. */
  route: string | null;
  /** What was decided then: a shadow route's would-be denial counts as `deny`. */
  verdict: 'allow' | 'deny';
  /** The failed step then (null when allowed). */
  step: string | null;
  userId: string | null;
  profileId: string | null;
  clientType: string | null;
  /** Where it came from, for the examples (`access-log:12`, `audit:8812`). */
  origin: string;
}

/** What one line of input turned out to be. */
export type ParsedLine = { kind: 'record'; record: RecordedDecision } | { kind: 'other' } | { kind: 'unreadable' } | { kind: 'unrecognized' } | { kind: 'undecided' };

const VERDICTS: Record<string, 'allow' | 'deny' | undefined> = { allow: 'allow', deny: 'deny', shadow_deny: 'deny' };
const isText = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= 2048;
const textOrNull = (value: unknown): string | null | undefined => (value === null ? null : isText(value) ? value : undefined);

/**
 * One access-log line (docs/observability.md): `other` for a line of another logger, `unreadable` when it is not
 * JSON, `unrecognized` when an access line lacks what a replay needs (another version), `undecided` when nothing
 * was decided (refused before routing, a failure).
 */
export function parseAccessLogLine(line: string, origin: string): ParsedLine {
  if (line.trim() === '') return { kind: 'other' };
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return { kind: 'unreadable' };
  }
  if (typeof entry !== 'object' || entry === null || (entry as { msg?: unknown }).msg !== 'access') return { kind: 'other' };
  const fields = entry as Record<string, unknown>;
  if (fields.decision === 'none') return { kind: 'undecided' };
  const verdict = VERDICTS[fields.decision as string];
  const [userId, profileId, clientType, route, step] = [fields.userId, fields.profileId, fields.clientType, fields.route, fields.step].map(textOrNull);
  if (verdict === undefined || !isText(fields.method) || !isText(fields.path) || !fields.path.startsWith('/')) return { kind: 'unrecognized' };
  if (userId === undefined || profileId === undefined || clientType === undefined || route === undefined || step === undefined) return { kind: 'unrecognized' };
  // A session's line without its profile and client type comes from a version that did not log them: it cannot be
  // decided again as it was.
  if (userId !== null && clientType === null) return { kind: 'unrecognized' };
  return { kind: 'record', record: { method: fields.method, path: fields.path, route, verdict, step, userId, profileId, clientType, origin } };
}

/** A denial from the audit trail (`authz.deny`, `authz.shadow_deny`): its target is `METHOD path`, its details the decision. */
export function recordOfAuditEvent(event: { id: string; action: string; targetId: string | null; details: Record<string, unknown> | null }): RecordedDecision | null {
  const decision = event.details?.decision as Partial<AuthorizationDecision> | undefined;
  const target = /^([A-Z]{1,20}) (\/\S*)$/.exec(event.targetId ?? '');
  if (!decision || !target || (event.action !== 'authz.deny' && event.action !== 'authz.shadow_deny')) return null;
  return {
    method: target[1]!,
    path: target[2]!,
    route: decision.route?.pattern ?? null,
    verdict: 'deny',
    step: decision.failedStep ?? null,
    userId: decision.userId ?? null,
    profileId: decision.profileId ?? null,
    clientType: decision.clientType ?? null,
    origin: `audit:${event.id}`,
  };
}

/** The new outcome of one recorded request. */
export type ReplayOutcome = { verdict: 'allow' | 'deny'; step: string | null; route: string | null; reused: boolean } | { verdict: 'needs-resolver'; route: string | null };

/** What the replay needs from the gateway: the engine (with a resolver that is never called) and the grants. */
export interface ReplayEngine {
  engine: Pick<DecisionEngine, 'decideRequestFast'>;
}

/** The reason the replay's stand-in resolver gives: the decision needs a resource's scopes nobody recorded. */
export const NEEDS_RESOLVER = 'policy replay: a resolver would be asked here';

/** A resolver client for the replay's engine: never calls the host (see the module comment). */
export const replayResolvers = { resolve: () => Promise.resolve({ kind: 'unavailable' as const, reason: NEEDS_RESOLVER }) };

/** Decides one recorded request again with `policy` (see the module comment); `live` is the policy that decided it then. */
export async function replayOne(record: RecordedDecision, policy: CompiledPolicy, live: CompiledPolicy | null, engine: ReplayEngine['engine']): Promise<ReplayOutcome> {
  const subject =
    record.userId === null || record.clientType === null
      ? null
      : { principal: { userId: record.userId, identityId: '', identityDomain: '', activeProfileId: record.profileId, authorizationVersion: 0 }, clientType: record.clientType };
  const match = policy.match(record.method, record.path);
  const maybe = engine.decideRequestFast({ method: record.method, path: record.path, policy, subject, match });
  const decision = maybe instanceof Promise ? await maybe : maybe;
  const route = match?.route.pattern ?? null;
  const last = decision.steps[decision.steps.length - 1];
  if (decision.failedStep === 'RESOURCE_RESOLUTION_UNAVAILABLE' && last?.reason === NEEDS_RESOLVER) {
    // The recorded outcome of the resource and scope steps stands only for the same check, reached then too.
    const then = live?.match(record.method, record.path)?.route ?? null;
    const reachedThen = record.verdict === 'allow' || (record.step !== null && RESOURCE_STEPS.has(record.step));
    if (match !== null && then !== null && then.pattern === record.route && reachedThen && sameResourceCheck(then, match.route) && sameResolver(live!, policy, match.route)) {
      return { verdict: record.verdict, step: record.step, route, reused: true };
    }
    return { verdict: 'needs-resolver', route };
  }
  return { verdict: decision.shadowed || !decision.allowed ? 'deny' : 'allow', step: decision.failedStep, route, reused: false };
}

/** Steps a decision reaches only after the permission passed and the resource was asked for. */
const RESOURCE_STEPS = new Set(['RESOURCE_NOT_FOUND', 'RESOURCE_RESOLUTION_UNAVAILABLE', 'SCOPE_DENIED']);

function sameResourceCheck(a: CompiledRoute, b: CompiledRoute): boolean {
  if (a.resource === null || b.resource === null) return false;
  const segmentOf = (route: CompiledRoute): number => segmentsOf(route).findIndex((segment) => segment.kind === 'param' && segment.name === route.resource!.idParam);
  return a.resource.type === b.resource.type && a.resource.access === b.resource.access && segmentOf(a) === segmentOf(b);
}

/** Whether the route's resource type is resolved the same way in both policies (same URL, its answer read the same way). */
function sameResolver(live: CompiledPolicy, policy: CompiledPolicy, route: CompiledRoute): boolean {
  const type = route.resource!.type;
  const then = live.resources[type]?.resolver ?? null;
  const now = policy.resources[type]?.resolver ?? null;
  return then !== null && now !== null && sameResolution(then, now);
}

export const MAX_EXAMPLES = 20;
export const MAX_USERS = 10_000;

type Transition = 'allow→deny' | 'deny→allow' | 'unchanged' | 'needs-resolver';

interface Counts {
  'allow→deny': number;
  'deny→allow': number;
  unchanged: number;
  'needs-resolver': number;
}

const zero = (): Counts => ({ 'allow→deny': 0, 'deny→allow': 0, unchanged: 0, 'needs-resolver': 0 });

export interface ReplayExample {
  origin: string;
  method: string;
  path: string;
  userId: string | null;
  was: string;
  now: string;
}

/** The report's data: every count, and the lines that could not be replayed. */
export interface ReplayReport {
  total: Counts;
  /** Per route pattern of the new policy (`(no route)` for undeclared requests). */
  routes: Array<{ route: string; counts: Counts; examples: ReplayExample[] }>;
  /** Per user (`(anonymous)` without a session); users past {@link MAX_USERS} are counted under `(others)`. */
  users: Array<{ userId: string; counts: Counts }>;
  skipped: { unreadable: number; unrecognized: number; undecided: number; other: number };
  /** How many lines reused the recorded resource outcome instead of a resolver. */
  reused: number;
}

/** Adds outcomes up in bounded memory. */
export class ReplayTally {
  private readonly total = zero();
  private readonly routes = new Map<string, { counts: Counts; examples: ReplayExample[] }>();
  private readonly users = new Map<string, Counts>();
  readonly skipped = { unreadable: 0, unrecognized: 0, undecided: 0, other: 0 };
  private reused = 0;

  skip(kind: keyof ReplayTally['skipped']): void {
    this.skipped[kind]++;
  }

  add(record: RecordedDecision, outcome: ReplayOutcome): void {
    const transition: Transition =
      outcome.verdict === 'needs-resolver' ? 'needs-resolver' : outcome.verdict === record.verdict ? 'unchanged' : record.verdict === 'allow' ? 'allow→deny' : 'deny→allow';
    if (outcome.verdict !== 'needs-resolver' && outcome.reused) this.reused++;
    this.total[transition]++;
    const routeKey = outcome.route ?? '(no route)';
    let route = this.routes.get(routeKey);
    if (!route) this.routes.set(routeKey, (route = { counts: zero(), examples: [] }));
    route.counts[transition]++;
    if (transition !== 'unchanged' && route.examples.length < MAX_EXAMPLES) {
      route.examples.push({
        origin: record.origin,
        method: record.method,
        path: record.path,
        userId: record.userId,
        was: `${record.verdict}${record.step ? ` (${record.step})` : ''}`,
        now: outcome.verdict === 'needs-resolver' ? 'needs a resolver' : `${outcome.verdict}${outcome.step ? ` (${outcome.step})` : ''}`,
      });
    }
    const userKey = record.userId ?? '(anonymous)';
    const user = this.users.get(userKey) ?? (this.users.size < MAX_USERS ? zero() : null);
    if (user !== null) {
      this.users.set(userKey, user);
      user[transition]++;
    } else {
      const others = this.users.get('(others)') ?? zero();
      others[transition]++;
      this.users.set('(others)', others);
    }
  }

  report(): ReplayReport {
    return {
      total: { ...this.total },
      routes: [...this.routes.entries()].map(([route, value]) => ({ route, counts: value.counts, examples: value.examples })).sort((a, b) => a.route.localeCompare(b.route)),
      users: [...this.users.entries()].map(([userId, counts]) => ({ userId, counts })).sort((a, b) => a.userId.localeCompare(b.userId)),
      skipped: { ...this.skipped },
      reused: this.reused,
    };
  }
}

export type FailOn = 'wider' | 'narrower' | 'any';

/** Whether the report fails `--fail-on`: wider = someone gets in (deny → allow), narrower = someone is kept out. */
export function replayFails(report: ReplayReport, failOn: FailOn | null): boolean {
  if (failOn === null) return false;
  const wider = report.total['deny→allow'] > 0;
  const narrower = report.total['allow→deny'] > 0;
  return failOn === 'wider' ? wider : failOn === 'narrower' ? narrower : wider || narrower;
}

/**
 * The report as text: totals, the routes and users that changed (with examples), and what was skipped. Every field
 * a recorded line or audit row chose (path, method, user, route, step) is shown on one line, its controls escaped.
 */
export function formatReplayReport(report: ReplayReport): string[] {
  const line = (counts: Counts): string =>
    `${counts['allow→deny']} allow→deny, ${counts['deny→allow']} deny→allow, ${counts.unchanged} unchanged${counts['needs-resolver'] > 0 ? `, ${counts['needs-resolver']} need a resolver` : ''}`;
  const changed = (counts: Counts): boolean => counts['allow→deny'] + counts['deny→allow'] + counts['needs-resolver'] > 0;
  const out = [`replayed ${report.total['allow→deny'] + report.total['deny→allow'] + report.total.unchanged + report.total['needs-resolver']} decisions: ${line(report.total)}`];
  for (const route of report.routes.filter((entry) => changed(entry.counts))) {
    out.push(`route ${terminalText(route.route)}: ${line(route.counts)}`);
    for (const example of route.examples) {
      const fields = [example.origin, example.method, example.path, example.userId ?? '(anonymous)'].map((field) => terminalText(field));
      out.push(`  ${fields.join(' ')}: ${terminalText(example.was)} → ${terminalText(example.now)}`);
    }
  }
  for (const user of report.users.filter((entry) => changed(entry.counts))) out.push(`user ${terminalText(user.userId)}: ${line(user.counts)}`);
  if (report.reused > 0) out.push(`${report.reused} decisions reused the recorded resource outcome (same resource check; no resolver was asked)`);
  const { unreadable, unrecognized, undecided } = report.skipped;
  if (unreadable + unrecognized > 0) out.push(`skipped ${unreadable} lines that are not JSON and ${unrecognized} access lines this version cannot replay`);
  if (undecided > 0) out.push(`${undecided} recorded requests were not decided (refused before routing, or a failure): not replayed`);
  return out;
}
