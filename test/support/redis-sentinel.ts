/**
 * Redis with Sentinel on loopback for the scale tests (issue #17): one primary, one replica (`--replicaof`) and three
 * sentinels (`redis-server <conf> --sentinel`, quorum 2, `down-after-milliseconds 1000`), each process in its own
 * temp dir. Sentinels rewrite their configuration file, so each has a writable one in its dir.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './front-proxy';
import { command, parseInfo, startRedisNode, waitUntil, type RedisNode } from './redis-node';

export const MASTER_NAME = 'mymaster';

export interface RedisSentinelSetup {
  /** `redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/mymaster`. */
  url: string;
  /** The port of the current primary, as the sentinels last said. */
  primaryPort(): number;
  replicaPort(): number;
  sentinelPorts: number[];
  /** What `SENTINEL get-master-addr-by-name mymaster` answers on the first sentinel that answers. */
  masterAddress(): Promise<{ host: string; port: number }>;
  /** SIGSTOPs the replica: it stops taking the primary's writes (and answering anyone) until `resumeReplica()`. */
  pauseReplica(): void;
  resumeReplica(): void;
  /**
   * Starts the primary killed last again (empty: no persistence); resolves once the sentinels made it a replica of
   * the current primary and it is in sync, so another failover can happen.
   */
  restartKilled(): Promise<void>;
  /** SIGKILLs the current primary (a crash) and notes when. */
  killPrimary(): Promise<void>;
  /**
   * Resolves once every sentinel names a new master and that server answers `ROLE` master. Returns its port and
   * the time from the kill.
   */
  waitForFailover(timeoutMs?: number): Promise<{ promoted: number; afterKillMs: number }>;
  logs(): string;
  stop(): Promise<void>;
}

export async function startRedisSentinel(): Promise<RedisSentinelSetup> {
  const servers: RedisNode[] = [];
  const sentinels: RedisNode[] = [];
  const all = (): RedisNode[] => [...servers, ...sentinels];
  const logs = (): string => all().map((node) => `--- ${sentinels.includes(node) ? 'sentinel' : 'redis'} ${node.port}${node.exited ? ' (exited)' : ''} ---\n${node.log(25)}`).join('\n');
  const stop = async (): Promise<void> => {
    await Promise.all(all().map((node) => node.stop()));
  };
  const base = ['--save', '', '--appendonly', 'no'];
  let primary: RedisNode;
  let replica: RedisNode;
  let killed: number | null = null;
  let killedAt = 0;

  try {
    const primaryPort = await freePort();
    primary = await startRedisNode(primaryPort, mkdtempSync(join(tmpdir(), 'iam-redis-primary-')), base);
    servers.push(primary);
    const replicaPort = await freePort();
    replica = await startRedisNode(replicaPort, mkdtempSync(join(tmpdir(), 'iam-redis-replica-')), [...base, '--replicaof', '127.0.0.1', String(primaryPort)]);
    servers.push(replica);
    for (let index = 0; index < 3; index++) {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), 'iam-redis-sentinel-'));
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          'sentinel resolve-hostnames no',
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
          `sentinel failover-timeout ${MASTER_NAME} 5000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push(await startRedisNode(port, dir, [conf], { sentinel: true }));
    }
    // Ready when the replica is in sync and every sentinel knows the replica and the two other sentinels (so a
    // failover can be authorized), not merely when the processes answer PING.
    await waitUntil(
      'sentinels ready (replica in sync, each sentinel knows the replica and the other sentinels)',
      async () => {
        const replication = parseInfo(String(await command(replicaPort, 'INFO', 'replication')));
        if (replication.master_link_status !== 'up') return false;
        for (const sentinel of sentinels) {
          const replicas = (await command(sentinel.port, 'SENTINEL', 'REPLICAS', MASTER_NAME)) as string[][];
          if (!replicas.some((fields) => fields[fields.indexOf('port') + 1] === String(replicaPort) && !/down|disconnected/.test(fields[fields.indexOf('flags') + 1] ?? ''))) return false;
          const others = (await command(sentinel.port, 'SENTINEL', 'SENTINELS', MASTER_NAME)) as unknown[];
          if (others.length !== 2) return false;
          if (!String(await command(sentinel.port, 'SENTINEL', 'CKQUORUM', MASTER_NAME)).startsWith('OK')) return false;
        }
        return true;
      },
      30_000,
      logs,
    );
  } catch (error) {
    await stop();
    throw error;
  }

  const masterAddress = async (): Promise<{ host: string; port: number }> => {
    let lastError: unknown = null;
    for (const sentinel of sentinels) {
      try {
        const [host, port] = (await command(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [string, string];
        return { host, port: Number(port) };
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError instanceof Error ? lastError : new Error('no sentinel answers');
  };

  return {
    url: `redis+sentinel://${sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(',')}/${MASTER_NAME}`,
    primaryPort: () => primary.port,
    replicaPort: () => replica.port,
    sentinelPorts: sentinels.map((sentinel) => sentinel.port),
    masterAddress,
    pauseReplica: () => replica.signal('SIGSTOP'),
    resumeReplica: () => replica.signal('SIGCONT'),
    async restartKilled() {
      if (!replica.exited) throw new Error('no killed server to restart');
      await replica.restart();
      await waitUntil(
        `the restarted ${replica.port} is a replica of ${primary.port} in sync, known to every sentinel`,
        async () => {
          const replication = parseInfo(String(await command(replica.port, 'INFO', 'replication')));
          if (replication.role !== 'slave' || replication.master_port !== String(primary.port) || replication.master_link_status !== 'up') return false;
          for (const sentinel of sentinels) {
            const replicas = (await command(sentinel.port, 'SENTINEL', 'REPLICAS', MASTER_NAME)) as string[][];
            if (!replicas.some((fields) => fields[fields.indexOf('port') + 1] === String(replica.port) && !/down|disconnected/.test(fields[fields.indexOf('flags') + 1] ?? ''))) return false;
          }
          return true;
        },
        30_000,
        logs,
      );
    },
    async killPrimary() {
      killed = primary.port;
      killedAt = Date.now();
      await primary.kill();
    },
    async waitForFailover(timeoutMs = 30_000) {
      if (killed === null) throw new Error('no primary was killed');
      const old = killed;
      let promoted = -1;
      await waitUntil(
        `sentinel failover away from ${old}`,
        async () => {
          for (const sentinel of sentinels) {
            const [, port] = (await command(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [string, string];
            if (Number(port) === old) return false;
            promoted = Number(port);
          }
          const role = (await command(promoted, 'ROLE')) as [string, ...unknown[]];
          return role[0] === 'master';
        },
        timeoutMs,
        logs,
      );
      const next = servers.find((server) => server.port === promoted);
      if (!next) throw new Error(`the sentinels promoted ${promoted}, not a server of this setup`);
      replica = primary;
      primary = next;
      return { promoted, afterKillMs: Date.now() - killedAt };
    },
    logs,
    stop,
  };
}
