/**
 * #11.17 and #11.20 on raw sockets (no client library rewrites anything): client-address and original-host
 * headers reach the host only from a trusted proxy; method overrides (query or header) are refused; a
 * gateway token never reaches the host, whatever the Authorization scheme or header carries it; compatibility
 * characters (fullwidth `．／`) cannot turn into dot segments or slashes at the host.
 */
import { connect } from 'node:net';
import { join } from 'node:path';
import type { RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { login, ROOT, startTestGateway } from '../support/gateway';
import { recordedHeader, startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const CLIENT_ADDRESS_HEADERS = [
  'True-Client-IP', 'X-Client-IP', 'CF-Connecting-IP', 'Client-IP', 'X-Cluster-Client-IP', 'X-Original-Host', 'X-Host', 'X-Real-IP',
  'Fastly-Client-IP', 'X-ProxyUser-Ip', 'Forwarded', 'X-Forwarded-Server', 'Fly-Client-IP', 'X-Originating-IP', 'X-Remote-Addr',
];

let upstream: RecordingUpstream;
let untrusting: RunningGateway;
let trusting: RunningGateway;
let token: string;

beforeAll(async () => {
  const db = await createTestDatabase();
  await db.close();
  upstream = await startRecordingUpstream();
  const policies = { IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies') };
  untrusting = await startTestGateway(upstream.url, { ...policies, IAM_FORWARD_TRUSTED_PROXIES: '[]' });
  trusting = await startTestGateway(upstream.url, { ...policies, IAM_FORWARD_TRUSTED_PROXIES: '["127.0.0.1"]' });
  token = (await login(untrusting.url, 'alice')).accessToken;
});

afterAll(async () => {
  await untrusting?.close();
  await trusting?.close();
  await upstream?.close();
});

beforeEach(() => upstream.clear());

/** Writes the bytes as they are on a new connection; resolves with the status and the problem code. */
function raw(port: number, head: string): Promise<{ status: number; code: string | null }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(Buffer.from(head, 'latin1')));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('end', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (!status) return reject(new Error(`no status line in ${JSON.stringify(data.slice(0, 80))}`));
      resolve({ status: Number(status[1]), code: /"code":"([A-Z_]+)"/.exec(data)?.[1] ?? null });
    });
    socket.on('error', reject);
    socket.setTimeout(5000, () => reject(new Error(`no answer to ${JSON.stringify(head.slice(0, 60))}`)));
  });
}

const request = (port: number, target: string, headers: string[] = [], method = 'GET'): Promise<{ status: number; code: string | null }> =>
  raw(port, `${method} ${target} HTTP/1.1\r\nHost: gw.test\r\n${headers.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`);

async function refusedAndNotForwarded(port: number, target: string, headers: string[] = [], method = 'GET'): Promise<void> {
  expect(await request(port, target, headers, method)).toEqual({ status: 400, code: 'IAM_BAD_REQUEST' });
  expect(await upstream.requests()).toHaveLength(0);
}

