/**
 * Secrets never reach what the gateway writes for operators (docs/threat-model.md, Round 3 "Secrets in logs"): each
 * failure path is driven in a real process (`node bin/iam-gateway.js …` over dist), and everything it wrote — stdout
 * (the JSON application log and the access log), stderr, and every span it exported (a real OTLP receiver, JSON) — is
 * searched for the secret values: Redis refusing the credentials (the default user, an ACL user, a password rotated
 * under a running gateway), PostgreSQL unreachable with a password in DATABASE_URL (at start and cut while running),
 * the OpenID Provider unreachable and its token endpoint failing (the client secret, the code, the PKCE verifier), and
 * provisioning files that carry token-shaped values.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { notRun, testDatabaseKind, testDatabaseUrl, uniquePrefix } from '../support/env';
import { freePort } from '../support/front-proxy';
import { E2E_POLICIES } from '../support/gateway-fixture';
import { ensureBuilt, runUntilExit, startGatewayProcess, type GatewayProcess, type ServeOutcome } from '../support/gateway-process';
import { OtlpReceiver } from '../support/otlp-receiver';
import { privateRedisAvailable, startPrivateRedis, type PrivateRedis } from '../support/private-redis';
import { relayedUrl, startTcpRelay, targetOf } from '../support/tcp-relay';
import { until } from '../support/wait';

const secret = (name: string): string => `${name}-${randomBytes(9).toString('base64url')}`;
/** A gateway-token-shaped value and a JWT-shaped one, as a careless file or a client may carry them. */
const TOKEN_SHAPED = `iamt_${randomBytes(32).toString('base64url')}`;
const JWT_SHAPED = `eyJhbGciOiJSUzI1NiJ9.${Buffer.from(JSON.stringify({ sub: secret('jwt') })).toString('base64url')}.${randomBytes(32).toString('base64url')}`;

const receiver = new OtlpReceiver();
const running: GatewayProcess[] = [];

beforeAll(async () => {
  ensureBuilt();
  await receiver.start();
}, 180_000);
afterAll(async () => {
  await Promise.all(running.map((gateway) => gateway.kill()));
  await receiver.close();
});

/** Every process exports its spans here, as JSON, every 50 ms. */
const tracing = (): Record<string, string> => ({
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_BSP_SCHEDULE_DELAY: '50',
});

/** A `serve` that has no reason to last: its own store prefix and spool, the access log on, everything logged. */
function serveEnv(extra: Record<string, string>): Record<string, string> {
  return {
    PORT: '0',
    MANAGEMENT_PORT: '0',
    DATABASE_URL: testDatabaseUrl(),
    DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '2',
    REDIS_URL: '',
    IAM_TOKEN_STORE_PREFIX: uniquePrefix('secrets'),
    IAM_AUDIT_SPOOL_DIR: join(tmpdir(), uniquePrefix('audit-spool')),
    IAM_ACCESS_LOG: 'all',
    LOG_LEVEL: 'debug',
    IAM_POLICIES_DIR: E2E_POLICIES,
    IAM_AUTHENTICATOR_TYPE: 'users-file',
    IAM_AUTHENTICATOR_PATH: 'config/users.example.yaml',
    ...tracing(),
    ...extra,
  };
}

/** Fails naming the secret and where it appeared, with the text around it. */
function expectNoSecrets(where: string, text: string, secrets: Record<string, string>): void {
  for (const [name, value] of Object.entries(secrets)) {
    const at = text.indexOf(value);
    if (at >= 0) throw new Error(`${where} contains the ${name}: …${text.slice(Math.max(0, at - 300), at + value.length + 100)}…`);
  }
}

/** Everything a process wrote, and every span exported so far. */
function expectNothingLeaked(outcome: Pick<ServeOutcome, 'stdout' | 'stderr'>, secrets: Record<string, string>): void {
  expectNoSecrets('stdout (application and access log)', outcome.stdout, secrets);
  expectNoSecrets('stderr', outcome.stderr, secrets);
  expectNoSecrets('the exported spans', receiver.jsonBodies.join('\n'), secrets);
}

/** Stops a running gateway (SIGTERM: the access log is flushed) and answers what it wrote. */
async function stopped(gateway: GatewayProcess): Promise<{ stdout: string; stderr: string }> {
  gateway.child.kill('SIGTERM');
  await gateway.exited;
  const [stdout = '', stderr = ''] = gateway.output().replace('--- stdout ---\n', '').split('\n--- stderr ---\n');
  return { stdout, stderr };
}

const redisRunnable = privateRedisAvailable();
if (!redisRunnable) notRun('secrets-in-logs, Redis paths (/usr/bin/redis-server missing; CI always has it)');
const describeIfRedisServer = redisRunnable ? describe : describe.skip;

