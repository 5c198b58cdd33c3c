/**
 * `policy diff` judges a change for a CI gate, so "no change" must mean no request is decided differently. Checked
 * on random policy pairs (small route trees of static, `:param` and `**` segments in mixed case, methods,
 * permissions, public, profile, shadow mode, resources and resolvers, groups, `default`, `match.case-sensitive`): for
 * every pair the diff calls unchanged, `policy explain`'s decision function gives the same answer in both for random
 * requests spelled from both trees' patterns in any case. Seeded, so a failure names its pair and request and
 * reproduces.
 */
import type { CompiledPolicy } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import type { PolicyFileDocument, PolicyRouteEntry } from '../../src/policy/policy-schema';
import { diffPolicies } from '../../src/policy-tools/policy-diff';
import { explainRequest } from '../../src/policy-tools/policy-explain';
import { seededRandom } from '../support/random';

const PAIRS = 400;
const REQUESTS_PER_PAIR = 60;
/** Spellings that fold together (`admin`, `Admin`, `ADMIN`) next to ones that do not. */
const LABELS = ['api', 'API', 'admin', 'Admin', 'ADMIN', 'users', 'Users', 'v1'];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS'];

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const chance = (random: Random, p: number): boolean => random() < p;

function randomPath(random: Random): { path: string; params: string[] } {
  const depth = 1 + Math.floor(random() * 3);
  const parts: string[] = [];
  const params: string[] = [];
  for (let i = 0; i < depth; i++) {
    const roll = random();
    if (roll < 0.12 && i === depth - 1) parts.push('**');
    else if (roll < 0.35) {
      const name = `p${i}`;
      params.push(name);
      parts.push(`:${name}`);
    } else parts.push(pick(random, LABELS));
  }
  return { path: `/${parts.join('/')}`, params };
}

function randomRoute(random: Random): PolicyRouteEntry {
  const { path, params } = randomPath(random);
  const route: PolicyRouteEntry = { path };
  const methods = random();
  if (methods < 0.45) route.methods = ['GET'];
  else if (methods < 0.6) route.methods = ['POST'];
  else if (methods < 0.75) route.methods = ['GET', 'DELETE'];
  else if (methods < 0.9) route.methods = ['*'];
  if (chance(random, 0.15)) route.public = true;
  else {
    if (chance(random, 0.6)) route.permission = pick(random, ['a:read', 'a:write']);
    if (route.permission === undefined && chance(random, 0.25)) route.profile = 'optional';
    if (route.permission !== undefined && params.length > 0 && chance(random, 0.5)) {
      route.resource = { type: pick(random, ['A', 'B']), id: pick(random, params) };
      if (chance(random, 0.5)) route.resource.access = pick(random, ['READ', 'WRITE'] as const);
      if (chance(random, 0.4)) route.resource.resolve = pick(random, ['optional', 'required'] as const);
    }
  }
  if (chance(random, 0.1)) route.mode = 'shadow';
  return route;
}

function randomDocument(random: Random): PolicyFileDocument {
  const doc: PolicyFileDocument = { version: 1 };
  if (chance(random, 0.7)) doc.default = pick(random, ['deny', 'authenticated', 'allow'] as const);
  if (chance(random, 0.6)) doc.match = { 'case-sensitive': chance(random, 0.5) };
  const resources: NonNullable<PolicyFileDocument['resources']> = {};
  for (const type of ['A', 'B']) {
    if (chance(random, 0.5)) resources[type] = chance(random, 0.8) ? { resolver: { url: pick(random, ['http://h/a/{id}', 'http://h/b/{id}']), ...(chance(random, 0.3) ? { timeout: '1s' } : {}) } } : {};
  }
  if (Object.keys(resources).length > 0) doc.resources = resources;
  const routes = Array.from({ length: 1 + Math.floor(random() * 6) }, () => randomRoute(random));
  // A group hands its permission, public, profile or mode down to its routes.
  if (chance(random, 0.2)) {
    const group: PolicyRouteEntry = { path: pick(random, ['/api', '/Admin']), routes: routes.splice(0, 2) };
    const inherited = random();
    if (inherited < 0.3) group.permission = 'a:read';
    else if (inherited < 0.5) group.public = true;
    else if (inherited < 0.7) group.profile = 'optional';
    else if (inherited < 0.8) group.mode = 'shadow';
    routes.push(group);
  }
  doc.routes = routes;
  return doc;
}

