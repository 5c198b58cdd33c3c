/**
 * The authorization result carries the identity headers (gateway/request-authorizer.ts): built with the decision, for
 * the request that was decided, so the proxy, a WebSocket upgrade and forward-auth send exactly what was decided. A
 * signer that fails makes the request a 500, never an allowed request without its headers.
 */
import type { AuthorizationDecision } from '../../src/authz/decision';
import { RequestAuthorizer, type Authorization } from '../../src/gateway/request-authorizer';
import type { PreparedRequest } from '../../src/http/prepare-request';
import { createLogger } from '../../src/observability/logger';
import { createMetrics } from '../../src/observability/metrics';
import { compilePolicyFiles } from '../../src/policy/load-policy-directory';
import type { VerifiedSession } from '../../src/sessions/session-service';

const TOKEN = `iamt_${'A'.repeat(43)}`;
const POLICY = compilePolicyFiles([
  { file: 'p.yaml', text: 'version: 1\nroutes:\n  - { path: /api/x, methods: [GET], permission: "x:read" }\n  - { path: /open, methods: [GET], public: true }\n  - { path: /billing/x, methods: [GET], permission: "x:read", audience: billing }\n' },
]).policy!;
const SESSION = {
  tokenHash: 'h',
  record: { sessionId: 's-1', clientType: 'WEB', principal: { userId: 'u-alice', identityId: 'i-alice', identityDomain: 'example.com', activeProfileId: 'p-1', authorizationVersion: 1 } },
} as unknown as VerifiedSession;
const decision = (allowed: boolean): AuthorizationDecision =>
  ({ decisionId: 'd-1', allowed, permissionCode: 'x:read', profileId: 'p-1', userId: 'u-alice', steps: [], status: allowed ? 200 : 403, problemCode: allowed ? null : 'IAM_ACCESS_DENIED', failedStep: null, shadowed: false, evaluatedAt: '' }) as unknown as AuthorizationDecision;
const request = (path: string, authorization: string | null): PreparedRequest =>
  ({ method: 'GET', path, authorization, cookieSession: null, requestId: 'r-1', clientAddress: '127.0.0.1' }) as unknown as PreparedRequest;

function authorizer(signAssertion: ((decision: AuthorizationDecision, session: VerifiedSession, method: string, path: string, requestId: string, audience: string | null) => string) | null) {
  const errors: unknown[] = [];
  const logger = createLogger('silent');
  logger.error = ((object: unknown) => void errors.push(object)) as typeof logger.error;
  const subject = new RequestAuthorizer({
    policy: () => POLICY,
    callers: { sessionOf: () => SESSION },
    engine: {
      decideRequestFast: (input) => (input.subject === null ? { ...decision(true), userId: null, profileId: null } : decision(true)) as AuthorizationDecision,
      coveredFast: () => ({ kind: 'ALL' }),
    },
    audit: { record: () => undefined, recordUnauthenticated: () => undefined },
    metrics: createMetrics({ collectDefaults: false }),
    logger,
    trustedOrigins: new Set(),
    signAssertion,
  });
  return { subject, errors };
}

describe('the authorization result carries the identity headers', () => {
  it('an allowed request: the principal, the session and the assertion signed for the decided request', async () => {
    const { subject } = authorizer((_decision, session, method, path, requestId) => `signed ${session.record.principal.userId} ${method} ${path} ${requestId}`);
    const outcome = (await subject.authorizeFast(request('/api/x', `Bearer ${TOKEN}`), '127.0.0.1')) as Extract<Authorization, { allowed: true }>;
    expect(outcome.allowed).toBe(true);
    expect(outcome.identity).toEqual(
      expect.arrayContaining([
        ['X-IAM-User-Id', 'u-alice'],
        ['X-IAM-Session-Id', 's-1'],
        ['X-IAM-Assertion', 'signed u-alice GET /api/x r-1'],
      ]),
    );
  });

  it('the assertion is signed for the matched route\'s audience; a route without one leaves the configured audience', async () => {
    const { subject } = authorizer((_decision, _session, _method, path, _requestId, audience) => `${path} for ${audience ?? 'the configured audience'}`);
    const assertionOf = async (path: string) => ((await subject.authorizeFast(request(path, `Bearer ${TOKEN}`), '127.0.0.1')) as Extract<Authorization, { allowed: true }>).identity!.find(([name]) => name === 'X-IAM-Assertion')![1];
    expect(await assertionOf('/billing/x')).toBe('/billing/x for billing');
    expect(await assertionOf('/api/x')).toBe('/api/x for the configured audience');
  });

  it('an anonymous request on a public route carries none', async () => {
    const { subject } = authorizer(() => 'never');
    const outcome = await subject.authorizeFast(request('/open', null), '127.0.0.1');
    expect(outcome).toMatchObject({ allowed: true, identity: null });
  });

  it('a signer that fails: a logged 500, never allowed without the headers', async () => {
    const { subject, errors } = authorizer(() => {
      throw new Error('signer broke');
    });
    const outcome = await subject.authorizeFast(request('/api/x', `Bearer ${TOKEN}`), '127.0.0.1');
    expect(outcome.allowed).toBe(false);
    expect(outcome.allowed === false && outcome.problem.status).toBe(500);
    expect(errors).toEqual([expect.objectContaining({ err: expect.any(Error), requestId: 'r-1' })]);
  });
});
