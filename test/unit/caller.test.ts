/**
 * The one caller step (src/auth/caller.ts): a request's credential to its caller or to the 401/403 answered instead,
 * for every place that reads one, each stating what it accepts. The assertion path reads the token store at most once
 * per call once a session is known, and a provider's JWT is only ever read where provider tokens are accepted.
 */
import { AssertionVerifier } from '../../src/auth/assertion-verifier';
import { CallerStep, PROTECTED, type CallerAccepts, type CallerStepDeps } from '../../src/auth/caller';
import type { AuthorizationDecision } from '../../src/authz/decision';
import { ProblemError } from '../../src/domain/problem';
import { StoreUnavailableError } from '../../src/domain/token-store';
import { AssertionSigner } from '../../src/gateway/assertion-signer';
import type { RequestCredential } from '../../src/http/request-credential';
import type { VerifiedSession } from '../../src/sessions/session-service';

const TOKEN = `iamt_${'A'.repeat(43)}`;
const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln';
const session = (sessionId: string, tokenHash = `hash-${sessionId}`) =>
  ({ tokenHash, record: { sessionId, clientType: 'WEB', principal: { userId: 'u-alice' }, expiresAt: '', createdAt: '', idleTimeoutMs: 0 } }) as unknown as VerifiedSession;
const SESSION = session('s-1');
const PROVIDER = { ...session('at:1'), record: { ...session('at:1').record, source: 'access-token' } } as VerifiedSession;
const decision = { decisionId: 'd-1', allowed: true, permissionCode: 'x:read', profileId: 'p-1', userId: 'u-alice', steps: [], status: 200, problemCode: null, failedStep: null, shadowed: false, evaluatedAt: '' } as unknown as AuthorizationDecision;

const bearer = (token: string): RequestCredential => ({ kind: 'bearer', token });
const cookie = (crossSite = false): RequestCredential => ({ kind: 'cookie', token: TOKEN, crossSite });
const codeOf = (outcome: unknown) => (outcome instanceof ProblemError ? `${outcome.status} ${outcome.code}` : outcome);

/** A step over fake verifiers; the token store behind `liveSession` counts its reads as the real one makes them. */
function step(overrides: Partial<CallerStepDeps['sessions']> = {}, assertions: AssertionVerifier | null = null) {
  const reads = { index: 0, token: 0 };
  const live = new Map([['s-1', SESSION.tokenHash]]);
  const sessions: CallerStepDeps['sessions'] = {
    verifyCached: (token) => (token === TOKEN ? SESSION : 'miss'),
    verify: (token) => Promise.resolve(token === TOKEN ? SESSION : null),
    verifyFromRecord: (_token, error) => Promise.reject(error as Error),
    liveSession: async (_userId, sessionId, known) => {
      let tokenHash = known;
      if (tokenHash === undefined) {
        reads.index++;
        tokenHash = live.get(sessionId);
      }
      if (tokenHash === undefined) return null;
      reads.token++;
      return [...live.values()].includes(tokenHash) ? session(sessionId, tokenHash) : null;
    },
    ...overrides,
  };
  const accessTokens = { verifyCached: () => 'miss' as const, verify: (token: string) => Promise.resolve(token === JWT ? PROVIDER : null) };
  return { callers: new CallerStep({ sessions, accessTokens, assertions, audiences: () => new Set() }), reads, live };
}

