/**
 * The decision engine, driven by data: every file in test/fixtures/decisions/*.yaml is a list of cases run
 * against the fixed policy test/fixtures/decisions/policy/gateway.yaml, compiled by the real policy compiler.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv, { type JSONSchemaType } from 'ajv';
import { parse as parseYaml } from 'yaml';
import type { IamPrincipal } from '../../src/domain/principal';
import { decide, require as requireAllowed } from '../../src/authz/decide';
import { DecisionEngine, problemFromDecision, type DecisionSubject } from '../../src/authz/decision-engine';
import { GrantProvider } from '../../src/authz/grant-provider';
import type { ResolveResult } from '../../src/authz/resource-resolver';
import type { CompiledPolicy, DefaultAction, ResourceResolverConfig } from '../../src/policy/compiled-policy';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import { DatabaseUnavailableError } from '../../src/domain/iam-repository';
import type { ProfileRecord, ScopeRecord, TemplateRecord, UserRecord } from '../../src/domain/records';
import { isProblemError } from '../../src/domain/problem';

const FIXTURES = join(__dirname, '../fixtures/decisions');
const STEP_CODES = [
  'AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_GRANTED', 'UNAUTHENTICATED', 'NO_ACTIVE_PROFILE',
  'DOMAIN_MISMATCH', 'CLIENT_TYPE_MISMATCH', 'PERMISSION_DENIED', 'RESOURCE_NOT_FOUND', 'RESOURCE_RESOLUTION_UNAVAILABLE', 'SCOPE_DENIED',
  'ROUTE_NOT_DECLARED',
];

// ---------------------------------------------------------------- case format (validated: a typo fails the run)

type ResolverAnswers = Record<string, Record<string, Array<{ type: string; id: string }> | 404> | 'down'>;
interface DecisionCase {
  name: string;
  default?: DefaultAction;
  principal: { permissions: string[]; scopes?: ScopeRecord[]; clientTypes?: string[]; domain?: string; profile?: boolean; profileState?: 'disabled' | 'revoked' | 'foreign' | 'missing' } | null;
  request:
    | { method: string; path: string }
    | { permissionCode: string; resourceType?: string; resourceId?: string; scopeAccess?: 'READ' | 'WRITE'; domain?: string; clientType?: string };
  resolver?: ResolverAnswers;
  expect: {
    allowed: boolean;
    failedStep?: string;
    status?: number;
    problemCode?: string;
    steps?: string[];
    shadowed?: boolean;
    resolverCalls?: number;
    route?: string;
  };
}

const strict = { additionalProperties: false } as const;
const caseFileSchema = {
  type: 'object',
  ...strict,
  required: ['cases'],
  properties: {
    cases: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        ...strict,
        required: ['name', 'principal', 'request', 'expect'],
        properties: {
          name: { type: 'string' },
          default: { enum: ['deny', 'authenticated', 'allow'] },
          principal: {
            type: ['object', 'null'],
            ...strict,
            required: ['permissions'],
            properties: {
              permissions: { type: 'array', items: { type: 'string' } },
              scopes: {
                type: 'array',
                items: {
                  type: 'object',
                  ...strict,
                  required: ['scopeType', 'scopeRefId', 'accessMode'],
                  properties: { scopeType: { type: 'string' }, scopeRefId: { type: 'string' }, accessMode: { enum: ['READ', 'WRITE'] } },
                },
              },
              clientTypes: { type: 'array', items: { type: 'string' } },
              domain: { type: 'string' },
              profile: { type: 'boolean' },
              profileState: { enum: ['disabled', 'revoked', 'foreign', 'missing'] },
            },
          },
          request: {
            oneOf: [
              { type: 'object', ...strict, required: ['method', 'path'], properties: { method: { type: 'string' }, path: { type: 'string' } } },
              {
                type: 'object',
                ...strict,
                required: ['permissionCode'],
                properties: {
                  permissionCode: { type: 'string' },
                  resourceType: { type: 'string' },
                  resourceId: { type: 'string' },
                  scopeAccess: { enum: ['READ', 'WRITE'] },
                  domain: { type: 'string' },
                  clientType: { type: 'string' },
                },
              },
            ],
          },
          resolver: {
            type: 'object',
            additionalProperties: {
              oneOf: [
                { const: 'down' },
                {
                  type: 'object',
                  additionalProperties: {
                    oneOf: [
                      { const: 404 },
                      { type: 'array', items: { type: 'object', ...strict, required: ['type', 'id'], properties: { type: { type: 'string' }, id: { type: 'string' } } } },
                    ],
                  },
                },
              ],
            },
          },
          expect: {
            type: 'object',
            ...strict,
            required: ['allowed'],
            properties: {
              allowed: { type: 'boolean' },
              failedStep: { enum: STEP_CODES },
              status: { type: 'integer' },
              problemCode: { type: 'string' },
              steps: { type: 'array', items: { enum: STEP_CODES } },
              shadowed: { type: 'boolean' },
              resolverCalls: { type: 'integer' },
              route: { type: 'string' },
            },
          },
        },
      },
    },
  },
} as unknown as JSONSchemaType<{ cases: DecisionCase[] }>;

function loadCaseFiles(): Array<{ file: string; cases: DecisionCase[] }> {
  const validate = new Ajv({ allErrors: true }).compile(caseFileSchema);
  return readdirSync(FIXTURES)
    .filter((name) => name.endsWith('.yaml'))
    .sort()
    .map((file) => {
      const document = parseYaml(readFileSync(join(FIXTURES, file), 'utf8'));
      if (!validate(document)) throw new Error(`${file}: ${JSON.stringify(validate.errors, null, 1)}`);
      return { file, cases: document.cases };
    });
}

// ---------------------------------------------------------------- the fixed policy, per default

const policyText = readFileSync(join(FIXTURES, 'policy/gateway.yaml'), 'utf8');
const policies = new Map<DefaultAction, CompiledPolicy>();
function policyWithDefault(action: DefaultAction): CompiledPolicy {
  let policy = policies.get(action);
  if (!policy) {
    const text = policyText.replace(/^default: deny$/m, `default: ${action}`);
    const result = compilePolicyFiles([{ file: 'gateway.yaml', text }]);
    if (!result.policy) throw new Error(`test policy does not compile: ${JSON.stringify(result.issues)}`);
    policy = result.policy;
    policies.set(action, policy);
  }
  return policy;
}

// ---------------------------------------------------------------- fakes: repository behind a real GrantProvider, resolver

const SESSION_CLIENT_TYPE = 'WEB';

function grantsFor(principal: NonNullable<DecisionCase['principal']>) {
  const user: UserRecord = { userId: 'u-test', displayName: null, enabled: true, authorizationVersion: 1, createdAt: new Date(0), updatedAt: new Date(0), version: 1 };
  const profile: ProfileRecord = {
    profileId: principal.profileState === 'missing' ? 'p-gone' : 'p-test',
    userId: principal.profileState === 'foreign' ? 'u-other' : 'u-test',
    profileName: 'test profile',
    templateVersionId: 't-test',
    clientTypes: principal.clientTypes ?? ['WEB', 'API'],
    enabled: principal.profileState !== 'disabled',
    revoked: principal.profileState === 'revoked',
    unscoped: (principal.scopes ?? []).length === 0,
    scopes: principal.scopes ?? [],
    version: 1,
  };
  const template: TemplateRecord = { versionId: 't-test', name: 'test', description: null, permissions: principal.permissions, version: 1 };
  const repository = {
    getUser: async () => user,
    getProfile: async (id: string) => (id === profile.profileId ? profile : null),
    getTemplate: async (id: string) => (id === template.versionId ? template : null),
  };
  return new GrantProvider({ repository, maxEntries: 10, trustCache: () => true });
}

function subjectFor(principal: NonNullable<DecisionCase['principal']>): DecisionSubject {
  const iamPrincipal: IamPrincipal = {
    userId: 'u-test',
    identityId: 'id-test',
    identityDomain: principal.domain ?? 'example.com',
    activeProfileId: principal.profile === false ? null : 'p-test',
    authorizationVersion: 1,
  };
  return { principal: iamPrincipal, clientType: SESSION_CLIENT_TYPE };
}

class FakeResolver {
  calls: Array<{ type: string; id: string; url: string }> = [];
  constructor(private readonly answers: ResolverAnswers = {}) {}
  async resolve(config: ResourceResolverConfig, type: string, id: string): Promise<ResolveResult> {
    this.calls.push({ type, id, url: config.url });
    const answers = this.answers[type];
    if (answers === undefined) throw new Error(`test case did not expect the ${type} resolver to be called`);
    if (answers === 'down') return { kind: 'unavailable', reason: `resolver for ${type} unreachable (ECONNREFUSED)` };
    const answer = answers[id];
    if (answer === undefined || answer === 404) return { kind: 'not-found' };
    return { kind: 'found', scopeRefs: answer };
  }
}

// ---------------------------------------------------------------- the cases

describe.each(loadCaseFiles())('decision cases: $file', ({ cases }) => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, testCase) => {
    const policy = policyWithDefault(testCase.default ?? 'deny');
    const resolver = new FakeResolver(testCase.resolver);
    const principal = testCase.principal;
    const engine = new DecisionEngine({
      grants: principal ? grantsFor(principal) : { getGrant: async () => { throw new Error('no principal: no grant may be asked for'); } },
      resolvers: resolver,
    });
    const subject = principal ? subjectFor(principal) : null;
    const request = testCase.request;

    let decision;
    if ('method' in request) {
      decision = await engine.decideRequest({ method: request.method, path: request.path, policy, subject });
    } else {
      if (!subject) throw new Error('diagnostics cases need a principal');
      decision = await engine.decide({
        subject,
        permissionCode: request.permissionCode,
        resource: request.resourceType
          ? { type: request.resourceType, id: request.resourceId ?? '', access: request.scopeAccess ?? 'READ', resolve: 'optional' }
          : null,
        expectedDomain: request.domain,
        expectedClientType: request.clientType,
        resources: policy.resources,
      });
    }

    const expected = testCase.expect;
    expect(decision.allowed).toBe(expected.allowed);
    expect(decision.shadowed).toBe(expected.shadowed ?? false);
    if (expected.failedStep !== undefined) expect(decision.failedStep).toBe(expected.failedStep);
    if (expected.status !== undefined) expect(decision.status).toBe(expected.status);
    if (expected.problemCode !== undefined) expect(decision.problemCode).toBe(expected.problemCode);
    if (expected.steps !== undefined) expect(decision.steps.map((step) => step.code)).toEqual(expected.steps);
    if (expected.resolverCalls !== undefined) expect(resolver.calls).toHaveLength(expected.resolverCalls);
    if (expected.route !== undefined) expect(decision.route?.id).toBe(expected.route);

    // Invariants of every decision.
    expect(decision.decisionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.isNaN(Date.parse(decision.evaluatedAt))).toBe(false);
    const failedSteps = decision.steps.filter((step) => !step.passed);
    if (decision.failedStep === null) {
      expect(decision.allowed).toBe(true);
      expect(decision.status).toBe(200);
      expect(decision.problemCode).toBeNull();
      expect(failedSteps).toHaveLength(0);
    } else {
      expect(decision.allowed).toBe(decision.shadowed);
      expect(failedSteps).toEqual([decision.steps[decision.steps.length - 1]]);
      expect(failedSteps[0].code).toBe(decision.failedStep);
      expect(decision.status).toBeGreaterThanOrEqual(400);
      expect(decision.problemCode).not.toBeNull();
    }
    for (const step of decision.steps) expect(step.reason.length).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------- engine behaviour beyond the tables

describe('DecisionEngine', () => {
  const policy = policyWithDefault('deny');
  const reader = { permissions: ['project:read', 'project:update'], scopes: [{ scopeType: 'PROJECT', scopeRefId: '1', accessMode: 'READ' as const }] };

  it('explains a scope denial naming the profile, the resource and the access', async () => {
    const engine = new DecisionEngine({ grants: grantsFor(reader), resolvers: new FakeResolver({ PROJECT: { '2': [{ type: 'PROJECT', id: '2' }] } }) });
    const decision = await engine.decideRequest({ method: 'PUT', path: '/api/projects/2', policy, subject: subjectFor(reader) });
    expect(decision.steps.at(-1)?.reason).toBe('profile p-test has no scope covering PROJECT 2 for WRITE');
    expect(decision).toMatchObject({
      permissionCode: 'project:update',
      profileId: 'p-test',
      userId: 'u-test',
      route: { id: 'gateway.yaml:23', pattern: '/api/projects/:projectId', file: 'gateway.yaml', line: 23, mode: 'enforce', public: false },
      resource: { type: 'PROJECT', id: '2', access: 'WRITE', scopeRefs: [{ type: 'PROJECT', id: '2' }] },
    });
  });

  it('passes the resolver the policy config and the id from the path', async () => {
    const resolver = new FakeResolver({ TASK: { '5': [{ type: 'PROJECT', id: '7' }] } });
    const engine = new DecisionEngine({ grants: grantsFor({ permissions: ['task:delete'] }), resolvers: resolver });
    await engine.decideRequest({ method: 'DELETE', path: '/api/tasks/5', policy, subject: subjectFor({ permissions: [] }) });
    expect(resolver.calls).toEqual([{ type: 'TASK', id: '5', url: 'http://resolver.invalid/tasks/{id}' }]);
  });

  it('loads the grant once and serves later decisions from the cache', async () => {
    const provider = grantsFor(reader);
    const engine = new DecisionEngine({ grants: provider, resolvers: new FakeResolver() });
    const first = await engine.decideRequest({ method: 'GET', path: '/api/projects', policy, subject: subjectFor(reader) });
    for (let i = 0; i < 4; i++) {
      const decision = await engine.decideRequest({ method: 'GET', path: '/api/projects', policy, subject: subjectFor(reader) });
      expect(decision.steps).toEqual(first.steps);
    }
    expect(provider.stats()).toEqual({ size: 1, hits: 4, misses: 1 });
  });

  it('turns a throwing resolver into a 502 RESOURCE_RESOLUTION_UNAVAILABLE', async () => {
    const engine = new DecisionEngine({
      grants: grantsFor(reader),
      resolvers: { resolve: async () => { throw new Error('socket hang up at 10.0.0.1'); } },
    });
    const decision = await engine.decideRequest({ method: 'GET', path: '/api/projects/1', policy, subject: subjectFor(reader) });
    expect(decision).toMatchObject({ allowed: false, failedStep: 'RESOURCE_RESOLUTION_UNAVAILABLE', status: 502, problemCode: 'IAM_UPSTREAM_UNAVAILABLE' });
    expect(JSON.stringify(decision)).not.toContain('10.0.0.1');
  });

  it('rejects when the grant cannot be loaded (the caller answers 503)', async () => {
    const engine = new DecisionEngine({
      grants: { getGrant: async () => { throw new DatabaseUnavailableError('down'); } },
      resolvers: new FakeResolver(),
    });
    await expect(engine.decideRequest({ method: 'GET', path: '/api/projects', policy, subject: subjectFor(reader) })).rejects.toBeInstanceOf(
      DatabaseUnavailableError,
    );
  });

  it('gives every decision its own id', async () => {
    const engine = new DecisionEngine({ grants: grantsFor(reader), resolvers: new FakeResolver() });
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add((await engine.decideRequest({ method: 'GET', path: '/health', policy, subject: null })).decisionId);
    expect(ids.size).toBe(20);
  });
});

describe('problemFromDecision, decide() and require()', () => {
  const policy = policyWithDefault('deny');
  const principal = { permissions: ['project:read'] };
  const engine = new DecisionEngine({
    grants: grantsFor(principal),
    resolvers: new FakeResolver({ PROJECT: 'down', TASK: { '404': 404 } }),
  });
  const subject = subjectFor(principal);

  it('builds a 403 problem with decisionId and the failed step', async () => {
    const decision = await engine.decideRequest({ method: 'GET', path: '/api/projects', policy, subject });
    const problem = problemFromDecision(decision);
    expect(problem.code).toBe('IAM_ACCESS_DENIED');
    expect(problem.status).toBe(403);
    expect(problem.toBody('/api/projects', 'req-1')).toMatchObject({ decisionId: decision.decisionId, step: 'PERMISSION_DENIED', status: 403 });
  });

  it('builds a 401 with a Bearer challenge, invalid_token when a token was sent', async () => {
    const decision = await engine.decideRequest({ method: 'GET', path: '/api/projects', policy, subject: null });
    expect(problemFromDecision(decision).headers['WWW-Authenticate']).toBe('Bearer realm="iam-gateway"');
    const withToken = problemFromDecision(decision, { tokenSent: true });
    expect(withToken.code).toBe('IAM_UNAUTHENTICATED');
    expect(withToken.headers['WWW-Authenticate']).toContain('error="invalid_token"');
    expect(withToken.extensions).toMatchObject({ step: 'UNAUTHENTICATED' });
  });

  it('keeps resolver internals out of a 502 problem', async () => {
    const decision = await engine.decideRequest({ method: 'GET', path: '/api/projects/1', policy, subject });
    const problem = problemFromDecision(decision);
    expect(problem.code).toBe('IAM_UPSTREAM_UNAVAILABLE');
    expect(problem.message).not.toContain('ECONNREFUSED');
  });

  it('describes the would-be answer of a shadowed decision', async () => {
    const decision = await engine.decideRequest({ method: 'GET', path: '/api/beta/x', policy, subject });
    expect(decision.allowed).toBe(true);
    expect(problemFromDecision(decision).code).toBe('IAM_ACCESS_DENIED');
  });

  it('refuses to build a problem from an allowing decision', async () => {
    const decision = await engine.decideRequest({ method: 'GET', path: '/health', policy, subject: null });
    expect(() => problemFromDecision(decision)).toThrow(TypeError);
  });

  it('decide() returns denials; require() throws them as problems and resolves allowed decisions', async () => {
    const denied = { subject, permissionCode: 'project:delete', resource: null, resources: policy.resources };
    expect((await decide(engine, denied)).failedStep).toBe('PERMISSION_DENIED');
    const error = await requireAllowed(engine, denied).catch((e: unknown) => e);
    expect(isProblemError(error) && error.code).toBe('IAM_ACCESS_DENIED');
    expect(isProblemError(error) && error.extensions.step).toBe('PERMISSION_DENIED');
    expect(isProblemError(error) && typeof error.extensions.decisionId).toBe('string');

    const notFound = await requireAllowed(engine, {
      subject,
      permissionCode: 'project:read',
      resource: { type: 'TASK', id: '404', access: 'READ', resolve: 'required' },
      resources: policy.resources,
    }).catch((e: unknown) => e);
    expect(isProblemError(notFound) && notFound.code).toBe('IAM_RESOURCE_NOT_FOUND');

    const allowed = await requireAllowed(engine, { subject, permissionCode: 'project:read', resource: null, resources: policy.resources });
    expect(allowed.allowed).toBe(true);
  });
});

describe('DecisionEngine.plan: which resources of a type a subject reaches', () => {
  const plan = (principal: NonNullable<DecisionCase['principal']>, permissionCode: string, resourceType: string, access: 'READ' | 'WRITE', clientType = SESSION_CLIENT_TYPE) =>
    new DecisionEngine({ grants: grantsFor(principal), resolvers: new FakeResolver() }).plan({ subject: { ...subjectFor(principal), clientType }, permissionCode, resourceType, access });
  const scope = (scopeType: string, scopeRefId: string, accessMode: 'READ' | 'WRITE'): ScopeRecord => ({ scopeType, scopeRefId, accessMode });

  it.each([
    ['an unscoped profile', { permissions: ['project:read'] }, 'READ', { kind: 'ALL' }],
    ['a * scope of the type', { permissions: ['project:read'], scopes: [scope('PROJECT', '*', 'READ')] }, 'READ', { kind: 'ALL' }],
    ['the covering ids, sorted and once', { permissions: ['project:read'], scopes: [scope('PROJECT', '2', 'READ'), scope('PROJECT', '10', 'WRITE'), scope('PROJECT', '2', 'WRITE')] }, 'READ', { kind: 'SOME', ids: ['10', '2'] }],
    ['WRITE: READ scopes do not cover it', { permissions: ['project:read'], scopes: [scope('PROJECT', '1', 'READ'), scope('PROJECT', '3', 'WRITE')] }, 'WRITE', { kind: 'SOME', ids: ['3'] }],
    ['a * READ scope for WRITE', { permissions: ['project:read'], scopes: [scope('PROJECT', '*', 'READ')] }, 'WRITE', { kind: 'NONE' }],
    ['scopes of another type only', { permissions: ['project:read'], scopes: [scope('TASK', '1', 'WRITE')] }, 'READ', { kind: 'NONE' }],
    ['the permission not granted', { permissions: ['task:read'] }, 'READ', { kind: 'NONE' }],
    ['a disabled profile', { permissions: ['project:read'], profileState: 'disabled' as const }, 'READ', { kind: 'NONE' }],
    ['no active profile', { permissions: ['project:read'], profile: false }, 'READ', { kind: 'NONE' }],
  ] as Array<[string, NonNullable<DecisionCase['principal']>, 'READ' | 'WRITE', unknown]>)('%s', async (_name, principal, access, expected) => {
    const { plan: answer, decision } = await plan(principal, 'project:read', 'PROJECT', access);
    expect(answer).toEqual(expected);
    expect(decision.allowed).toBe((expected as { kind: string }).kind !== 'NONE' || (principal.scopes ?? []).length > 0);
  });

  it('a client type the profile does not serve: NONE, and the decision says why', async () => {
    const { plan: answer, decision } = await plan({ permissions: ['project:read'], clientTypes: ['WEB'] }, 'project:read', 'PROJECT', 'READ', 'API');
    expect(answer).toEqual({ kind: 'NONE' });
    expect(decision.failedStep).toBe('CLIENT_TYPE_MISMATCH');
  });
});