describe('#11.17 client-address headers', () => {
  const spoofed = CLIENT_ADDRESS_HEADERS.map((name) => `${name}: 6.6.6.6`);

  it('#11.17: from an untrusted client none reaches the host (public and protected routes)', async () => {
    expect((await request(untrusting.port, '/health', spoofed)).status).toBe(200);
    expect((await request(untrusting.port, '/api/projects', [...spoofed, `Authorization: Bearer ${token}`])).status).toBe(200);
    const received = await upstream.requests();
    expect(received).toHaveLength(2);
    for (const one of received) {
      for (const name of CLIENT_ADDRESS_HEADERS) expect(recordedHeader(one, name.toLowerCase())).toEqual([]);
      expect(recordedHeader(one, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    }
  });

  it('#11.17: from a trusted proxy (iam.forward.trusted-proxies) they are kept', async () => {
    expect((await request(trusting.port, '/health', spoofed)).status).toBe(200);
    const [received] = await upstream.requests();
    for (const name of CLIENT_ADDRESS_HEADERS) expect(recordedHeader(received!, name.toLowerCase())).toEqual(['6.6.6.6']);
  });
});

describe('#11.17 method overrides are refused with 400', () => {
  it.each([
    ['/health?_method=DELETE', []],
    ['/health?x=1&%5Fmethod=DELETE', []],
    ['/health?_METHOD[]=DELETE', []],
    ['/health?.method=DELETE', []],
    ['/health', ['X-HTTP-Method-Override: DELETE']],
    ['/health', ['X-HTTP-Method: DELETE']],
    ['/health', ['X-Method-Override: DELETE']],
    ['/api/projects?_method=POST', [`Authorization: Bearer TOKEN`]],
  ] as Array<[string, string[]]>)('#11.17: GET %s %j', async (target, headers) => {
    await refusedAndNotForwarded(untrusting.port, target, headers.map((line) => line.replace('TOKEN', token)));
    await refusedAndNotForwarded(trusting.port, target, headers.map((line) => line.replace('TOKEN', token)));
  });

  it('#11.17: also on a POST (the form-override case)', async () => {
    await refusedAndNotForwarded(untrusting.port, '/upload?_method=DELETE', [`Authorization: Bearer ${token}`, 'Content-Length: 0'], 'POST');
  });
});

describe('#11.20 a gateway token never reaches the host', () => {
  const basic = (text: string): string => Buffer.from(text).toString('base64');

  it.each([
    ['Basic scheme', () => `Authorization: Basic ${token}`],
    ['Token scheme', () => `Authorization: Token ${token}`],
    ['Basic user:token', () => `Authorization: Basic ${basic(`alice:${token}`)}`],
    ['a cookie', () => `Cookie: iam=${token}`],
    ['another header', () => `X-Api-Key: ${token}`],
  ])('#11.20: under %s: 400, nothing forwarded (public and protected routes)', async (_name, line) => {
    await refusedAndNotForwarded(untrusting.port, '/health', [line()]);
    await refusedAndNotForwarded(untrusting.port, '/api/projects', [line()]);
  });

  it('#11.20: in the query: 400, nothing forwarded', async () => {
    await refusedAndNotForwarded(untrusting.port, `/health?access_token=${token}`);
  });

  it('#11.20: lowercase `bearer` is the gateway credential: authorized, then stripped (public and protected routes)', async () => {
    expect((await request(untrusting.port, '/health', [`Authorization: bearer ${token}`])).status).toBe(200);
    expect((await request(untrusting.port, '/api/projects', [`authorization: bEaReR ${token}`])).status).toBe(200);
    const received = await upstream.requests();
    expect(received).toHaveLength(2);
    for (const one of received) {
      expect(recordedHeader(one, 'authorization')).toEqual([]);
      expect(one.rawHeaders.join('\n')).not.toContain(token);
    }
  });

  it('#11.20: a Basic credential of the host itself still reaches the host', async () => {
    expect((await request(untrusting.port, '/health', [`Authorization: Basic ${basic('alice:secret')}`])).status).toBe(200);
    const [received] = await upstream.requests();
    expect(recordedHeader(received!, 'authorization')).toEqual([`Basic ${basic('alice:secret')}`]);
  });
});

describe('#11.20 compatibility characters in the path', () => {
  it.each([
    '/health/%EF%BC%8E%EF%BC%8E/api/admin/stats',
    '/health%EF%BC%8F..%EF%BC%8Fapi/admin/stats',
    '/api/projects/%EF%BC%8E%EF%BC%8E',
    '/health/%E2%80%A5/api/admin',
    '/health/%EF%BC%BC..%EF%BC%BCapi',
    '/api/%EF%BC%A1DMIN/stats',
  ])('#11.20: %s is 400 and never forwarded', async (target) => {
    await refusedAndNotForwarded(untrusting.port, target, [`Authorization: Bearer ${token}`]);
  });

  it('#11.20: ordinary non-ASCII text still passes', async () => {
    expect((await request(untrusting.port, '/api/projects/caf%C3%A9', [`Authorization: Bearer ${token}`])).status).toBe(200);
    const [received] = await upstream.requests();
    expect(received!.url).toBe('/api/projects/caf%C3%A9');
  });
});

describe('X-Request-Id along the proxy chain', () => {
  /** The id the host received, the one in the answer, and the problem's requestId (a 401 on a protected route). */
  async function ids(gateway: RunningGateway, headers: string[], path = '/health'): Promise<{ host: string | undefined; answer: string | null }> {
    await upstream.clear();
    const response = await new Promise<{ headers: string }>((resolve, reject) => {
      const socket = connect(gateway.port, '127.0.0.1', () =>
        socket.write(`GET ${path} HTTP/1.1\r\nHost: gw.test\r\n${headers.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`),
      );
      let data = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.on('end', () => resolve({ headers: data }));
      socket.on('error', reject);
    });
    const answer = /\r\nx-request-id: ([^\r]*)\r\n/i.exec(response.headers)?.[1] ?? null;
    const recorded = await upstream.requests();
    return { host: recorded[0] ? recordedHeader(recorded[0], 'x-request-id')[0] : undefined, answer };
  }

  it('keeps a valid id from a trusted proxy: the host, the answer and a problem carry it', async () => {
    for (const id of ['3b1f0c9e-2d4a-4f7e-9a51-0c2e8d7b6a11', 'a3f9c0de12b34567890abcdef1234567', 'req:edge-7/42']) {
      expect(await ids(trusting, [`X-Request-Id: ${id}`])).toEqual({ host: id, answer: id });
    }
    const problem = await fetch(`${trusting.url}/api/projects`, { headers: { 'x-request-id': 'edge-401' } });
    expect(problem.headers.get('x-request-id')).toBe('edge-401');
    expect(((await problem.json()) as { requestId: string }).requestId).toBe('edge-401');
  });

  it("replaces an untrusted peer's id, and a trusted proxy's id that is not one valid id", async () => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    const untrusted = await ids(untrusting, ['X-Request-Id: client-chosen']);
    expect(untrusted.host).toMatch(uuid);
    expect(untrusted.answer).toBe(untrusted.host);
    for (const headers of [
      ['X-Request-Id: has space'],
      ['X-Request-Id: a,b'],
      [`X-Request-Id: ${'x'.repeat(129)}`],
      ['X-Request-Id: one', 'X-Request-Id: two'],
      ['X-Request-Id: \u00e9t\u00e9'],
      ['X-Request-Id:'],
    ]) {
      const replaced = await ids(trusting, headers);
      expect({ headers, host: replaced.host }).toEqual({ headers, host: expect.stringMatching(uuid) });
      expect(replaced.answer).toBe(replaced.host);
    }
  });
});
