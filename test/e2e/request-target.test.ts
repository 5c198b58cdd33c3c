/**
 * docs/http-contract.md end to end: request targets are normalized once, before matching, and the host receives
 * exactly the path that was authorized; targets that cannot be interpreted safely never reach the host.
 * Raw sockets, so no client library normalizes anything first.
 */
import { connect } from 'node:net';
import type { RunningGateway } from '../../src/app/start-gateway';
import { login } from '../support/gateway';
import { E2E_POLICIES, startGatewayWithUpstream, type GatewayWithUpstream } from '../support/gateway-fixture';
import { type RecordingUpstream } from '../support/recording-upstream';

let fixture: GatewayWithUpstream;
let upstream: RecordingUpstream;
let gateway: RunningGateway;
let aliceToken: string;

beforeAll(async () => {
  fixture = await startGatewayWithUpstream({ IAM_POLICIES_DIR: E2E_POLICIES });
  ({ upstream, gateway } = fixture);
  aliceToken = (await login(gateway.url, 'alice')).accessToken;
});

afterAll(() => fixture?.close());

beforeEach(() => upstream.clear());

/** Sends bytes as they are and returns the status line's code. */
function raw(requestText: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(gateway.port, '127.0.0.1', () => socket.write(Buffer.from(requestText, 'latin1')));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      const match = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (match && data.includes('\r\n\r\n')) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    socket.setTimeout(5000, () => reject(new Error(`no answer to ${JSON.stringify(requestText.slice(0, 60))}`)));
  });
}

const get = (target: string, extra = ''): Promise<number> =>
  raw(`GET ${target} HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer ${aliceToken}\r\n${extra}Connection: close\r\n\r\n`);

describe('normalized before matching; the host sees the authorized path', () => {
  it.each([
    ['/api/projects/./', '/api/projects/'],
    ['/api/x/../projects', '/api/projects'],
    ['//api///projects', '/api/projects'],
    ['/%61pi/projects', '/api/projects'],
    ['/api/projects/%2e%2e/projects', '/api/projects'],
    ['/api/projects?x=%2F..%2F', '/api/projects?x=%2F..%2F'],
  ])('%s reaches the host as %s', async (target, forwarded) => {
    expect(await get(target)).toBe(200);
    const [received] = await upstream.requests();
    expect(received!.url).toBe(forwarded);
  });

  it.each([
    ['/health/../api/admin/stats', 'dot segments walk out of a public route into a protected one'],
    ['/health/%2e%2e/api/admin/stats', 'encoded dot segments'],
  ])('%s is judged as the path it really names (%s)', async (target) => {
    expect(await get(target)).toBe(403);
    expect(await upstream.requests()).toHaveLength(0);
  });
});

describe('refused with 400 IAM_BAD_REQUEST, never forwarded', () => {
  it.each([
    ['/api/projects%2f1', 'encoded slash'],
    ['/api/projects%5c1', 'encoded backslash'],
    ['/api\\projects', 'backslash'],
    ['/api/projects%00', 'encoded NUL'],
    ['/api/projects%252f1', 'double encoding'],
    ['/api/projects;jsessionid=1', 'path parameters'],
    ['/api/caf%C3%28', 'invalid UTF-8'],
    ['http://evil.example/api/projects', 'absolute-form with another host'],
    ['*', 'asterisk-form'],
  ])('%s (%s)', async (target) => {
    expect(await get(target)).toBe(400);
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('refuses two Authorization headers', async () => {
    expect(await get('/api/projects', `Authorization: Bearer ${aliceToken}\r\n`)).toBe(400);
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('accepts absolute-form naming this host and forwards the path', async () => {
    expect(await get('http://gw.test/api/projects')).toBe(200);
    expect((await upstream.requests())[0]!.url).toBe('/api/projects');
  });
});

describe('method override and header tricks', () => {
  it('#11.17: refuses X-HTTP-Method-Override and its variants (400), so they never change what the host does', async () => {
    for (const header of ['X-HTTP-Method-Override: DELETE\r\n', 'X-HTTP-Method: DELETE\r\n', 'x-method-override: DELETE\r\n']) {
      expect(await get('/api/projects', header)).toBe(400);
    }
    expect(await upstream.requests()).toHaveLength(0);
  });

  it('does not let Connection remove the identity headers, and drops X-Original-URL and underscore headers', async () => {
    expect(await get('/api/projects', 'Connection: X-IAM-User-Id, x-iam-profile-id\r\nX-Original-URL: /api/admin\r\nX_IAM_User_Id: u-admin\r\n')).toBe(200);
    const [received] = await upstream.requests();
    const headers = new Map<string, string[]>();
    for (let i = 0; i < received!.rawHeaders.length; i += 2) {
      const name = received!.rawHeaders[i]!.toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), received!.rawHeaders[i + 1]!]);
    }
    expect(headers.get('x-iam-user-id')).toEqual(['u-alice']);
    expect(headers.get('x-iam-profile-id')).toEqual(['p-alice-editor']);
    expect(headers.has('x-original-url')).toBe(false);
    expect(headers.has('x_iam_user_id')).toBe(false);
  });

  it('authorizes Expect: 100-continue before any byte reaches the host', async () => {
    const status = await raw(`POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`);
    expect(status).toBe(401);
    expect(await upstream.requests()).toHaveLength(0);
  });
});
