import type { BackendDeclaration, DatabaseBackend, DatabaseProgressListener, DatabaseServer, DatabaseSettings, TokenStoreBackend, TokenStoreExtras, TokenStoreOptions } from './backend-registration';
import { withInProcessEvents } from './in-process-events';
import { MEMORY_TOKEN_STORE } from './memory/backend';
import { EMBEDDED_DATABASE } from './pglite/backend';
import { POSTGRES_DATABASE } from './postgres/backend';
import { REDIS_TOKEN_STORE } from './redis/backend';
import type { TokenEvents, TokenStore } from '../domain/token-store';

/**
 * Every storage backend, one line each (a new one: a folder beside redis/ with its backend.ts, and a line here). The
 * gateway, the embedded engine, the CLI commands and the configuration's URL check choose and open stores only
 * through these lists; the functions that read them take a list as a parameter (default: these), so a test can pass
 * `[...TOKEN_STORES, fake]`.
 */
export const TOKEN_STORES = [
  REDIS_TOKEN_STORE,
  MEMORY_TOKEN_STORE,
] as const;

export const DATABASES = [
  POSTGRES_DATABASE,
  EMBEDDED_DATABASE,
] as const;

/** A list of token-store backends: `TOKEN_STORES`, or a test's `[...TOKEN_STORES, fake]`. */
export type TokenStoreRegistry = readonly TokenStoreBackend[];
export type DatabaseRegistry = readonly DatabaseBackend[];

/** `'redis' | 'memory'`; `'postgres' | 'embedded'`. */
export type TokenStoreKind = (typeof TOKEN_STORES)[number]['kind'];
export type DatabaseKind = (typeof DATABASES)[number]['kind'];

/** The scheme of a URL as backends declare it (`redis:`), never more of the URL (it may hold a password). */
function schemeOf(url: string): string {
  const end = url.indexOf('://');
  return end > 0 ? `${url.slice(0, end).toLowerCase()}:` : '';
}

/** How the backends of a list are chosen, for an error message: `redis:, rediss:, … (redis), unset (memory)`. */
function choices(registry: readonly BackendDeclaration[]): string {
  return registry.map((backend) => (backend.chosenBy.withoutUrl ? `unset (${backend.kind})` : `${backend.chosenBy.schemes.join(', ')} (${backend.kind})`)).join('; ');
}

/**
 * Throws when a list is inconsistent: a kind twice, a scheme two backends claim, more than one backend (or none)
 * chosen without a URL (a URL is optional for both kinds of store).
 */
export function checkRegistry(what: string, registry: readonly BackendDeclaration[]): void {
  const kinds = new Set<string>();
  const schemes = new Map<string, string>();
  for (const backend of registry) {
    if (kinds.has(backend.kind)) throw new Error(`${what} registry: "${backend.kind}" is registered twice`);
    kinds.add(backend.kind);
    for (const scheme of backend.chosenBy.schemes ?? []) {
      const claimed = schemes.get(scheme);
      if (claimed !== undefined) throw new Error(`${what} registry: "${claimed}" and "${backend.kind}" both claim ${scheme}// URLs`);
      schemes.set(scheme, backend.kind);
    }
  }
  const withoutUrl = registry.filter((backend) => backend.chosenBy.withoutUrl);
  if (withoutUrl.length !== 1) throw new Error(`${what} registry: exactly one backend is chosen without a URL (${withoutUrl.map((b) => b.kind).join(', ') || 'none'})`);
}

/** The backend a URL (or its absence) chooses; throws naming the URL's scheme (never the URL) when none is declared. */
export function backendFor<B extends BackendDeclaration>(what: string, url: string | null, registry: readonly B[]): B {
  checkRegistry(what, registry);
  const scheme = url === null ? null : schemeOf(url);
  const backend = registry.find((candidate) => (scheme === null ? candidate.chosenBy.withoutUrl === true : (candidate.chosenBy.schemes ?? []).includes(scheme)));
  if (backend === undefined) {
    throw new Error(`${what}: no backend is declared for ${scheme ? `${scheme}// URLs` : 'a URL without a scheme'} (declared: ${choices(registry)})`);
  }
  return backend;
}

/** True when a declared backend takes `url` (its scheme, then its own check): the configuration's URL formats. */
export function isDeclaredUrl(url: string, registry: readonly BackendDeclaration[]): boolean {
  try {
    backendFor('check', url, registry).checkUrl?.(url);
    return true;
  } catch {
    return false;
  }
}

/** The URL forms a list takes, for the configuration's error message. */
export function declaredUrlForms(registry: readonly BackendDeclaration[]): string {
  return registry.flatMap((backend) => (backend.urlForms === undefined ? [] : [backend.urlForms])).join('; or ');
}

/** A token store opened through the registry. */
export interface OpenedTokenStore extends TokenStoreExtras {
  /** The backend's name (`redis`, `memory`, …): readiness reports it. */
  kind: string;
  /** The whole store; a backend without pub/sub has the in-process channel here. */
  store: TokenStore;
  /** The events channel when it reaches every process that opened the same store; null without one (publish to nobody else). */
  events: TokenEvents | null;
  /** Its records outlive this process (false: the in-process store). */
  persistent: boolean;
}

/** Opens the token store `options.url` chooses (a backend without pub/sub gets the in-process events channel). */
export async function openTokenStore(options: TokenStoreOptions, registry: TokenStoreRegistry = TOKEN_STORES): Promise<OpenedTokenStore> {
  const backend = tokenStoreBackendFor(options.url, registry);
  const { store, ...extras } = await backend.open(options);
  const { events, persistent } = backend.capabilities;
  // Declared by the backend: with events, `open` returned a whole TokenStore (TokenStoreBackend's two forms).
  const whole = events ? (store as TokenStore) : withInProcessEvents(store);
  return { ...extras, kind: backend.kind, store: whole, events: events ? whole : null, persistent };
}

/** A database server opened through the registry, with the backend that serves it. */
export interface OpenedDatabaseServer extends DatabaseServer {
  kind: string;
}

/** Makes the database `settings.url` chooses reachable (starting the embedded one when no URL is set). */
export async function openDatabaseServer(settings: DatabaseSettings['database'], registry: DatabaseRegistry = DATABASES, onProgress?: DatabaseProgressListener): Promise<OpenedDatabaseServer> {
  const backend = databaseBackendFor(settings.url, registry);
  return { ...(await backend.open(settings, onProgress)), kind: backend.kind };
}

/** The token-store backend `url` (or its absence) chooses. */
export function tokenStoreBackendFor(url: string | null, registry: TokenStoreRegistry = TOKEN_STORES): TokenStoreBackend {
  return backendFor('token store', url, registry);
}

/** The database backend `url` (or its absence) chooses. */
export function databaseBackendFor(url: string | null, registry: DatabaseRegistry = DATABASES): DatabaseBackend {
  return backendFor('database', url, registry);
}
