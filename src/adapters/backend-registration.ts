import type { TokenStorage, TokenStore } from '../domain/token-store';

/**
 * How a backend is chosen from its configuration URL (`redis.url`, `database.url`): by the URL's scheme
 * (`{ schemes: ['redis:', …] }`, lower case, with the colon), or as the one backend used when no URL is set.
 */
export type ChosenBy = { readonly schemes: readonly string[]; readonly withoutUrl?: never } | { readonly withoutUrl: true; readonly schemes?: never };

/** What every backend declares: its name, how the configuration chooses it, and how its URL reads. */
export interface BackendDeclaration<Kind extends string = string> {
  /** Its name: readiness (`detail.kind`), the start's log line, error messages. */
  readonly kind: Kind;
  readonly chosenBy: ChosenBy;
  /** The URLs it takes, for the configuration's error message (`a redis:// or rediss:// URL, …`); unset without a URL. */
  readonly urlForms?: string;
  /** Throws when a URL of its scheme cannot be used (the message never echoes a credential); the configuration calls it. */
  checkUrl?(url: string): void;
}

/** What opening a token store may use; each backend takes what applies to it (the configuration's `redis.*`, …). */
export interface TokenStoreOptions {
  /** `redis.url`; null chooses the backend declared `withoutUrl`. */
  url: string | null;
  /** `iam.token.store-prefix`: every key (and the events channel) lives under `{prefix}:`. */
  prefix: string;
  logger?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
  /** Tokens may carry an idle timeout (`iam.token.idle-timeout` > 0). */
  slidingExpiry?: boolean;
  /** Refuse a server that evicts live tokens under memory pressure (the gateway does; commands only warn). */
  refuseEvictingPolicy?: boolean;
  /** `redis.wait-replicas`, `redis.wait-timeout`: revocations wait for this many replicas, at most this long. */
  waitReplicas?: number;
  waitTimeoutMs?: number;
}

/** What a backend reports beyond the TokenStore seams (Redis: its topology, its eviction policy and evicted keys). */
export interface TokenStoreExtras {
  /** Merged into readiness's `tokenStore` detail after `kind` and `eventsConnected`. */
  readinessDetail?: () => Record<string, unknown>;
  /** The server's eviction: its policy read at open (null: unknown) and the keys it evicted so far (null: cannot tell). */
  evictions?: { readonly policy: string | null; evictedKeys: () => Promise<number | null> };
}

/** An opened backend: the store (with or without its own events channel, as its capability says) and its extras. */
export interface BackendStore<Store> extends TokenStoreExtras {
  store: Store;
}

/**
 * One token-store backend (adapters/<folder>/backend.ts, one line in adapters/registry.ts). `capabilities.events`:
 * true when its events channel reaches every process that opened the same store (`open` returns a whole TokenStore);
 * false when it has no pub/sub (`open` returns its TokenStorage, and the registry adds the in-process channel: what
 * this process changes reaches only this process, so such a backend serves a single instance).
 * `capabilities.persistent`: its records outlive the process that opened it.
 */
export type TokenStoreBackend<Kind extends string = string> = BackendDeclaration<Kind> &
  (
    | { readonly capabilities: { readonly events: true; readonly persistent: boolean }; open(options: TokenStoreOptions): Promise<BackendStore<TokenStore>> }
    | { readonly capabilities: { readonly events: false; readonly persistent: boolean }; open(options: TokenStoreOptions): Promise<BackendStore<TokenStorage>> }
  );

/** Declares a token-store backend (keeps its kind literal: the registry's kinds are a type). */
export function defineTokenStore<const Kind extends string>(backend: TokenStoreBackend<Kind>): TokenStoreBackend<Kind> {
  return backend;
}

/** What opening the database reads from the configuration (`database.*`, `iam.schema`; docs/configuration.md). */
export interface DatabaseSettings {
  database: {
    /** `database.url` / `DATABASE_URL`; null → the backend declared `withoutUrl` (embedded PGlite). */
    url: string | null;
    /** `database.embedded-dir`: PGlite data directory; `memory://` keeps nothing. */
    embeddedDir: string;
    /** `database.pool-size`. */
    poolSize: number;
    /** `database.connect-timeout`: opening a connection, and waiting for a pooled one. */
    connectTimeoutMs: number;
    /** `database.query-timeout`: a statement without an answer after this fails as unavailable (503). */
    queryTimeoutMs: number;
    /** `database.idle-timeout`: pooled connections unused this long are closed. */
    idleTimeoutMs: number;
  };
  iam: { schema: { historyTable: string } };
}

/**
 * What opening a database reports while it works, for a start that would otherwise look hung: a first start on the
 * embedded database creates its data directory (seconds), then every migration runs.
 */
export type DatabaseProgress =
  | { step: 'initializing'; place: string }
  | { step: 'migrating'; index: number; total: number; name: string }
  | { step: 'ready'; applied: number };

/** Told each {@link DatabaseProgress} step, in order. */
export type DatabaseProgressListener = (progress: DatabaseProgress) => void;

/** A PostgreSQL server a backend made reachable: the driver (MikroORM) connects to `url`. */
export interface DatabaseServer {
  /** A `postgresql://` URL (the configured one, or the embedded database's private socket). */
  url: string;
  /** The server serializes sessions (PGlite): exactly one pooled connection. */
  singleConnection: boolean;
  /** A failure of the first statement as the operator should read it (named by place, never by URL). */
  explain: (error: unknown) => unknown;
  /** Stops what `open` started (nothing for a server the gateway does not run). */
  stop: () => Promise<void>;
}

/**
 * One database backend (adapters/<folder>/backend.ts, one line in adapters/registry.ts). `capabilities.shared`: other
 * processes (a second instance, `policy replay`, `policy diff --database`) reach the same database while the gateway
 * runs; the embedded one is locked by the process that opened it.
 */
export interface DatabaseBackend<Kind extends string = string> extends BackendDeclaration<Kind> {
  readonly capabilities: { readonly shared: boolean };
  /** `onProgress` is told `initializing` when the backend creates a new database (the embedded one's first start). */
  open(settings: DatabaseSettings['database'], onProgress?: DatabaseProgressListener): Promise<DatabaseServer>;
}

/** Declares a database backend (keeps its kind literal). */
export function defineDatabase<const Kind extends string>(backend: DatabaseBackend<Kind>): DatabaseBackend<Kind> {
  return backend;
}