/** One small edit that may or may not change a decision; the pairs the diff calls unchanged are the ones checked. */
function mutate(random: Random, original: PolicyFileDocument): PolicyFileDocument {
  const doc = structuredClone(original);
  const leaves = (entries: PolicyRouteEntry[]): PolicyRouteEntry[] => entries.flatMap((entry) => (entry.routes ? leaves(entry.routes) : [entry]));
  const routes = leaves(doc.routes ?? []);
  const route = routes.length > 0 ? pick(random, routes) : null;
  switch (Math.floor(random() * 12)) {
    case 0:
      if (doc.match?.['case-sensitive'] === undefined) doc.match = { 'case-sensitive': chance(random, 0.5) };
      else if (chance(random, 0.5)) doc.match = { 'case-sensitive': !doc.match['case-sensitive'] };
      else delete doc.match;
      break;
    case 1:
      doc.default = pick(random, ['deny', 'authenticated', 'allow'] as const);
      break;
    case 2:
      if (route) route.permission = route.permission === undefined || route.public ? undefined : pick(random, ['a:read', 'a:write']);
      if (route?.permission === undefined && route) delete route.resource;
      break;
    case 3:
      if (route) route.methods = pick(random, [['GET'], ['POST'], ['GET', 'POST'], ['*']]);
      break;
    case 4:
      if (route?.resource) {
        route.resource.access = pick(random, ['READ', 'WRITE'] as const);
        route.resource.resolve = pick(random, ['optional', 'required'] as const);
      } else if (route) route.profile = route.profile === 'optional' ? 'required' : 'optional';
      break;
    case 5:
      if (route) route.mode = route.mode === 'shadow' ? 'enforce' : 'shadow';
      break;
    case 6:
      doc.routes?.reverse();
      break;
    case 7:
      doc.routes = [...(doc.routes ?? []), randomRoute(random)];
      break;
    case 8:
      doc.routes = (doc.routes ?? []).slice(1);
      break;
    case 9:
      // Another spelling of a static segment.
      if (route) route.path = route.path.replace(/[a-z]+/i, (segment) => pick(random, LABELS.filter((label) => label.toLowerCase() === segment.toLowerCase())) ?? segment);
      break;
    case 10:
      doc.resources = chance(random, 0.5) ? { A: { resolver: { url: 'http://h/a/{id}' } } } : {};
      break;
    default:
      return randomDocument(random);
  }
  return doc;
}

function compile(doc: PolicyFileDocument): CompiledPolicy | null {
  // JSON is YAML; indented so that every route has a line of its own (route ids are file:line).
  return compilePolicyFiles([{ file: 'p.yaml', text: JSON.stringify(doc, null, 1) }]).policy;
}

function spell(random: Random, segment: string): string {
  const choice = random();
  if (choice < 0.3) return segment;
  if (choice < 0.5) return segment.toUpperCase();
  if (choice < 0.7) return segment.toLowerCase();
  return [...segment].map((char) => (chance(random, 0.5) ? char.toUpperCase() : char.toLowerCase())).join('');
}