describeIfRedisServer('Redis refuses the credentials', () => {
  const password = secret('redis-password');
  const aclPassword = secret('acl-password');
  let redis: PrivateRedis;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    // The admin connection stays authenticated; every new connection needs the password.
    await redis.admin.call('CONFIG', 'SET', 'requirepass', password);
    await redis.admin.call('ACL', 'SETUSER', 'gw', 'on', `>${aclPassword}`, '~*', '&*', '+@all');
  });
  afterAll(() => redis?.stop());

  it('the default user with a wrong password: the start fails, and neither password is written', async () => {
    const wrong = secret('wrong-password');
    const outcome = await runUntilExit(['serve'], serveEnv({ REDIS_URL: redis.url({ user: 'default', password: wrong }) }), 60_000);
    expect(outcome.code).not.toBe(0);
    expect(outcome.stdout).toContain('WRONGPASS');
    expectNothingLeaked(outcome, { 'wrong password': wrong, 'Redis password': password });
  });

  it('an ACL user with a wrong password: the same', async () => {
    const wrong = secret('wrong-acl-password');
    const outcome = await runUntilExit(['serve'], serveEnv({ REDIS_URL: redis.url({ user: 'gw', password: wrong }) }), 60_000);
    expect(outcome.code).not.toBe(0);
    expect(outcome.stdout).toContain('WRONGPASS');
    expectNothingLeaked(outcome, { 'wrong password': wrong, 'ACL password': aclPassword });
  });

  it('the password rotated under a running gateway: the failed reconnects, the 503s and their spans carry no password', async () => {
    const rotating = secret('rotating-password');
    await redis.admin.call('ACL', 'SETUSER', 'rotating', 'on', `>${rotating}`, '~*', '&*', '+@all');
    const gateway = await startGatewayProcess('http://127.0.0.1:9', { ...serveEnv({}), REDIS_URL: redis.url({ user: 'rotating', password: rotating }) });
    running.push(gateway);
    const login = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }) });
    expect(login.status).toBe(200);
    const { accessToken } = (await login.json()) as { accessToken: string };
    // The operator rotates the password and drops the gateway's connections: every reconnect is refused.
    await redis.admin.call('ACL', 'SETUSER', 'rotating', 'resetpass', `>${secret('new-password')}`);
    await redis.admin.call('CLIENT', 'KILL', 'USER', 'rotating');
    await until('the refused reconnect in the log', () => gateway.logs().some((line) => line.msg === 'token store: Redis connection error'));
    // Requests that need the store fail while it refuses: the access log and the spans see them.
    const refused = await fetch(`${gateway.url}/api/projects`, { headers: { authorization: `Bearer ${TOKEN_SHAPED}` } });
    expect(refused.status).toBe(503);
    expect((await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'bob', password: 'bob-password', clientType: 'WEB' }) })).status).toBe(503);
    // A stop flushes the access log and exports the spans still buffered.
    const output = await stopped(gateway);
    expect(output.stdout).toContain('WRONGPASS');
    expect(output.stdout).toContain('"msg":"access"');
    expectNothingLeaked(output, { 'Redis password': rotating, 'access token': accessToken, 'token-shaped bearer': TOKEN_SHAPED, 'user password': 'bob-password' });
  });
});

