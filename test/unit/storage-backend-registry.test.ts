/**
 * The storage backend registry (src/adapters/registry.ts): a token store or database backend is one folder (its
 * backend.ts: kind, the URL schemes that choose it, capabilities, opener) and one line in the registry; the
 * gateway, the CLI commands and the configuration's URL check choose and open stores through it, and a URL whose
 * scheme no backend declares is refused.
 */
import { readdirSync } from 'node:fs';
import * as path from 'node:path';
import type { TokenStoreBackend } from '../../src/adapters/backend-registration';
import {
  checkRegistry,
  databaseBackendFor,
  DATABASES,
  isDeclaredUrl,
  openTokenStore,
  TOKEN_STORES,
  tokenStoreBackendFor,
  type DatabaseKind,
  type TokenStoreKind,
  type TokenStoreRegistry,
} from '../../src/adapters/registry';
import { ConfigError, loadConfig } from '../../src/config';
import { CONFIG_FORMATS } from '../../src/config/config-schema';
import type { StoreEvent, TokenRecord } from '../../src/domain/token-record';
import { KV_TOKEN_STORE } from '../fixtures/storage-backends/kv/backend';
import { until } from '../support/wait';

const WITH_KV: TokenStoreRegistry = [...TOKEN_STORES, KV_TOKEN_STORE];

function record(sessionId: string): TokenRecord {
  return {
    sessionId,
    principal: { userId: 'u-1', identityId: 'id-1', identityDomain: 'example.com', activeProfileId: 'p', displayName: 'Ada', authorizationVersion: 1 },
    clientType: 'WEB',
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
    idleTimeoutMs: 0,
  };
}

function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig({ env, cwd: process.cwd() });
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('the built-in registry', () => {
  it('lists one backend per adapter folder, each declared in its backend.ts', () => {
    const adapters = path.resolve(__dirname, '../../src/adapters');
    const folders = readdirSync(adapters, { withFileTypes: true }).filter((entry) => entry.isDirectory());
    for (const folder of folders) expect(readdirSync(path.join(adapters, folder.name))).toContain('backend.ts');
    expect(TOKEN_STORES.map(({ kind }) => kind)).toEqual(['redis', 'memory']);
    expect(DATABASES.map(({ kind }) => kind)).toEqual(['postgres', 'embedded']);
    expect(folders.length).toBe(TOKEN_STORES.length + DATABASES.length);
    // The kinds are the registry's: one it does not list does not compile.
    // @ts-expect-error -- not a registered token store
    const kv: TokenStoreKind = 'kv';
    // @ts-expect-error -- not a registered database
    const dynamo: DatabaseKind = 'dynamo';
    expect([kv, dynamo]).toEqual(['kv', 'dynamo']);
  });

  it('chooses by the URL scheme, or the backend declared for no URL', () => {
    for (const url of ['redis://localhost:6379', 'REDISS://h:6380/1', 'redis+cluster://a:1,b:2', 'redis+sentinel://s:26379/main']) expect(tokenStoreBackendFor(url).kind).toBe('redis');
    expect(tokenStoreBackendFor(null).kind).toBe('memory');
    expect(databaseBackendFor('postgresql://u:p@db:5432/iam').kind).toBe('postgres');
    expect(databaseBackendFor('postgres://db/iam').kind).toBe('postgres');
    expect(databaseBackendFor(null).kind).toBe('embedded');
  });

  it('declares what callers used to infer from the kind: a shared events channel, persistence, a shared database', () => {
    expect(tokenStoreBackendFor('redis://h:6379').capabilities).toEqual({ events: true, persistent: true });
    expect(tokenStoreBackendFor(null).capabilities).toEqual({ events: false, persistent: false });
    expect(databaseBackendFor('postgres://db/iam').capabilities).toEqual({ shared: true });
    expect(databaseBackendFor(null).capabilities).toEqual({ shared: false });
  });

  it('opens the in-process store without pub/sub of its own: events reach this process only', async () => {
    const opened = await openTokenStore({ url: null, prefix: 'unit-memory' });
    try {
      expect(opened).toMatchObject({ kind: 'memory', events: null, persistent: false });
      const heard: StoreEvent[] = [];
      await opened.store.subscribe((event) => heard.push(event));
      await opened.store.publish({ type: 'tokens-flushed', reason: 'unit' });
      await until('the in-process channel delivers', () => heard.length === 1);
      expect(heard).toEqual([{ type: 'tokens-flushed', reason: 'unit' }]);
    } finally {
      await opened.store.close();
    }
  });
});

