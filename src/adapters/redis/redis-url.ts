// `REDIS_URL` read into a topology: pure parsing, no client (the configuration loads it without ioredis).

/**
 * Where the token store's Redis is, from `REDIS_URL`:
 *  - `redis://[user:password@]host:port[/db]` (or `rediss://`): one server;
 *  - `redis+cluster://[user:password@]host:port,host:port,…` (or `rediss+cluster://`): seed nodes of a Redis
 *    Cluster (any reachable node tells the rest); the credentials apply to every node;
 *  - `redis+sentinel://[user:password@]host:port,host:port,…/master-name[/db]` (or `rediss+sentinel://`): the
 *    Sentinels watching `master-name`; the client asks them for the current primary and follows a failover.
 *    The credentials are the primary's; `?sentinelPassword=` (and `sentinelUsername=`) authenticate to
 *    the Sentinels when they need it.
 */
export type RedisTopology =
  | { kind: 'single'; url: string }
  | { kind: 'cluster'; nodes: HostPort[]; username?: string; password?: string; tls: boolean }
  | {
      kind: 'sentinel';
      sentinels: HostPort[];
      masterName: string;
      db: number;
      username?: string;
      password?: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
      tls: boolean;
    };

export interface HostPort {
  host: string;
  port: number;
}

/** A `REDIS_URL` that cannot be used: the message says what is wrong, never the password. */
export class RedisUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedisUrlError';
  }
}

const SCHEMES: Record<string, { kind: RedisTopology['kind']; tls: boolean }> = {
  'redis:': { kind: 'single', tls: false },
  'rediss:': { kind: 'single', tls: true },
  'redis+cluster:': { kind: 'cluster', tls: false },
  'rediss+cluster:': { kind: 'cluster', tls: true },
  'redis+sentinel:': { kind: 'sentinel', tls: false },
  'rediss+sentinel:': { kind: 'sentinel', tls: true },
};

/** The URL schemes `REDIS_URL` accepts. */
export const REDIS_URL_SCHEMES: readonly string[] = Object.keys(SCHEMES);

/** Parses `REDIS_URL` (see {@link RedisTopology}); throws a {@link RedisUrlError} that never echoes a password. */
export function parseRedisUrl(url: string): RedisTopology {
  const schemeEnd = url.indexOf('://');
  const scheme = schemeEnd > 0 ? `${url.slice(0, schemeEnd).toLowerCase()}:` : '';
  const form = SCHEMES[scheme];
  if (!form) throw new RedisUrlError(`the Redis URL must start with one of ${REDIS_URL_SCHEMES.map((s) => `${s}//`).join(', ')}`);
  if (form.kind === 'single') {
    try {
      new URL(url);
    } catch {
      throw new RedisUrlError('the Redis URL is not a valid URL');
    }
    return { kind: 'single', url };
  }
  // host lists are not URL syntax: split by hand. `scheme://[userinfo@]hosts[/path][?query]`
  let rest = url.slice(schemeEnd + 3);
  const queryAt = rest.indexOf('?');
  const query = new URLSearchParams(queryAt >= 0 ? rest.slice(queryAt + 1) : '');
  if (queryAt >= 0) rest = rest.slice(0, queryAt);
  const slash = rest.indexOf('/');
  const authority = slash >= 0 ? rest.slice(0, slash) : rest;
  const path = slash >= 0 ? rest.slice(slash + 1) : '';
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at) : '';
  const hostList = at >= 0 ? authority.slice(at + 1) : authority;
  const credentials = parseUserinfo(userinfo);
  if (hostList === '') throw new RedisUrlError(`the ${form.kind} Redis URL names no host`);
  const hosts = hostList.split(',').map((entry) => parseHostPort(entry, form.kind === 'sentinel' ? 26379 : 6379));
  if (form.kind === 'cluster') {
    if (path !== '') throw new RedisUrlError('a Redis Cluster has only database 0: the redis+cluster URL takes no path');
    return { kind: 'cluster', nodes: hosts, ...credentials, tls: form.tls };
  }
  const [masterName = '', dbText = '0', ...extra] = path.split('/');
  if (masterName === '') throw new RedisUrlError('the redis+sentinel URL must end with the master name: redis+sentinel://host:26379,host:26379/mymaster');
  const db = Number(dbText === '' ? '0' : dbText);
  if (extra.length > 0 || !Number.isInteger(db) || db < 0) throw new RedisUrlError('the redis+sentinel URL path is /master-name or /master-name/db');
  const sentinelUsername = query.get('sentinelUsername') ?? undefined;
  const sentinelPassword = query.get('sentinelPassword') ?? undefined;
  return {
    kind: 'sentinel',
    sentinels: hosts,
    masterName: decodeURIComponent(masterName),
    db,
    ...credentials,
    ...(sentinelUsername === undefined ? {} : { sentinelUsername }),
    ...(sentinelPassword === undefined ? {} : { sentinelPassword }),
    tls: form.tls,
  };
}

function parseUserinfo(userinfo: string): { username?: string; password?: string } {
  if (userinfo === '') return {};
  const colon = userinfo.indexOf(':');
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new RedisUrlError('the Redis URL credentials are not valid percent-encoding');
    }
  };
  const username = decode(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
  const password = colon >= 0 ? decode(userinfo.slice(colon + 1)) : undefined;
  return { ...(username === '' ? {} : { username }), ...(password === undefined ? {} : { password }) };
}

function parseHostPort(entry: string, defaultPort: number): HostPort {
  const text = entry.trim();
  // [v6]:port, host:port, host
  const bracketed = /^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$/.exec(text);
  const plain = /^([A-Za-z0-9.-]+)(?::(\d+))?$/.exec(text);
  const match = bracketed ?? plain;
  if (!match) throw new RedisUrlError(`the Redis URL has an invalid host entry "${text.replace(/[^\x20-\x7e]/g, '?').slice(0, 80)}"`);
  const port = match[2] === undefined ? defaultPort : Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RedisUrlError(`the Redis URL has an invalid port in "${text.slice(0, 80)}"`);
  return { host: match[1]!, port };
}
