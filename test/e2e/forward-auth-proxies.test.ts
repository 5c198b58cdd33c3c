/**
 * #11.6: the forward-auth recipes of examples/forward-auth/ (shown verbatim in the README) run against a
 * real nginx (auth_request) and a real Caddy (forward_auth) in front of the recording host: the original
 * method is what is authorized, client X-IAM-* headers and the gateway's token never reach the host,
 * denials carry the problem body, and paths whose meaning depends on normalization are refused.
 */
import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { binaryAvailable, caddy, nginx, type FrontProxy, type FrontProxyKind } from '../support/front-proxy';
import { login, ROOT } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordedRequest, type RecordingUpstream } from '../support/recording-upstream';

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
}

/** One request sent exactly as written (raw path, raw headers), as an attacker would. */
function send(baseUrl: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) }, agent: false });
    req.once('error', reject);
    req.once('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body: text }));
    });
    req.end(body);
  });
}

const header = (recorded: RecordedRequest, name: string): string[] =>
  recorded.rawHeaders.flatMap((value, i) => (i % 2 === 1 && recorded.rawHeaders[i - 1]!.toLowerCase() === name ? [value] : []));
const iamHeaders = (recorded: RecordedRequest): Array<[string, string]> =>
  recorded.rawHeaders.flatMap((value, i) => (i % 2 === 1 && recorded.rawHeaders[i - 1]!.toLowerCase().startsWith('x-iam-') ? [[recorded.rawHeaders[i - 1]!.toLowerCase(), value] as [string, string]] : []));

function problemCode(answer: Answer): string {
  expect(answer.contentType).toMatch(/^application\/problem\+json/);
  return (JSON.parse(answer.body) as { code: string }).code;
}

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
/** alice on WEB: editor (project:list + project:create); alice on MOBILE: reader (project:list, GET only). */
let editorToken: string;
let readerToken: string;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ upstream, gateway } = fixture);
  editorToken = (await login(gateway.url, 'alice')).accessToken;
  readerToken = (await login(gateway.url, 'alice', 'alice-password', 'MOBILE')).accessToken;
});
afterAll(() => fixture?.close());

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