describe('an undeclared store kind', () => {
  it('is refused by the registry, naming its scheme and the declared ones, never the rest of the URL', async () => {
    const url = 'kv://admin:s3cret@sessions';
    expect(() => tokenStoreBackendFor(url)).toThrow('token store: no backend is declared for kv:// URLs (declared: redis:, rediss:, redis+cluster:, rediss+cluster:, redis+sentinel:, rediss+sentinel: (redis); unset (memory))');
    await expect(openTokenStore({ url, prefix: 'p' })).rejects.toThrow('no backend is declared for kv:// URLs');
    expect(() => databaseBackendFor('mysql://root:s3cret@db/iam')).toThrow('database: no backend is declared for mysql:// URLs');
    for (const attempt of [() => tokenStoreBackendFor(url), () => databaseBackendFor('mysql://root:s3cret@db/iam')]) {
      expect(attempt).toThrow(expect.objectContaining({ message: expect.not.stringContaining('s3cret') }));
    }
  });

  it('is refused by the configuration (redis.url, database.url), with the declared forms and no echo of the URL', () => {
    const redis = configError({ REDIS_URL: 'kv://admin:s3cret@sessions' });
    expect(redis.problems.map(({ key }) => key)).toEqual(['redis.url']);
    expect(redis.message).toContain(CONFIG_FORMATS['redis-url']!.expected);
    expect(CONFIG_FORMATS['redis-url']!.expected).toBe('a redis:// or rediss:// URL, redis+cluster://host:port,host:port,… or redis+sentinel://host:port,…/master-name');
    const database = configError({ DATABASE_URL: 'mysql://root:s3cret@db/iam' });
    expect(database.problems.map(({ key }) => key)).toEqual(['database.url']);
    expect(CONFIG_FORMATS['postgres-url']!.expected).toBe('a postgres:// or postgresql:// URL');
    expect(`${redis.message}${database.message}`).not.toContain('s3cret');
  });

  it('is refused in a registry that declares a kind twice, a scheme twice, or not exactly one backend without a URL', () => {
    expect(() => checkRegistry('token store', [...WITH_KV, KV_TOKEN_STORE])).toThrow('token store registry: "kv" is registered twice');
    const claimsRedis = { ...KV_TOKEN_STORE, kind: 'other', chosenBy: { schemes: ['redis:'] } } as TokenStoreBackend;
    expect(() => checkRegistry('token store', [...TOKEN_STORES, claimsRedis])).toThrow('"redis" and "other" both claim redis:// URLs');
    const alsoWithoutUrl = { ...KV_TOKEN_STORE, chosenBy: { withoutUrl: true } } as TokenStoreBackend;
    expect(() => tokenStoreBackendFor(null, [...TOKEN_STORES, alsoWithoutUrl])).toThrow('exactly one backend is chosen without a URL (memory, kv)');
  });
});

describe('a token store backend added by one folder and one line: [...TOKEN_STORES, kv]', () => {
  it('is chosen by its URL scheme and opened, with the in-process channel for the pub/sub it lacks', async () => {
    expect(tokenStoreBackendFor('kv://sessions', WITH_KV)).toBe(KV_TOKEN_STORE);
    expect(tokenStoreBackendFor('redis://h:6379', WITH_KV).kind).toBe('redis');
    const opened = await openTokenStore({ url: 'kv://sessions', prefix: 'unit-kv' }, WITH_KV);
    const again = await openTokenStore({ url: 'kv://sessions', prefix: 'unit-kv' }, WITH_KV);
    try {
      expect(opened).toMatchObject({ kind: 'kv', events: null, persistent: true });
      expect(opened.readinessDetail?.()).toEqual({ table: 'sessions' });
      const written = record('s1');
      await opened.store.putToken('h1', written);
      // Persistent: another open of the same table reads it.
      expect(await again.store.getToken('h1')).toEqual(written);
      const heard: StoreEvent[] = [];
      await opened.store.subscribe((event) => heard.push(event));
      await opened.store.publish({ type: 'session-ended', sessionId: 's1', tokenHash: 'h1', userId: 'u-1', reason: 'logout' });
      await until('the in-process channel delivers', () => heard.length === 1);
    } finally {
      await opened.store.close();
      await again.store.close();
    }
    await expect(opened.store.getToken('h1')).rejects.toThrow('closed');
    await expect(openTokenStore({ url: 'kv://unreachable', prefix: 'p' }, WITH_KV)).rejects.toThrow('did not answer');
  });

  it('has its URLs checked by its own declaration', () => {
    expect(isDeclaredUrl('kv://sessions', WITH_KV)).toBe(true);
    expect(isDeclaredUrl('kv:///', WITH_KV)).toBe(false);
    expect(isDeclaredUrl('kv://sessions', TOKEN_STORES)).toBe(false);
    expect(isDeclaredUrl('redis://h:6379', WITH_KV)).toBe(true);
  });
});
