/**
 * #11.21: the shipped config/default.yaml (what `npm start` and the Docker image run) names no users and no
 * provisioning file: it starts, but nobody can log in (501 IAM_LOGIN_NOT_CONFIGURED) and no demo user or
 * administrator exists. `npm run demo` passes its own configuration (examples/demo.yaml), and the README
 * walkthrough, run as written with curl against it, is true.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/observability/logger';
import { startGateway, type RunningGateway } from '../../src/app/start-gateway';
import { createTestDatabase } from '../support/database';
import { testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from '../support/env';
import { ROOT } from '../support/gateway';
import { ensureBuilt } from '../support/gateway-process';
import { freePort } from '../support/front-proxy';
import { CookieJar, loginThrough } from '../support/oidc-op';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

const run = promisify(execFile);

describe('#11.21 the shipped default configuration', () => {
  let upstream: RecordingUpstream;
  let gateway: RunningGateway;

  beforeAll(async () => {
    const db = await createTestDatabase();
    await db.close();
    upstream = await startRecordingUpstream();
    // config/default.yaml exactly as shipped; only where to listen and which database/store come from the environment.
    const env: NodeJS.ProcessEnv = {
      PORT: '0',
      MANAGEMENT_PORT: '0',
      UPSTREAM_URL: upstream.url,
      DATABASE_URL: testDatabaseUrl(),
      DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
      REDIS_URL: testRedisUrl() ?? '',
      IAM_TOKEN_STORE_PREFIX: uniquePrefix('default-config'),
      IAM_POLICIES_DIR: join(ROOT, 'test/fixtures/e2e-policies'),
    };
    gateway = await startGateway(loadConfig({ file: join(ROOT, 'config', 'default.yaml'), env, cwd: ROOT }), { logger: createLogger('silent') });
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('#11.21: loads no users and no provisioning: nobody can log in (501), no demo user or admin exists, protected routes answer 401', async () => {
    for (const username of ['admin', 'alice', 'bob']) {
      const answer = await fetch(`${gateway.url}/iam/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password: `${username}-password`, clientType: 'WEB' }),
      });
      expect(answer.status).toBe(501);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await answer.json()) as { code: string }).code).toBe('IAM_LOGIN_NOT_CONFIGURED');
    }
    for (const userId of ['u-admin', 'u-alice', 'u-bob']) expect(await gateway.services!.repository.getUser(userId)).toBeNull();
    // It still starts and protects: public routes pass, protected routes answer 401.
    expect((await fetch(`${gateway.url}/health`)).status).toBe(200);
    const protectedAnswer = await fetch(`${gateway.url}/api/projects`);
    expect(protectedAnswer.status).toBe(401);
    expect(((await protectedAnswer.json()) as { code: string }).code).toBe('IAM_UNAUTHENTICATED');
  });
});

/** A demo script (scripts/demo*.js) started as `npm run demo` starts it, on free ports; resolves once it printed its gateway URL. */
async function startDemo(script: string, env: Record<string, string>): Promise<{ gatewayUrl: string; output: () => string; stop: () => Promise<void> }> {
  ensureBuilt();
  const demo = spawn(process.execPath, [join(ROOT, 'scripts', script)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', MANAGEMENT_PORT: '0', ...env },
  });
  let output = '';
  demo.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  demo.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => demo.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    demo.kill('SIGTERM');
    await exited;
  };
  try {
    const gatewayUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${output}`)), 60_000);
      demo.stdout!.on('data', () => {
        const match = /gateway\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      void exited.then(() => (clearTimeout(timer), reject(new Error(`${script} exited:\n${output}`))));
    });
    return { gatewayUrl, output: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

describe('#11.21 npm run demo', () => {
  it('#11.21: runs on its own config, and the README walkthrough is true against it', async () => {
    // Every port of the demo is settable (HOST_PORT, PORT, MANAGEMENT_PORT); the example policy's resolvers are
    // paths on the host (upstream.url), so the resolver-backed routes work on whatever port the host got.
    const hostPort = await freePort();
    const { gatewayUrl, output: printed, stop } = await startDemo('demo.js', { HOST_PORT: String(hostPort) });
    try {
      const output = printed();
      expect(output).toContain('examples/demo.yaml');
      expect(output).toContain(`example host     http://127.0.0.1:${hostPort}`);

      const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
      const walkthrough = /## Walkthrough \(with `npm run demo` running\)\n\n```sh\n([\s\S]*?)```/.exec(readme)![1]!;
      expect(walkthrough).toContain('GW=http://127.0.0.1:8080');
      const script = walkthrough.replace('GW=http://127.0.0.1:8080', `GW=${gatewayUrl}`);
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], { cwd: ROOT, timeout: 60_000 });
      const statuses = [...stdout.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      // health, no token, project 2, admin stats, a task moved to project 2, revoke-others, logout, after logout
      expect(statuses).toEqual([200, 401, 403, 403, 403, 204, 204, 401]);
      // The list is what the host's query kept of the gateway's plan: project 1 only, for alice.
      expect(stdout).toContain('"plan":{"kind":"SOME","ids":["1"]');
      expect(stdout).not.toContain('"name":"Gemini"');
      expect(stdout).toContain('"userId":"u-alice"');
      expect(stdout).toContain('"step":"SCOPE_DENIED"');
      expect(stdout).toContain('"step":"PERMISSION_DENIED"');
      expect(stdout).toMatch(/x-iam-profile-id/i);
      expect(stdout).toContain('p-alice-reader');

      // The browser part, with curl and a cookie jar.
      const browser = /### In a browser\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)![1]!.replace('GW=http://127.0.0.1:8080', `GW=${gatewayUrl}`);
      const cookies = await run('bash', ['-euo', 'pipefail', '-c', browser], { cwd: ROOT, timeout: 60_000 });
      expect([...cookies.stdout.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))).toEqual([302, 303, 204]);
      expect(cookies.stdout).toMatch(/location: \/iam\/login\?returnTo=%2Fapi%2Fprojects/i);
      expect(cookies.stdout).toMatch(/set-cookie: iam-session=iamt_/i);
      expect(cookies.stdout).toMatch(/"x-iam-user-id":"u-alice"/i);
      expect(cookies.stdout).toMatch(/set-cookie: iam-session=; Max-Age=0/i);
    } finally {
      await stop();
    }
  }, 120_000);
});

