import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { AbstractConnector, Cluster, Redis, type RedisOptions } from 'ioredis';

import { type HostPort, type RedisTopology } from './redis-url';

export { parseRedisUrl, RedisUrlError, REDIS_URL_SCHEMES, type HostPort, type RedisTopology } from './redis-url';

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
