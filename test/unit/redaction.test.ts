/**
 * The one redaction layer (src/observability/redaction.ts) on every shape a secret takes on its way to a log line or a
 * span: a Redis error's command arguments, URL userinfo, header values, secret-named parameters, gateway tokens and
 * JWTs; through the application logger and the access log as configured, and in a span's recorded exception.
 */
import type { DestinationStream } from 'pino';
import { AccessLog } from '../../src/observability/access-log';
import { createLogger } from '../../src/observability/logger';
import { REDACTED, scrubbedException, scrubText, scrubValue } from '../../src/observability/redaction';

const PASSWORD = 'Pa55-w0rd.secret';
const TOKEN = `iamt_${'A1b2C3d4'.repeat(5)}xyz`;
const JWT = 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ1LWFsaWNlIiwiaXNzIjoiaHR0cHM6Ly9pZHAifQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmU';
const SECRETS = [PASSWORD, TOKEN, JWT, 'A1b2C3d4A1b2C3d4', 'c2lnbmF0dXJlLWJ5dGVzLWhlcmU'];

function capture(): { destination: DestinationStream; text: () => string } {
  let text = '';
  return { destination: { write: (chunk: string) => void (text += chunk) }, text: () => text };
}

function expectClean(text: string): void {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

/** What ioredis rejects with when Redis refuses the credentials (a ReplyError carrying the command). */
function wrongPassError(): Error {
  const error = new Error('WRONGPASS invalid username-password pair or user is disabled.');
  error.name = 'ReplyError';
  Object.assign(error, { command: { name: 'hello', args: ['3', 'AUTH', 'default', PASSWORD] } });
  return error;
}

describe('scrubText: secrets by shape', () => {
  it.each([
    ['redis URL userinfo', `connect to redis://default:${PASSWORD}@cache:6379/0 failed`, 'redis://[redacted]@cache:6379/0'],
    ['rediss URL, password only', `rediss://:${PASSWORD}@cache:6380`, 'rediss://[redacted]@cache:6380'],
    ['sentinel URL', `redis+sentinel://u:${PASSWORD}@s1:26379,s2:26379/mymaster`, 'redis+sentinel://[redacted]@s1:26379'],
    ['postgresql URL', `getaddrinfo ENOTFOUND for postgresql://iam:${PASSWORD}@db.internal:5432/iam`, 'postgresql://[redacted]@db.internal:5432/iam'],
    ['a password holding an unencoded @', `postgresql://iam:${PASSWORD}@x@db:5432/iam`, 'postgresql://[redacted]@db:5432/iam'],
    ['https URL userinfo', `GET https://client:${PASSWORD}@idp.example/token`, 'https://[redacted]@idp.example/token'],
    ['Authorization header text', `request had Authorization: Bearer ${TOKEN}`, 'Authorization: [redacted]'],
    ['Basic credentials', `authorization: Basic ${Buffer.from(`client:${PASSWORD}`).toString('base64')}`, 'authorization: [redacted]'],
    ['Proxy-Authorization', `Proxy-Authorization: Basic ${PASSWORD}`, 'Proxy-Authorization: [redacted]'],
    ['Cookie header', `cookie: __Host-iam-session=${TOKEN}; theme=${PASSWORD}`, 'cookie: [redacted]'],
    ['Set-Cookie header', `Set-Cookie: iam-session=${PASSWORD}; Path=/; HttpOnly`, 'Set-Cookie: [redacted]'],
    ['JSON headers in text', `{"authorization":"Bearer ${PASSWORD}","accept":"*/*"}`, '{"authorization":"[redacted]","accept":"*/*"}'],
    ['libpq conninfo', `host=db user=iam password=${PASSWORD} dbname=iam`, 'password=[redacted] dbname=iam'],
    ['client secret in JSON text', `{"client_id":"gw","client_secret":"${PASSWORD}"}`, '"client_secret":"[redacted]"'],
    ['environment-style name', `IAM_OIDC_CLIENT_SECRET=${PASSWORD}`, 'CLIENT_SECRET=[redacted]'],
    ['a Sentinel password in a Redis URL query', `redis+sentinel://s1:26379/m?sentinelPassword=${PASSWORD}&db=1`, 'sentinelPassword=[redacted]&db=1'],
    ['authorization code in a callback URL', `https://gw/iam/auth/oidc/callback?code=${PASSWORD}&state=s1`, '?code=[redacted]&state=s1'],
    ['access_token in a query', `/api/x?access_token=${PASSWORD}&page=2`, 'access_token=[redacted]&page=2'],
    ['a gateway token alone', `/files/${TOKEN}/download`, '/files/iamt_[redacted]/download'],
    ['a gateway token percent-encoded', `/files/${TOKEN.replace('_', '%5F')}`, '/files/iamt_[redacted]'],
    ['a JWT alone', `bad token ${JWT} refused`, 'bad token [redacted] refused'],
    ['a JWT as a bearer', `Bearer ${JWT}`, 'Bearer [redacted]'],
  ])('%s', (_what, input, kept) => {
    const out = scrubText(input);
    expectClean(out);
    expect(out).toContain(kept);
  });

  it('leaves ordinary text as it is (the same string)', () => {
    for (const text of ['GET /api/projects/42', 'proxy: authorization failed', 'token store: Redis connection error', '3f1c2b0e-7a4d-4a8e-9c55-0a1b2c3d4e5f', 'WRONGPASS invalid username-password pair or user is disabled.', '/iam/authorization/decisions/abc', 'alice@example.com']) {
      expect(scrubText(text)).toBe(text);
    }
  });
});

describe('scrubValue: secrets by name, errors, nesting', () => {
  it("an ioredis error's command arguments (HELLO 3 AUTH user password) are removed", () => {
    const out = JSON.stringify(scrubValue({ role: 'commands', err: wrongPassError() }));
    expectClean(out);
    expect(out).toContain('WRONGPASS');
    expect(out).toContain('"args":"[redacted]"');
    expect(out).toContain('"name":"hello"');
  });

  it('credential-named properties at any depth, whatever their spelling', () => {
    const out = scrubValue({
      password: PASSWORD,
      request: { headers: { Authorization: `Bearer ${PASSWORD}`, cookie: `a=${PASSWORD}`, 'set-cookie': [`s=${PASSWORD}`], 'x-api-key': 'kept?' } },
      oidc: { client_secret: PASSWORD, clientSecret: PASSWORD, accessToken: PASSWORD, id_token: PASSWORD, code_verifier: PASSWORD },
    }) as Record<string, any>;
    expectClean(JSON.stringify(out));
    expect(out.password).toBe(REDACTED);
    expect(out.request.headers.Authorization).toBe(REDACTED);
    expect(out.request.headers['set-cookie']).toBe(REDACTED);
    expect(out.oidc.clientSecret).toBe(REDACTED);
  });

  it('errors anywhere: message, stack, own properties and causes', () => {
    const cause = new Error(`connect ECONNREFUSED for redis://u:${PASSWORD}@10.0.0.1:6379`);
    const error = new Error(`login failed for ${TOKEN}`, { cause });
    Object.assign(error, { url: `postgresql://iam:${PASSWORD}@db/iam`, config: { password: PASSWORD } });
    const out = scrubValue({ nested: { list: [error] }, error: new AggregateError([cause], 'many') });
    const text = JSON.stringify(out);
    expectClean(text);
    expect(text).toContain('login failed for iamt_[redacted]');
    expect(text).toContain('ECONNREFUSED');
  });

  it('a URL object is written without its userinfo', () => {
    expect(JSON.stringify(scrubValue({ endpoint: new URL(`https://client:${PASSWORD}@idp.example/token`) }))).not.toContain(PASSWORD);
  });

  it('returns the object itself when nothing needs scrubbing (no copy per access-log line)', () => {
    const line = { requestId: '3f1c2b0e-7a4d-4a8e-9c55-0a1b2c3d4e5f', clientAddress: '::1', method: 'GET', path: '/api/projects', status: 200, durationMs: 0.3, userId: 'u-alice', traceId: null };
    expect(scrubValue(line)).toBe(line);
  });

  it('cuts cycles and deep nesting instead of recursing forever', () => {
    const cyclic: Record<string, unknown> = { name: 'a' };
    cyclic.self = cyclic;
    let deep: Record<string, unknown> = { secret: PASSWORD };
    for (let index = 0; index < 20; index++) deep = { inner: deep };
    expect(() => JSON.stringify(scrubValue({ cyclic, deep }))).not.toThrow();
    expect(JSON.stringify(scrubValue({ deep }))).not.toContain(PASSWORD);
  });

  it('an exception as a span records it: type kept, message and stack scrubbed', () => {
    const error = new Error(`fetch https://gw:${PASSWORD}@idp/token failed with ${JWT}`);
    const recorded = scrubbedException(error);
    expect(recorded.name).toBe('Error');
    expectClean(JSON.stringify(recorded));
    expectClean(JSON.stringify(scrubbedException(`plain ${TOKEN}`)));
  });
});

describe('the loggers as configured', () => {
  it('the application log: fields, errors under any key, the message, a child logger', () => {
    const out = capture();
    const logger = createLogger('debug', out.destination);
    logger.warn({ role: 'commands', err: wrongPassError() }, 'token store: Redis connection error');
    logger.error({ error: new Error(`connect to postgresql://iam:${PASSWORD}@db:5432/iam failed`) }, 'database failed');
    logger.info({ reason: `Authorization: Bearer ${TOKEN}`, password: PASSWORD, headers: { cookie: `s=${TOKEN}` } }, `login with ${JWT}`);
    logger.child({ worker: 2 }).error(new Error(`provider answered for client_secret=${PASSWORD}`));
    logger.info(`interpolated %s`, `redis://u:${PASSWORD}@h:1`);
    const text = out.text();
    expectClean(text);
    expect(text.trim().split('\n')).toHaveLength(5);
    expect(text).toContain('WRONGPASS');
    expect(text).toContain('"worker":2');
  });

  it('the access log: a token shape a client put in the path is not written', () => {
    const out = capture();
    const log = new AccessLog('all', 1, out.destination);
    log.write({
      requestId: 'r1',
      traceId: null,
      clientAddress: '127.0.0.1',
      method: 'GET',
      path: `/reset/${TOKEN}/${JWT}`,
      route: null,
      status: 401,
      decision: 'deny',
      step: null,
      userId: null,
      profileId: null,
      clientType: null,
      decisionId: null,
      durationMs: 1,
      upstreamMs: null,
      bytes: null,
    });
    log.close();
    expectClean(out.text());
    expect(out.text()).toContain('"path":"/reset/iamt_[redacted]/[redacted]"');
  });
});