describe('docs/host-integration.md: the Python host example against npm run demo', () => {
  it('forwards the assertion the host received and gets the plan, the checks and a refusal with its decisionId', async () => {
    const { gatewayUrl, stop } = await startDemo('demo.js', { HOST_PORT: String(await freePort()) });
    try {
      const login = await fetch(`${gatewayUrl}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }) });
      const token = ((await login.json()) as { accessToken: string }).accessToken;
      // What the example host received with a request: its /api/whoami echoes the X-IAM-* headers, the assertion among them.
      const whoami = (await (await fetch(`${gatewayUrl}/api/whoami`, { headers: { authorization: `Bearer ${token}` } })).json()) as { headers: Record<string, string> };
      const assertion = whoami.headers['x-iam-assertion']!;
      expect(assertion).toMatch(/^eyJ/);
      const { stdout } = await run('python3', [join(ROOT, 'examples', 'host-python', 'decisions.py'), gatewayUrl, assertion], { cwd: ROOT, timeout: 30_000 });
      const report = JSON.parse(stdout) as { visible: string[]; write: Array<{ allowed: boolean }>; move_to_2: { status: number; decisionId: string } };
      expect(report.visible).toEqual(['1']);
      expect(report.write.map((result) => result.allowed)).toEqual([true, false]);
      expect(report.move_to_2).toEqual({ status: 403, decisionId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
      // A forged assertion gets nothing: the gateway verifies it (the host needs no JWT library).
      const forged = await run('python3', [join(ROOT, 'examples', 'host-python', 'decisions.py'), gatewayUrl, `${assertion.slice(0, -4)}AAAA`], { cwd: ROOT, timeout: 30_000 }).catch((error: { stderr?: string }) => error);
      expect(String((forged as { stderr?: string }).stderr)).toContain('GatewayRefused');
    } finally {
      await stop();
    }
  }, 120_000);
});

describe('npm run demo:oidc', () => {
  it('runs the demo with a local OpenID Provider: a browser is sent there, signs in, and comes back as alice', async () => {
    const { gatewayUrl, output: printed, stop } = await startDemo('demo-oidc.js', { HOST_PORT: String(await freePort()), OIDC_PORT: '0' });
    try {
      const output = printed();
      expect(output).toMatch(/OpenID Provider\s+http:\/\/127\.0\.0\.1:\d+/);
      const page = await fetch(`${gatewayUrl}/api/whoami`, { headers: { accept: 'text/html' }, redirect: 'manual' });
      expect(page.headers.get('location')).toBe('/iam/auth/oidc/login?returnTo=%2Fapi%2Fwhoami');
      const started = await fetch(`${gatewayUrl}${page.headers.get('location')!}`, { redirect: 'manual' });
      const stateCookie = started.headers.getSetCookie().find((line) => line.startsWith('iam-oidc='))!.split(';')[0]!;
      const callback = await loginThrough(started.headers.get('location')!, 'alice', 'alice-password', `${gatewayUrl}/iam/auth/oidc/callback`, new CookieJar());
      const back = await fetch(callback, { headers: { cookie: stateCookie }, redirect: 'manual' });
      expect([back.status, back.headers.get('location')]).toEqual([303, '/api/whoami']);
      const session = back.headers.getSetCookie().find((line) => line.startsWith('iam-session='))!.split(';')[0]!;
      const whoami = (await (await fetch(`${gatewayUrl}/api/whoami`, { headers: { cookie: session } })).json()) as { headers: Record<string, string> };
      expect(whoami.headers['x-iam-user-id']).toBe('u-alice');
    } finally {
      await stop();
    }
  }, 120_000);
});
