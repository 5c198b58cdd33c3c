/**
 * The candidate policy deciding beside the live one (gateway/candidate-decisions.ts): divergences counted, summarized
 * per route and bounded; the live decision's grant and resolution reused; `unknown` instead of any call of its own.
 */
import { DecisionEngine, type DecisionSubject } from '../../src/authz/decision-engine';
import { GrantProvider } from '../../src/authz/grant-provider';
import type { ResolveResult } from '../../src/authz/resource-resolver';
import type { ProfileRecord, TemplateRecord, UserRecord } from '../../src/domain/records';
import { CandidateDecisions, MAX_EXAMPLES, MAX_ROUTES } from '../../src/gateway/candidate-decisions';
import { createMetrics } from '../../src/observability/metrics';
import { CandidatePolicyHolder } from '../../src/policy/candidate-holder';
import type { CompiledPolicy } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';

function policyOf(yaml: string): CompiledPolicy {
  const result = compilePolicyFiles([{ file: 'p.yaml', text: yaml }]);
  if (!result.policy) throw new Error(result.issues.map((issue) => issue.message).join('\n'));
  return result.policy;
}

const RESOLVER = 'resources: { PROJECT: { resolver: { url: "http://127.0.0.1:9/resolve/{id}" } } }';
const LIVE = policyOf(`version: 1
${RESOLVER}
routes:
  - { path: /api/projects, methods: [GET], permission: "project:read" }
  - { path: /api/projects/:projectId, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/stats, methods: [GET], permission: "stats:read" }
  - { path: /api/open, methods: [GET], public: true }
  - { path: /api/tasks/:taskId, methods: [GET], permission: "project:read" }
`);

/** A user holding project:read (and nothing else) on project p1 for READ. */
function world() {
  const calls = { profile: 0, resolver: 0 };
  const user: UserRecord = { userId: 'u1', displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 };
  const profile: ProfileRecord = {
    profileId: 'p-1',
    userId: 'u1',
    profileName: 'reader',
    templateVersionId: 't-1',
    clientTypes: ['WEB'],
    enabled: true,
    revoked: false,
    unscoped: false,
    scopes: [{ scopeType: 'PROJECT', scopeRefId: 'p1', accessMode: 'READ' }],
    version: 1,
  };
  const template: TemplateRecord = { versionId: 't-1', name: 'reader', description: null, permissions: ['project:read'], version: 1 };
  const grants = new GrantProvider({
    repository: {
      getUser: async () => user,
      getProfile: async () => {
        calls.profile++;
        return profile;
      },
      getTemplate: async () => template,
    },
    maxEntries: 10,
    trustCache: () => true,
  });
  const resolve = async (_config: unknown, _type: string, id: string): Promise<ResolveResult> => {
    calls.resolver++;
    return id === 'gone' ? { kind: 'not-found' } : { kind: 'found', scopeRefs: [{ type: 'PROJECT', id }] };
  };
  const live = new DecisionEngine({ grants, resolvers: { resolve } });
  const subject: DecisionSubject = { principal: { userId: 'u1', identityId: 'i1', identityDomain: 'example.com', activeProfileId: 'p-1', authorizationVersion: 1 }, clientType: 'WEB' };
  return { calls, grants, live, subject };
}

function setup(candidateYaml: string, clock = { now: Date.parse('2026-11-28T10:00:00Z') }) {
  const w = world();
  const metrics = createMetrics({ collectDefaults: false });
  const holder = new CandidatePolicyHolder('/candidate');
  holder.swap(policyOf(candidateYaml));
  const candidates = new CandidateDecisions({ holder, grants: w.grants, metrics, now: () => clock.now });
  /** Decides like the proxy (live), then asks the candidate. */
  const request = async (method: string, path: string, subject: DecisionSubject | null = w.subject) => {
    const decision = await w.live.decideRequest({ method, path, policy: LIVE, subject });
    return { decision, divergence: candidates.compare({ method, path, decision, policy: LIVE, subject }) };
  };
  const divergences = async () => (await metrics.registry.getSingleMetric('iam_policy_candidate_divergences_total')!.get()).values.map((v) => ({ ...v.labels, value: v.value }));
  return { ...w, metrics, holder, candidates, request, divergences, clock };
}

