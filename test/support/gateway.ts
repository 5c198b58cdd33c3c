import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';
import type { GatewayConfig } from '../../src/config';
import { createLogger } from '../../src/observability/logger';
import { startGateway, type RunningGateway, type StartOptions } from '../../src/app/start-gateway';
import { testDatabaseKind, testDatabaseUrl, testRedisUrl, uniquePrefix } from './env';

export const ROOT = join(__dirname, '..', '..');

/**
 * The configuration a test gateway runs with: the shipped config/default.yaml, the test run's database and
 * token store, OS-assigned ports, a unique store prefix, and any overrides given as environment variables
 * (the same mechanism users have, e.g. `{ IAM_TOKEN_TTL: '2s' }`).
 */
export function testConfig(upstreamUrl: string, overrides: Record<string, string> = {}): GatewayConfig {
  const env: NodeJS.ProcessEnv = {
    PORT: '0',
    MANAGEMENT_PORT: '0',
    SERVER_HOST: '127.0.0.1',
    UPSTREAM_URL: upstreamUrl,
    DATABASE_URL: testDatabaseUrl(),
    DATABASE_POOL_SIZE: testDatabaseKind() === 'pglite' ? '1' : '4',
    IAM_TOKEN_STORE_PREFIX: uniquePrefix('gw'),
    IAM_AUDIT_FLUSH_INTERVAL: '100ms',
    // A stop keeps idle keep-alive connections open until their keep-alive timeout (a request sent on one is
    // answered, docs/threat-model.md): a short one, which fetch's pool does not reuse, keeps every test's stop
    // quick. Gateway processes (gateway-process.ts) keep the shipped 5 s, which the nginx balancer's pool is set under.
    SERVER_KEEP_ALIVE_TIMEOUT: '1s',
    IAM_AUDIT_SPOOL_DIR: join(tmpdir(), uniquePrefix('audit-spool')),
    LOG_LEVEL: 'silent',
    // The access log (default `denied`) would write every test's denials to stdout; its own tests turn it on.
    IAM_ACCESS_LOG: 'off',
    // config/default.yaml names no users (#11.21); the tests log in the example users like the demo does.
    IAM_AUTHENTICATOR_TYPE: 'users-file',
    IAM_AUTHENTICATOR_PATH: 'config/users.example.yaml',
    IAM_PROVISION_FILE: 'config/provision.example.yaml',
    ...overrides,
  };
  const redis = testRedisUrl();
  if (redis && env.REDIS_URL === undefined) env.REDIS_URL = redis;
  return loadConfig({ file: join(ROOT, 'config', 'default.yaml'), env, cwd: ROOT });
}

/** Starts an in-process gateway in front of `upstreamUrl`. */
export async function startTestGateway(upstreamUrl: string, overrides: Record<string, string> = {}, options: Omit<StartOptions, 'logger'> = {}): Promise<RunningGateway> {
  const config = testConfig(upstreamUrl, overrides);
  return startGateway(config, { logger: createLogger(process.env.IAM_TEST_LOG ?? 'silent'), ...options });
}

/** Logs in through the gateway and returns the parsed AuthenticationResult. */
export async function login(
  gatewayUrl: string,
  username: string,
  password = `${username}-password`,
  clientType = 'WEB',
): Promise<{ accessToken: string; sessionId: string; expiresAt: string; principal: Record<string, unknown> }> {
  const response = await fetch(`${gatewayUrl}/iam/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password, clientType }),
  });
  if (response.status !== 200) throw new Error(`login of ${username} failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as { accessToken: string; sessionId: string; expiresAt: string; principal: Record<string, unknown> };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