describe('the caller step', () => {
  it('answers a warm bearer without a promise (the proxy\'s hot path)', () => {
    const outcome = step().callers.sessionOf(bearer(TOKEN), PROTECTED);
    expect(outcome).toBe(SESSION);
  });

  it.each<[string, RequestCredential, Partial<CallerAccepts>, string | null]>([
    ['no credential, on a protected endpoint', { kind: 'none' }, {}, '401 IAM_UNAUTHENTICATED'],
    ['no credential, at the proxy (the policy decides)', { kind: 'none' }, { anonymous: true }, null],
    ['a malformed Authorization', { kind: 'malformed' }, {}, '401 IAM_UNAUTHENTICATED'],
    ['a malformed Authorization, at the OpenID Connect logout', { kind: 'malformed' }, { optional: true }, null],
    ['an unknown token', bearer(`iamt_${'B'.repeat(43)}`), {}, '401 IAM_UNAUTHENTICATED'],
    ['an unknown token, at the OpenID Connect logout', bearer(`iamt_${'B'.repeat(43)}`), { optional: true }, null],
    ['a cross-site cookie', cookie(true), {}, '403 IAM_CSRF_REJECTED'],
    ['a cross-site cookie, at the OpenID Connect logout', cookie(true), { optional: true, anonymous: true }, '403 IAM_CSRF_REJECTED'],
    ['a provider token where they are not accepted', bearer(JWT), { providerTokens: false }, '401 IAM_UNAUTHENTICATED'],
  ])('%s', async (_case, credential, accepts, expected) => {
    expect(codeOf(await step().callers.callerOf(credential, { ...PROTECTED, ...accepts }))).toBe(expected);
  });

  it('says how the caller proved who they are', async () => {
    const { callers } = step();
    expect(await callers.callerOf(bearer(TOKEN), PROTECTED)).toEqual({ session: SESSION, via: 'bearer' });
    expect(await callers.callerOf(cookie(), PROTECTED)).toEqual({ session: SESSION, via: 'cookie' });
    expect(await callers.callerOf(bearer(JWT), PROTECTED)).toEqual({ session: PROVIDER, via: 'provider-token' });
  });

  it('the 401 challenge says invalid_token only when a token was sent', async () => {
    const { callers } = step();
    const none = (await callers.callerOf({ kind: 'none' }, PROTECTED)) as ProblemError;
    const unknown = (await callers.callerOf(bearer(`iamt_${'B'.repeat(43)}`), PROTECTED)) as ProblemError;
    expect(none.headers?.['WWW-Authenticate']).toBe('Bearer realm="iam-gateway"');
    expect(unknown.headers?.['WWW-Authenticate']).toMatch(/^Bearer realm="iam-gateway", error="invalid_token"/);
  });

  it('while the token store is down, only a logout falls back to the durable record', async () => {
    const down = new StoreUnavailableError('down');
    const overrides = { verifyCached: () => 'miss' as const, verify: () => Promise.reject(down), verifyFromRecord: () => Promise.resolve(SESSION) };
    await expect(step(overrides).callers.callerOf(bearer(TOKEN), PROTECTED)).rejects.toBe(down);
    expect(await step(overrides).callers.callerOf(bearer(TOKEN), { ...PROTECTED, durableFallback: true })).toEqual({ session: SESSION, via: 'bearer' });
  });

  describe('the gateway\'s own assertion as the bearer', () => {
    const signer = new AssertionSigner({ ttlMs: 60_000, issuer: 'iam-gateway', audience: null, keyFile: null });
    const assertion = (requestId: string) => signer.sign(decision, SESSION, 'GET', '/x', requestId);
    const HOST = { ...PROTECTED, assertion: true };

    it('names its live session, reading the token store at most once per call once the session is known', async () => {
      const { callers, reads } = step({}, new AssertionVerifier(signer.key));
      expect(await callers.callerOf(bearer(assertion('r-1')), HOST)).toMatchObject({ via: 'assertion', session: { record: { sessionId: 's-1' } } });
      expect(reads).toEqual({ index: 1, token: 1 });
      // Each request the host received carries a new assertion of the same session.
      for (const requestId of ['r-1', 'r-2', 'r-3']) await callers.callerOf(bearer(assertion(requestId)), HOST);
      expect(reads).toEqual({ index: 1, token: 4 });
    });

    it('is refused once its session ended, and is read as a token only where assertions are accepted', async () => {
      const { callers, live } = step({}, new AssertionVerifier(signer.key));
      const token = assertion('r-1');
      expect(await callers.callerOf(bearer(token), HOST)).toMatchObject({ via: 'assertion' });
      live.clear();
      expect(codeOf(await callers.callerOf(bearer(token), HOST))).toBe('401 IAM_UNAUTHENTICATED');
      expect(codeOf(await callers.callerOf(bearer(token), PROTECTED))).toBe('401 IAM_UNAUTHENTICATED');
    });
  });
});