describe('CandidateDecisions', () => {
  it('says nothing when the candidate decides the same (the same files, moved lines)', async () => {
    const t = setup(`version: 1
${RESOLVER}
routes:
  - { path: /api/tasks/:taskId, methods: [GET], permission: "project:read" }
  - { path: /api/open, methods: [GET], public: true }
  - { path: /api/stats, methods: [GET], permission: "stats:read" }
  - { path: /api/projects/:projectId, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: projectId, access: READ } }
  - { path: /api/projects, methods: [GET], permission: "project:read" }
`);
    for (const [path, subject] of [['/api/projects', t.subject], ['/api/stats', t.subject], ['/api/projects/p1', t.subject], ['/api/projects/p2', t.subject], ['/api/open', null], ['/api/projects', null], ['/nowhere', t.subject]] as const) {
      expect((await t.request('GET', path, subject)).divergence).toBeNull();
    }
    expect(await t.divergences()).toEqual([]);
    expect(t.candidates.divergences()).toMatchObject({ total: 0, routes: [], otherRoutes: 0 });
  });

  it('counts allow→deny and deny→allow with the candidate route, step and an example', async () => {
    const t = setup(`version: 1
${RESOLVER}
routes:
  - { path: /api/projects, methods: [GET], permission: "project:list" }
  - { path: /api/stats, methods: [GET], public: true }
`);
    const narrowed = await t.request('GET', '/api/projects');
    expect(narrowed.decision.allowed).toBe(true);
    expect(narrowed.divergence).toEqual({ live: 'allow', candidate: { decision: 'deny', step: 'PERMISSION_DENIED', route: '/api/projects' } });
    const widened = await t.request('GET', '/api/stats', null);
    expect(widened.decision.allowed).toBe(false);
    expect(widened.divergence).toEqual({ live: 'deny', candidate: { decision: 'allow', step: null, route: '/api/stats' } });
    // A request no candidate route declares: its default (deny) decides.
    expect((await t.request('GET', '/api/open', null)).divergence).toEqual({ live: 'allow', candidate: { decision: 'deny', step: 'ROUTE_NOT_DECLARED', route: null } });

    expect(await t.divergences()).toEqual(
      expect.arrayContaining([
        { live: 'allow', candidate: 'deny', value: 2 },
        { live: 'deny', candidate: 'allow', value: 1 },
      ]),
    );
    const summary = t.candidates.divergences()!;
    expect(summary.total).toBe(3);
    expect(summary.routes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ routeId: 'p.yaml:4', route: '/api/projects', allowToDeny: 1, denyToAllow: 0, unknown: 0 }),
        expect.objectContaining({ routeId: 'p.yaml:5', route: '/api/stats', allowToDeny: 0, denyToAllow: 1 }),
        expect.objectContaining({ routeId: null, route: null, allowToDeny: 1 }),
      ]),
    );
    const projects = summary.routes.find((route) => route.route === '/api/projects')!;
    expect(projects.examples).toEqual([
      {
        at: '2026-11-28T10:00:00.000Z',
        method: 'GET',
        path: '/api/projects',
        userId: 'u1',
        live: { decision: 'allow', step: null, route: '/api/projects', decisionId: narrowed.decision.decisionId },
        candidate: { decision: 'deny', step: 'PERMISSION_DENIED', route: '/api/projects' },
      },
    ]);
  });

  it("reuses the live decision's resolution: no resolver call of its own, the candidate's own access checked", async () => {
    const t = setup(`version: 1
${RESOLVER}
routes:
  - { path: /api/projects/:projectId, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: projectId, access: WRITE } }
`);
    const allowed = await t.request('GET', '/api/projects/p1');
    expect(allowed.decision.allowed).toBe(true);
    expect(allowed.divergence).toEqual({ live: 'allow', candidate: { decision: 'deny', step: 'SCOPE_DENIED', route: '/api/projects/:projectId' } });
    // Not found for the live decision: the candidate sees the same answer (404 both: no divergence).
    expect((await t.request('GET', '/api/projects/gone')).divergence).toBeNull();
    expect(t.calls.resolver).toBe(2);
  });

  it("does not reuse the live resolution when the candidate reads the same resolver's answer another way (scopes pointers, self)", async () => {
    for (const mapping of ['scopes: [{ type: PROJECT, id: /projectId }]', 'self: true']) {
      const t = setup(`version: 1
resources: { PROJECT: { resolver: { url: "http://127.0.0.1:9/resolve/{id}", ${mapping} } } }
routes:
  - { path: /api/projects/:projectId, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: projectId, access: READ } }
`);
      const answered = await t.request('GET', '/api/projects/p1');
      expect(answered.decision.allowed).toBe(true);
      // The live answer was read as a {scopes} document; the candidate's reading of it is not known: unknown, no call.
      expect(answered.divergence).toEqual({ live: 'allow', candidate: { decision: 'unknown', step: null, route: '/api/projects/:projectId' } });
      expect(t.calls.resolver).toBe(1);
    }
  });

  it('is unknown when it needs a resolution the live decision did not make, or a grant that is not cached', async () => {
    const t = setup(`version: 1
${RESOLVER}
routes:
  - { path: /api/tasks/:taskId, methods: [GET], permission: "project:read", resource: { type: PROJECT, id: taskId, access: READ } }
  - { path: /api/open, methods: [GET], permission: "project:read" }
`);
    // Live checks the permission only; the candidate would ask the resolver: unknown, and nobody is asked.
    expect((await t.request('GET', '/api/tasks/p1')).divergence).toEqual({ live: 'allow', candidate: { decision: 'unknown', step: null, route: '/api/tasks/:taskId' } });
    expect(t.calls.resolver).toBe(0);

    // A fresh world: the live route is public, so no grant was loaded; the candidate needs one: unknown, no database read.
    const fresh = setup(`version: 1
routes:
  - { path: /api/open, methods: [GET], permission: "project:read" }
`);
    expect((await fresh.request('GET', '/api/open')).divergence).toEqual({ live: 'allow', candidate: { decision: 'unknown', step: null, route: '/api/open' } });
    expect(fresh.calls.profile).toBe(0);
    expect(await fresh.divergences()).toEqual([{ live: 'allow', candidate: 'unknown', value: 1 }]);
    expect(fresh.candidates.divergences()!.routes[0]).toMatchObject({ unknown: 1, allowToDeny: 0 });
  });

  it('keeps at most 10 examples per route and 200 routes; scrubs token shapes from paths; a new candidate starts over', async () => {
    const routes = Array.from({ length: MAX_ROUTES + 5 }, (_, index) => `  - { path: /api/r${index}, methods: [GET], permission: "x:none" }`).join('\n');
    const t = setup(`version: 1\nroutes:\n  - { path: /api/projects, methods: [GET], permission: "project:list" }\n${routes}\n`);
    for (let index = 0; index < MAX_EXAMPLES + 3; index++) {
      t.clock.now += 1000;
      await t.request('GET', '/api/projects');
    }
    const projects = t.candidates.divergences()!.routes.find((route) => route.route === '/api/projects')!;
    expect(projects.allowToDeny).toBe(MAX_EXAMPLES + 3);
    expect(projects.examples).toHaveLength(MAX_EXAMPLES);
    expect(projects.examples[0]!.at > projects.examples[1]!.at).toBe(true);
    expect(projects.lastAt).toBe(projects.examples[0]!.at);

    // Live allows /api/tasks/:taskId; each candidate route denies one: 205 distinct routes, 200 itemized.
    // (Live has no route for /api/rN: both deny, no divergence — so use the tasks route under other ids.)
    const wide = setup(`version: 1\nroutes:\n${Array.from({ length: MAX_ROUTES + 5 }, (_, index) => `  - { path: /api/tasks/t${index}, methods: [GET], permission: "x:none" }`).join('\n')}\n`);
    for (let index = 0; index < MAX_ROUTES + 5; index++) await wide.request('GET', `/api/tasks/t${index}`);
    const summary = wide.candidates.divergences()!;
    expect(summary.routes).toHaveLength(MAX_ROUTES);
    expect(summary.otherRoutes).toBe(5);
    expect(summary.total).toBe(MAX_ROUTES + 5);

    await wide.request('GET', '/api/tasks/iamt_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0');
    expect(JSON.stringify(wide.candidates.divergences())).not.toContain('iamt_c2Vj');

    wide.holder.swap(policyOf('version: 1\nroutes:\n  - { path: /api/tasks/:taskId, methods: [GET], permission: "project:read" }\n'));
    expect(wide.candidates.divergences()).toMatchObject({ total: 0, routes: [], otherRoutes: 0 });
  });
});