describe.each([nginx, caddy])('#11.6 forward-auth behind a real $name', (kind: FrontProxyKind) => {
  const installed = binaryAvailable(kind.binary);
  if (!installed && !process.env.CI) {
    // The one allowed skip: outside CI, without the Debian package (nginx-light / caddy).
    it.skip(`${kind.name} is not installed (apt-get install ${kind.name === 'nginx' ? 'nginx-light' : 'caddy'}); skipped outside CI`, () => undefined);
    return;
  }
  let proxy: FrontProxy;
  beforeAll(async () => {
    proxy = await kind.start(kind.recipe, gateway.port, upstream.port);
  });
  afterAll(async () => {
    await proxy?.close();
  });
  beforeEach(() => upstream.clear());
  const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

  it('#11.6: the README shows this recipe verbatim', () => {
    expect(README).toContain(kind.recipe.trim());
  });

  it('#11.6: a POST is authorized as a POST: a GET-only grant does not let it through, even with a forged method header', async () => {
    const forged = { 'x-forwarded-method': 'GET', 'x-original-method': 'GET' };
    const denied = await send(proxy.url, 'POST', '/api/projects', bearer(readerToken), '{"name":"x"}');
    expect(denied.status).toBe(403);
    expect(problemCode(denied)).toBe('IAM_ACCESS_DENIED');
    const forgedAnswer = await send(proxy.url, 'POST', '/api/projects', { ...bearer(readerToken), ...forged }, '{"name":"x"}');
    expect([400, 403]).toContain(forgedAnswer.status);
    expect(['IAM_BAD_REQUEST', 'IAM_ACCESS_DENIED']).toContain(problemCode(forgedAnswer));
    for (const method of ['PUT', 'DELETE', 'PATCH']) {
      expect((await send(proxy.url, method, '/api/projects', bearer(editorToken))).status).toBe(403);
    }
    expect(await upstream.requests()).toHaveLength(0);

    const allowedRead = await send(proxy.url, 'GET', '/api/projects', bearer(readerToken));
    expect(allowedRead.status).toBe(200);
    const created = await send(proxy.url, 'POST', '/api/projects', bearer(editorToken), '{"name":"x"}');
    expect(created.status).toBe(200);
    const [read, post] = await upstream.requests();
    expect(read).toMatchObject({ method: 'GET', url: '/api/projects' });
    expect(header(read!, 'x-iam-permission')).toEqual(['project:list']);
    expect(post).toMatchObject({ method: 'POST', url: '/api/projects', bodyText: '{"name":"x"}' });
    expect(header(post!, 'x-iam-permission')).toEqual(['project:create']);
  });

  it('#11.6: client X-IAM-* headers never reach the host; the identity headers are the gateway\'s', async () => {
    const spoofed = { 'X-IAM-User-Id': 'u-admin', 'X-IAM-Profile-Id': 'p-admin', 'X-IAM-Permission': '*:*', 'X-Iam-Extra': 'forged' };
    const withToken = await send(proxy.url, 'GET', '/api/projects', { ...bearer(editorToken), ...spoofed });
    const anonymous = await send(proxy.url, 'GET', '/health', spoofed);
    for (const answer of [withToken, anonymous]) {
      // nginx cannot strip headers by prefix, so the gateway refuses them (400); Caddy strips them.
      if (kind.name === 'nginx') expect(problemCode(answer)).toBe('IAM_BAD_REQUEST');
      else expect(answer.status).toBe(200);
    }
    const recorded = await upstream.requests();
    for (const request of recorded) {
      for (const [name, value] of iamHeaders(request)) {
        expect(name).not.toBe('x-iam-extra');
        expect(['u-admin', 'p-admin', '*:*']).not.toContain(value);
      }
    }
    if (kind.name === 'caddy') {
      expect(recorded).toHaveLength(2);
      expect(header(recorded[0]!, 'x-iam-user-id')).toEqual(['u-alice']);
      expect(iamHeaders(recorded[1]!)).toEqual([]);
    } else {
      expect(recorded).toHaveLength(0);
    }
  });

  it('#11.6: the gateway\'s bearer token does not reach the host (another Authorization does)', async () => {
    expect((await send(proxy.url, 'GET', '/api/projects', bearer(editorToken))).status).toBe(200);
    expect((await send(proxy.url, 'GET', '/health', bearer(editorToken))).status).toBe(200);
    expect((await send(proxy.url, 'GET', '/health', { authorization: 'Basic aG9zdDp1c2Vy' })).status).toBe(200);
    const [protectedRoute, publicRoute, basic] = await upstream.requests();
    expect(header(protectedRoute!, 'authorization')).toEqual([]);
    expect(header(publicRoute!, 'authorization')).toEqual([]);
    expect(JSON.stringify(protectedRoute!.rawHeaders) + JSON.stringify(publicRoute!.rawHeaders)).not.toContain('iamt_');
    expect(header(basic!, 'authorization')).toEqual(['Basic aG9zdDp1c2Vy']);
  });

  it('#11.6: 401 and 403 carry the problem body', async () => {
    const anonymous = await send(proxy.url, 'GET', '/api/projects');
    expect(anonymous.status).toBe(401);
    expect(problemCode(anonymous)).toBe('IAM_UNAUTHENTICATED');
    const revokedLooking = await send(proxy.url, 'GET', '/api/projects', bearer('iamt_' + 'A'.repeat(43)));
    expect(revokedLooking.status).toBe(401);
    expect(problemCode(revokedLooking)).toBe('IAM_UNAUTHENTICATED');
    const denied = await send(proxy.url, 'GET', '/api/admin/stats', bearer(editorToken));
    expect(denied.status).toBe(403);
    expect(problemCode(denied)).toBe('IAM_ACCESS_DENIED');
    expect(JSON.parse(denied.body)).toMatchObject({ step: 'PERMISSION_DENIED', decisionId: expect.any(String) });
    expect(await upstream.requests()).toHaveLength(0);
  });

  it.each([
    ['dot segments out of a public route', '/health/../api/admin/stats'],
    ['encoded dot segments', '/health/%2e%2e/api/admin/stats'],
    ['an encoded slash', '/health%2F..%2Fapi%2Fadmin%2Fstats'],
    ['an encoded slash in a protected route', '/api/projects%2F..%2Fadmin%2Fstats'],
    ['a repeated slash', '/api//admin/stats'],
    ['a backslash', '/health/..%5Capi/admin/stats'],
    ['a double encoding', '/health/%252e%252e/api/admin/stats'],
  ])('#11.6: %s is refused and never reaches the host', async (_name, path) => {
    for (const headers of [{}, bearer(editorToken)]) {
      const answer = await send(proxy.url, 'GET', path, headers);
      expect(answer.status).toBe(400);
      if (answer.contentType?.startsWith('application/problem+json')) expect(problemCode(answer)).toBe('IAM_BAD_REQUEST');
    }
    expect(await upstream.requests()).toHaveLength(0);
  });
});