/** A request spelled from one of the patterns (any case; a parameter gets a fresh value or a label), or from labels alone. */
function randomRequest(random: Random, patterns: readonly string[]): string {
  const segments: string[] = [];
  if (patterns.length === 0 || chance(random, 0.15)) {
    const depth = 1 + Math.floor(random() * 4);
    for (let i = 0; i < depth; i++) segments.push(spell(random, pick(random, LABELS)));
  } else {
    for (const part of pick(random, patterns).split('/').slice(1)) {
      if (part === '**') {
        const extra = Math.floor(random() * 3);
        for (let i = 0; i < extra; i++) segments.push(chance(random, 0.5) ? spell(random, pick(random, LABELS)) : `x${i}`);
      } else if (part.startsWith(':')) segments.push(chance(random, 0.5) ? spell(random, pick(random, LABELS)) : `v${Math.floor(random() * 3)}`);
      else if (part !== '') segments.push(spell(random, part));
    }
  }
  return `/${segments.join('/')}${chance(random, 0.1) ? '/' : ''}`;
}

/** What the gateway does with the request, as `policy explain` finds it; which route or file:line decides is not a decision. */
function decisionOf(policy: CompiledPolicy, method: string, target: string): string {
  const explained = explainRequest(policy, method, target);
  if (!explained.normalized.ok) return 'bad request';
  if (explained.iam) return 'iam';
  const match = explained.match;
  if (match === null) {
    if (explained.refusal !== null) return 'deny';
    return explained.defaultAction === 'allow' ? 'open' : explained.defaultAction === 'deny' ? 'deny' : 'session required';
  }
  const route = match.route;
  if (route.public) return 'open';
  if (route.mode === 'shadow') return 'shadow';
  if (route.permission === null) return `session ${route.profile ?? 'required'}`;
  const resource = route.resource;
  const checked = resource === null ? '' : ` on ${resource.type} ${JSON.stringify(match.params[resource.idParam])} ${resource.access} resolve ${resource.resolve} via ${JSON.stringify(explained.resolver)}`;
  return `permission ${route.permission} profile ${route.profile ?? 'required'}${checked}`;
}

describe('policy diff: "no change" only when every request is decided the same', () => {
  it(`${PAIRS} random policy pairs, ${REQUESTS_PER_PAIR} requests each, against policy explain`, () => {
    const random = seededRandom(0x5eed_d1ff);
    const failures: string[] = [];
    let unchanged = 0;
    let unchangedButEdited = 0;
    for (let pair = 0; pair < PAIRS; pair++) {
      let docs: [PolicyFileDocument, PolicyFileDocument] | null = null;
      let policies: [CompiledPolicy, CompiledPolicy] | null = null;
      // Some random documents do not load (routes differing only in case, duplicate routes): draw again.
      for (let attempt = 0; attempt < 20 && policies === null; attempt++) {
        const before = randomDocument(random);
        const after = mutate(random, before);
        const compiled = [compile(before), compile(after)];
        if (compiled[0] && compiled[1]) {
          docs = [before, after];
          policies = [compiled[0], compiled[1]];
        }
      }
      if (policies === null || docs === null) continue;
      const [before, after] = policies;
      const diff = diffPolicies(before, after);
      if (diff.changes.length > 0 || diff.resources.length > 0) continue;
      unchanged++;
      if (JSON.stringify(docs[0]) !== JSON.stringify(docs[1])) unchangedButEdited++;
      const patterns = [...before.routes, ...after.routes].map((route) => route.pattern);
      for (let i = 0; i < REQUESTS_PER_PAIR; i++) {
        const method = pick(random, METHODS);
        const target = randomRequest(random, patterns);
        const [old, now] = [decisionOf(before, method, target), decisionOf(after, method, target)];
        if (old !== now) {
          failures.push(`pair ${pair}: ${method} ${target}: ${old} → ${now}\n  old ${JSON.stringify(docs[0])}\n  new ${JSON.stringify(docs[1])}`);
          break;
        }
      }
    }
    expect(failures.slice(0, 3)).toEqual([]);
    // Not vacuous: many pairs are called unchanged, most of them after a real edit.
    expect(unchanged).toBeGreaterThan(PAIRS / 8);
    expect(unchangedButEdited).toBeGreaterThan(PAIRS / 16);
  });
});
