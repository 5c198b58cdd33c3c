/**
 * Round 3, open redirect after login: the `returnTo` carried through an OpenID Connect login is checked in the form
 * the gateway emits it as `Location` after the callback, not in the form the client gave it. Values that pass a check
 * of the raw string but resolve to `//evil.test/x` after dot-segment removal send the browser home instead.
 * (The password form's cases are in browser-session.test.ts; the validator's property test in test/unit/return-to.test.ts.)
 */
import { freePort } from '../support/front-proxy';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { startTestOp, type TestOp } from '../support/oidc-op';

const CLIENT = { id: 'iam-gateway', secret: 'gateway-secret-for-redirect-tests' };
/** A user the gateway does not know yet: created at the first login (`iam.oidc.users: jit`). */
const ACCOUNTS = { walker: { sub: 'u-redirect-walker', password: 'walker-password', claims: { name: 'Walker' } } };

let op: TestOp;
let fixture: GatewayWithUpstream;
let gw: string;

beforeAll(async () => {
  const port = await freePort();
  op = await startTestOp({
    clients: [
      {
        client_id: CLIENT.id,
        client_secret: CLIENT.secret,
        redirect_uris: [`http://127.0.0.1:${port}/iam/auth/oidc/callback`],
        post_logout_redirect_uris: [`http://127.0.0.1:${port}/logged-out`],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    accounts: ACCOUNTS,
  });
  fixture = await startGatewayWithUpstream({
    PORT: String(port),
    IAM_POLICIES_DIR: E2E_POLICIES,
    IAM_AUTHENTICATOR_TYPE: 'oidc',
    IAM_OIDC_ISSUER: op.issuer,
    IAM_OIDC_CLIENT_ID: CLIENT.id,
    IAM_OIDC_CLIENT_SECRET: CLIENT.secret,
    IAM_OIDC_REDIRECT_URI: `http://127.0.0.1:${port}/iam/auth/oidc/callback`,
    IAM_OIDC_POST_LOGOUT_REDIRECT_URI: `http://127.0.0.1:${port}/logged-out`,
  });
  gw = fixture.gateway.url;
}, 60_000);
afterAll(async () => {
  await fixture?.close();
  await op?.close();
});

const send = (url: string, init: RequestInit = {}): Promise<Response> => fetch(url, { redirect: 'manual', ...init });
const cookieValue = (answer: Response, name: string): string | null => {
  for (const line of answer.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const at = pair!.indexOf('=');
    if (pair!.slice(0, at) === name) return pair!.slice(at + 1);
  }
  return null;
};

/** A whole login with `returnTo`; resolves the callback's `Location`. */
async function loginReturningTo(returnTo: string): Promise<string | null> {
  const started = await send(`${gw}/iam/auth/oidc/login?returnTo=${encodeURIComponent(returnTo)}`);
  expect(started.status).toBe(302);
  const stateCookie = cookieValue(started, '__Host-iam-oidc')!;
  const callback = await op.loginThrough(started.headers.get('location')!, 'walker', ACCOUNTS.walker.password, `${gw}/iam/auth/oidc/callback`);
  const answer = await send(callback, { headers: { cookie: `__Host-iam-oidc=${stateCookie}` } });
  expect(answer.status).toBe(303);
  return answer.headers.get('location');
}

describe('the OpenID Connect callback redirect', () => {
  it('keeps a same-origin returnTo', async () => {
    expect(await loginReturningTo('/api/projects?page=2')).toBe('/api/projects?page=2');
  });

  it.each(['/.//evil.test/x', '/a/..//evil.test/x', '/%2e//evil.test/x', '//evil.test/x', '/\\evil.test', 'https://evil.test/'])(
    'never sends the browser off the gateway: returnTo %s',
    async (returnTo) => {
      const location = await loginReturningTo(returnTo);
      expect(location).toMatch(/^\/(?![/\\])/);
      expect(new URL(location!, 'https://gateway.test/iam/auth/oidc/callback').origin).toBe('https://gateway.test');
    },
  );
});

describe('the OpenID Connect logout redirect', () => {
  it('goes to the provider end-session endpoint named by its discovery, nowhere a client chose', async () => {
    const answer = await send(`${gw}/iam/auth/oidc/logout?returnTo=${encodeURIComponent('//evil.test/x')}&post_logout_redirect_uri=https://evil.test/`);
    expect(answer.status).toBe(302);
    const location = new URL(answer.headers.get('location')!);
    expect(location.origin).toBe(op.issuer);
    expect(location.searchParams.get('post_logout_redirect_uri')).toBe(`${gw}/logged-out`);
  });
});