describe('PostgreSQL with a password in DATABASE_URL', () => {
  const password = secret('pg-password');

  it('unreachable at start: the error names the address, never the URL with its password', async () => {
    const closed = await freePort();
    const outcome = await runUntilExit(['serve'], serveEnv({ DATABASE_URL: `postgresql://iam:${password}@127.0.0.1:${closed}/iam` }), 60_000);
    expect(outcome.code).not.toBe(0);
    expectNothingLeaked(outcome, { 'database password': password });
  });

  it('cut while running (a network fault): the outage log, the 503s and the spans carry no password', async () => {
    const url = new URL(testDatabaseUrl());
    const target = targetOf(url.href);
    const relay = await startTcpRelay(target.host, target.port);
    try {
      // The local test server trusts loopback connections, so any password is accepted: what matters is where it goes.
      url.username = url.username || 'postgres';
      url.password = password;
      const gateway = await startGatewayProcess('http://127.0.0.1:9', { ...serveEnv({}), DATABASE_URL: relayedUrl(url.href, relay) });
      running.push(gateway);
      await relay.cut();
      // A login needs the database (the user's records): 503, logged as an outage.
      const answer = await fetch(`${gateway.url}/iam/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: 'alice-password', clientType: 'WEB' }) });
      expect(answer.status).toBe(503);
      await until('the outage in the log', () => gateway.logs().some((line) => line.msg === 'database became unavailable: answering 503 until it recovers'));
      const output = await stopped(gateway);
      expectNothingLeaked(output, { 'database password': password });
    } finally {
      await relay.close();
    }
  });
});

describe('the OpenID Provider fails', () => {
  const clientSecret = secret('client-secret');
  /** What the provider received at its token endpoint (the credentials the gateway sent). */
  const received: Array<{ authorization: string; body: string }> = [];
  let idp: Server;
  let issuer: string;

  beforeAll(async () => {
    // A provider whose token endpoint fails with an error page that echoes the request, as broken ones do.
    idp = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = new URL(req.url ?? '/', issuer).pathname;
        const json = (status: number, body: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        if (path === '/.well-known/openid-configuration') {
          return json(200, {
            issuer,
            authorization_endpoint: `${issuer}/authorize`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
            response_types_supported: ['code'],
            subject_types_supported: ['public'],
            id_token_signing_alg_values_supported: ['RS256'],
          });
        }
        if (path === '/jwks') return json(200, { keys: [] });
        if (path === '/token') {
          const body = Buffer.concat(chunks).toString('utf8');
          received.push({ authorization: req.headers.authorization ?? '', body });
          const status = received.length % 2 === 1 ? 500 : 400;
          if (status === 400) return json(400, { error: 'invalid_client', error_description: `client authentication failed: ${req.headers.authorization ?? ''} ${body}` });
          res.writeHead(500, { 'content-type': 'text/html' }).end(`<pre>Authorization: ${req.headers.authorization ?? ''}\n${body}</pre>`);
          return;
        }
        json(404, { error: 'not_found' });
      });
    });
    await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => idp.close(() => resolve())));

  const oidc = (issuerUrl: string): Record<string, string> => ({
    IAM_AUTHENTICATOR_TYPE: 'oidc',
    IAM_OIDC_ISSUER: issuerUrl,
    IAM_OIDC_CLIENT_ID: 'gateway',
    IAM_OIDC_CLIENT_SECRET: clientSecret,
    IAM_OIDC_REDIRECT_URI: 'http://127.0.0.1:9/iam/auth/oidc/callback',
    IAM_OIDC_TIMEOUT: '2s',
  });

  it('discovery: the provider cannot be reached (502, logged); the client secret is not written', async () => {
    const closed = await freePort();
    const gateway = await startGatewayProcess('http://127.0.0.1:9', { ...serveEnv({}), ...oidc(`http://127.0.0.1:${closed}/realms/x`) });
    running.push(gateway);
    const answer = await fetch(`${gateway.url}/iam/auth/oidc/login`);
    expect(answer.status).toBe(502);
    const output = await stopped(gateway);
    expect(output.stdout).toContain('iam: request failed');
    expectNothingLeaked(output, { 'client secret': clientSecret });
  });

  it('the token endpoint fails echoing what it got: neither the secret, the code nor the PKCE verifier is written', async () => {
    const gateway = await startGatewayProcess('http://127.0.0.1:9', { ...serveEnv({}), ...oidc(issuer) });
    running.push(gateway);
    const codes: string[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      const begin = await fetch(`${gateway.url}/iam/auth/oidc/login`, { redirect: 'manual' });
      expect(begin.status).toBe(302);
      const state = new URL(begin.headers.get('location')!).searchParams.get('state')!;
      const cookie = begin.headers.getSetCookie().map((line) => line.split(';')[0]).join('; ');
      const code = secret('authorization-code');
      codes.push(code);
      const callback = await fetch(`${gateway.url}/iam/auth/oidc/callback?code=${code}&state=${state}`, { headers: { cookie }, redirect: 'manual' });
      expect([502, 401]).toContain(callback.status);
    }
    expect(received).toHaveLength(2);
    const verifiers = received.map((request) => new URLSearchParams(request.body).get('code_verifier')!);
    const basic = received[0]!.authorization.replace(/^Basic /, '');
    const output = await stopped(gateway);
    expect(output.stdout).toContain('iam: request failed');
    expectNothingLeaked(output, {
      'client secret': clientSecret,
      'client credentials (Basic)': basic,
      'first code': codes[0]!,
      'second code': codes[1]!,
      'first PKCE verifier': verifiers[0]!,
      'second PKCE verifier': verifiers[1]!,
    });
  });
});

describe('provisioning files that carry token-shaped values', () => {
  const dir = mkdtempSync(join(tmpdir(), 'secrets-provision-'));
  const file = join(dir, 'provision.yaml');
  writeFileSync(
    file,
    [
      'templates:',
      '  - versionId: t1',
      '    name: t1',
      `    permissions: ["${TOKEN_SHAPED}", "${JWT_SHAPED}"]`,
      'users:',
      '  - userId: u-x',
      '    displayName: X',
      '    profiles:',
      `      - { profileId: p-x, profileName: P, templateVersionId: t1, clientTypes: ["${TOKEN_SHAPED}"] }`,
      '',
    ].join('\n'),
  );

  it('`provision FILE`: every problem is reported, the values are not', async () => {
    const outcome = await runUntilExit(['provision', file], { DATABASE_URL: testDatabaseUrl(), DATABASE_POOL_SIZE: '1', REDIS_URL: '' }, 60_000);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toContain('/templates/0/permissions/0');
    expect(outcome.stderr).toContain('/users/0/profiles/0/clientTypes/0');
    expectNothingLeaked(outcome, { 'token-shaped value': TOKEN_SHAPED, 'JWT-shaped value': JWT_SHAPED });
  });

  it('`serve` with it as iam.provision.file: the same', async () => {
    const outcome = await runUntilExit(['serve'], serveEnv({ IAM_PROVISION_FILE: file }), 60_000);
    expect(outcome.code).not.toBe(0);
    expect(outcome.stderr).toContain('/templates/0/permissions/0');
    expectNothingLeaked(outcome, { 'token-shaped value': TOKEN_SHAPED, 'JWT-shaped value': JWT_SHAPED });
  });
});
