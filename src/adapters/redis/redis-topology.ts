import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { AbstractConnector, Cluster, Redis, type RedisOptions } from 'ioredis';

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

/** A client for the commands of the token store: one server (or the Sentinels' primary), or a Cluster. */
export type RedisCommands = Redis | Cluster;

/**
 * Opens a command connection for `topology` with the fail-closed options `base` (see RedisTokenStore.connect).
 * For a Cluster, `base` applies to each node's connection; the cluster client refreshes its slot map every
 * second and on every failure that says the map changed (MOVED, CLUSTERDOWN, a lost node).
 */
export function openCommands(topology: RedisTopology, base: RedisOptions, name: string): RedisCommands {
  switch (topology.kind) {
    case 'single':
    case 'sentinel':
      return openServer(topology, base, name);
    case 'cluster': {
      const { retryStrategy, ...nodeOptions } = base;
      return new Cluster(topology.nodes, {
        redisOptions: { ...nodeOptions, ...credentials(topology), connectionName: name },
        clusterRetryStrategy: (attempt: number) => (retryStrategy ? (retryStrategy(attempt) ?? null) : 100),
        enableOfflineQueue: false,
        enableReadyCheck: true,
        scaleReads: 'master',
        // A command that meets a lost node or CLUSTERDOWN during a failover is retried on the new map a few
        // times (100 ms apart), then rejects: the request fails closed (503) instead of hanging.
        maxRedirections: 6,
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        retryDelayOnTryAgain: 100,
        slotsRefreshTimeout: 1000,
        slotsRefreshInterval: 1000,
      });
    }
  }
}

/**
 * Opens the dedicated subscriber connection. On a Cluster it is one plain connection to one node: `nodes()`
 * lists the cluster's nodes, the preferred one first (the store puts first the primary that its PUBLISH goes
 * to, whose own subscribers get a message before the PUBLISH answers; the cluster bus forwards it to the other
 * nodes a little later). A connection that fails soon after the previous attempt goes to the next node in
 * the list; after a connection that lasted, the preferred node is tried first again.
 */
export function openSubscriber(topology: RedisTopology, base: RedisOptions, name: string, nodes?: () => HostPort[]): Redis {
  switch (topology.kind) {
    case 'single':
    case 'sentinel':
      return openServer(topology, base, name);
    case 'cluster': {
      const seeds = topology.nodes;
      const options = {
        ...base,
        ...credentials(topology),
        connectionName: name,
        Connector: RotatingNodeConnector,
        rotatingNodes: () => {
          const current = nodes?.() ?? [];
          return current.length > 0 ? current : seeds;
        },
        rotatingTls: topology.tls,
      };
      return new Redis(options as RedisOptions);
    }
  }
}

/** One connection to the server of a plain URL, or to the primary the Sentinels name. */
function openServer(topology: Exclude<RedisTopology, { kind: 'cluster' }>, base: RedisOptions, name: string): Redis {
  return topology.kind === 'single' ? new Redis(topology.url, { ...base, connectionName: name }) : new Redis({ ...base, ...sentinelOptions(topology), connectionName: name });
}

function credentials(topology: { username?: string; password?: string; tls: boolean }): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  return {
    ...(topology.username === undefined ? {} : { username: topology.username }),
    ...(topology.password === undefined ? {} : { password: topology.password }),
    ...(topology.tls ? { tls: {} } : {}),
  };
}

function sentinelOptions(topology: Extract<RedisTopology, { kind: 'sentinel' }>): RedisOptions {
  return {
    sentinels: topology.sentinels,
    name: topology.masterName,
    role: 'master',
    db: topology.db,
    ...credentials(topology),
    ...(topology.sentinelUsername === undefined ? {} : { sentinelUsername: topology.sentinelUsername }),
    ...(topology.sentinelPassword === undefined ? {} : { sentinelPassword: topology.sentinelPassword }),
    ...(topology.tls ? { enableTLSForSentinelMode: true } : {}),
    // Ask the Sentinels again soon after a lost primary: the promoted replica is found within the failover.
    sentinelRetryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
    // A primary that turned replica after a failover answers READONLY to writes: reconnect (to the new primary).
    reconnectOnError: (error: Error) => error.message.startsWith('READONLY'),
    // Listen to the Sentinels' +switch-master: leave a demoted primary at once instead of at its first failure.
    failoverDetector: true,
  };
}

/** A connection that lived this long counts as healthy: the next one starts again at the preferred node. */
const HEALTHY_CONNECTION_MS = 5000;

/** The ioredis connector of the Cluster subscriber (see {@link openSubscriber}). */
class RotatingNodeConnector extends AbstractConnector {
  private index = -1;
  private lastAttemptAt = 0;
  private readonly nodes: () => HostPort[];
  private readonly tls: boolean;

  constructor(options: { rotatingNodes: () => HostPort[]; rotatingTls: boolean; disconnectTimeout?: number }) {
    super(options.disconnectTimeout ?? 2000);
    this.nodes = options.rotatingNodes;
    this.tls = options.rotatingTls;
  }

  connect(): Promise<Socket | TLSSocket> {
    this.connecting = true;
    const nodes = this.nodes();
    const now = Date.now();
    this.index = now - this.lastAttemptAt > HEALTHY_CONNECTION_MS ? 0 : this.index + 1;
    this.lastAttemptAt = now;
    const node = nodes[this.index % nodes.length]!;
    return new Promise((resolve, reject) => {
      process.nextTick(() => {
        if (!this.connecting) {
          reject(new Error('Connection is closed.'));
          return;
        }
        const stream = this.tls ? tlsConnect({ host: node.host, port: node.port }) : createConnection({ host: node.host, port: node.port });
        this.stream = stream;
        stream.once('error', (error: Error) => {
          this.firstError = error;
        });
        resolve(stream);
      });
    });
  }
}
