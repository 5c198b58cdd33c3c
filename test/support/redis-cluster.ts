/**
 * A real Redis Cluster on loopback for the scale tests (issue #17): `primaries` primaries and
 * `replicasPerPrimary` replicas each, every node a `redis-server --cluster-enabled yes` process in its own temp
 * dir, joined by `redis-cli --cluster create … --cluster-replicas N --cluster-yes`. A replica always takes over a
 * killed primary (`cluster-replica-validity-factor 0`), within about two node timeouts (1 s each).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './front-proxy';
import { command, parseInfo, REDIS_CLI, startRedisNode, waitUntil, type RedisNode } from './redis-node';

export interface ClusterNodeInfo {
  port: number;
  pid: number;
  role: 'primary' | 'replica';
  /** False once killed. */
  alive: boolean;
}

/** One range of hash slots and the node serving it. */
export interface SlotRange {
  from: number;
  to: number;
  primary: number;
  replicas: number[];
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…` (every node a seed). */
  url: string;
  /** Every node with its role as last seen (`refreshRoles()` reads them again). */
  readonly nodes: ClusterNodeInfo[];
  refreshRoles(): Promise<ClusterNodeInfo[]>;
  /** The ports of the live primaries, as last seen. */
  primaries(): number[];
  /** Which primary (and replicas) serve which slots, as a live node sees it (`CLUSTER NODES`). */
  slotMap(): Promise<SlotRange[]>;
  /** The port of the primary serving `key` (its hash slot: `keySlot`). */
  primaryOf(key: string): Promise<number>;
  /** The port of the primary holding `key` (its slot's primary, where EXISTS says 1), or null when it is nowhere. */
  holderOf(key: string): Promise<number | null>;
  /** SIGSTOPs a node (it hangs: no replication, no answers) / SIGCONT it. */
  pause(port: number): void;
  resume(port: number): void;
  /** SIGKILLs a primary (a crash) and notes when. */
  killPrimary(port: number): Promise<void>;
  /**
   * Resolves once every live node says `cluster_state:ok`, all 16384 slots are served by live primaries, and the
   * killed primary's slots are served by a promoted replica that answers `ROLE` master. Returns that replica's
   * port and the time from the kill.
   */
  waitForFailover(timeoutMs?: number): Promise<{ promoted: number; afterKillMs: number }>;
  /** How many keys match `pattern` on each live primary (SCAN), by port. */
  keysPerPrimary(pattern: string): Promise<Map<number, number>>;
  /** The last lines of every node's log (failure messages). */
  logs(): string;
  /** Kills every node and removes their dirs. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  primaries?: number;
  replicasPerPrimary?: number;
  /** `cluster-node-timeout` in ms (default 1000). */
  nodeTimeoutMs?: number;
}

/** CRC16 (XMODEM), the checksum Redis Cluster maps keys to slots with. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The hash slot of `key`, as `CLUSTER KEYSLOT` computes it (a non-empty `{hash tag}` decides alone). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(Buffer.from(key.slice(open + 1, close))) % 16384;
  }
  return crc16(Buffer.from(key)) % 16384;
}

function run(binary: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${binary} ${args.join(' ')}: ${error.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * The slot map from `CLUSTER NODES` (`CLUSTER SLOTS` leaves out a replica that has not received a byte yet, so it
 * cannot tell which replica belongs to which primary in a fresh cluster). Failed nodes are left out.
 */
function parseNodes(text: string): SlotRange[] {
  const lines = text.trim().split('\n').map((line) => line.trim().split(' '));
  const portOf = (address: string): number => Number(address.split('@')[0]!.split(':').pop());
  const failed = (flags: string): boolean => /(^|,)(fail|fail\?|handshake|noaddr)(,|$)/.test(flags);
  const ranges: SlotRange[] = [];
  for (const [id, address, flags, , , , , , ...slots] of lines) {
    if (!flags!.includes('master') || failed(flags!)) continue;
    const replicas = lines.filter((line) => line[3] === id && !failed(line[2]!)).map((line) => portOf(line[1]!));
    for (const slot of slots) {
      if (slot.startsWith('[')) continue; // a slot being migrated or imported
      const [from, to] = slot.split('-').map(Number);
      ranges.push({ from: from!, to: to ?? from!, primary: portOf(address!), replicas });
    }
  }
  return ranges.sort((a, b) => a.from - b.from);
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const primaryCount = options.primaries ?? 3;
  const replicasPerPrimary = options.replicasPerPrimary ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000;
  const total = primaryCount * (1 + replicasPerPrimary);
  const servers: RedisNode[] = [];
  const info = new Map<number, ClusterNodeInfo>();
  let killedPort: number | null = null;
  let killedAt = 0;
  const logs = (): string => servers.map((server) => `--- node ${server.port}${server.exited ? ' (exited)' : ''} ---\n${server.log(25)}`).join('\n');
  const live = (): RedisNode[] => servers.filter((server) => !server.exited);

  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.stop()));
  };

  try {
    const used = new Set<number>();
    const pick = async (): Promise<number> => {
      for (;;) {
        const port = await freePort();
        if (!used.has(port)) {
          used.add(port);
          return port;
        }
      }
    };
    for (let index = 0; index < total; index++) {
      const port = await pick();
      const busPort = await pick();
      const dir = mkdtempSync(join(tmpdir(), `iam-redis-cluster-${port}-`));
      const args = [
        '--cluster-enabled', 'yes',
        '--cluster-config-file', 'nodes.conf',
        '--cluster-port', String(busPort),
        '--cluster-node-timeout', String(nodeTimeoutMs),
        // A replica takes over however stale it thinks its data is (the tests kill a primary while it writes).
        '--cluster-replica-validity-factor', '0',
        '--cluster-allow-reads-when-down', 'no',
        '--save', '',
        '--appendonly', 'no',
      ];
      servers.push(await startRedisNode(port, dir, args));
    }
    // The first `primaryCount` addresses become the primaries; redis-cli gives each the next ones as replicas.
    await run(REDIS_CLI, ['--cluster', 'create', ...servers.map((server) => `127.0.0.1:${server.port}`), '--cluster-replicas', String(replicasPerPrimary), '--cluster-yes'], 30_000);
    await waitUntil(
      'cluster formed (cluster_state:ok on every node, replicas in sync and known to every node)',
      async () => {
        for (const server of servers) {
          const fields = parseInfo(String(await command(server.port, 'CLUSTER', 'INFO')));
          if (fields.cluster_state !== 'ok' || fields.cluster_known_nodes !== String(total) || fields.cluster_slots_ok !== '16384') return false;
          const replication = parseInfo(String(await command(server.port, 'INFO', 'replication')));
          if (replication.role === 'slave' && replication.master_link_status !== 'up') return false;
          // Gossip, not the replication link, tells the other nodes which primary a replica follows: until it has,
          // a node's slot map shows a primary without its replica.
          const ranges = parseNodes(String(await command(server.port, 'CLUSTER', 'NODES')));
          if (ranges.some((range) => range.replicas.length !== replicasPerPrimary)) return false;
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

  const refreshRoles = async (): Promise<ClusterNodeInfo[]> => {
    for (const server of servers) {
      let role: ClusterNodeInfo['role'] = info.get(server.port)?.role ?? 'primary';
      if (!server.exited) {
        const reply = (await command(server.port, 'ROLE')) as [string, ...unknown[]];
        role = reply[0] === 'master' ? 'primary' : 'replica';
      }
      info.set(server.port, { port: server.port, pid: server.pid, role, alive: !server.exited });
    }
    return [...info.values()];
  };
  try {
    await refreshRoles();
  } catch (error) {
    await stop();
    throw error;
  }

  const slotMap = async (): Promise<SlotRange[]> => {
    let lastError: unknown = null;
    for (const server of live()) {
      try {
        return parseNodes(String(await command(server.port, 'CLUSTER', 'NODES')));
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError instanceof Error ? lastError : new Error('no live node');
  };

  return {
    url: `redis+cluster://${servers.map((server) => `127.0.0.1:${server.port}`).join(',')}`,
    get nodes() {
      return [...info.values()];
    },
    refreshRoles,
    primaries: () => [...info.values()].filter((node) => node.alive && node.role === 'primary').map((node) => node.port),
    slotMap,
    async primaryOf(key) {
      const slot = keySlot(key);
      const range = (await slotMap()).find((entry) => entry.from <= slot && slot <= entry.to);
      if (!range) throw new Error(`slot ${slot} is not served`);
      return range.primary;
    },
    async holderOf(key) {
      const slot = keySlot(key);
      const range = (await slotMap()).find((entry) => entry.from <= slot && slot <= entry.to);
      if (!range) throw new Error(`slot ${slot} is not served`);
      return Number(await command(range.primary, 'EXISTS', key)) === 1 ? range.primary : null;
    },
    pause: (port) => servers.find((entry) => entry.port === port)!.signal('SIGSTOP'),
    resume: (port) => servers.find((entry) => entry.port === port)!.signal('SIGCONT'),
    async killPrimary(port) {
      const server = servers.find((entry) => entry.port === port);
      if (!server || info.get(port)?.role !== 'primary') throw new Error(`${port} is not a primary of this cluster`);
      killedPort = port;
      killedAt = Date.now();
      await server.kill();
      info.set(port, { ...info.get(port)!, alive: false });
    },
    async waitForFailover(timeoutMs = 30_000) {
      if (killedPort === null) throw new Error('no primary was killed');
      const killed = killedPort;
      let promoted = -1;
      await waitUntil(
        `failover of the primary on ${killed}`,
        async () => {
          for (const server of live()) {
            const fields = parseInfo(String(await command(server.port, 'CLUSTER', 'INFO')));
            if (fields.cluster_state !== 'ok' || fields.cluster_slots_ok !== '16384') return false;
            const ranges = parseNodes(String(await command(server.port, 'CLUSTER', 'NODES')));
            if (ranges.some((range) => range.primary === killed)) return false;
            if (ranges.reduce((sum, range) => sum + range.to - range.from + 1, 0) !== 16384) return false;
          }
          const before = info.get(killed);
          // The killed primary's replica is the one now serving slots it did not serve before.
          const candidates = live().filter((server) => info.get(server.port)?.role === 'replica');
          for (const candidate of candidates) {
            const role = (await command(candidate.port, 'ROLE')) as [string, ...unknown[]];
            if (role[0] === 'master') promoted = candidate.port;
          }
          return before !== undefined && promoted !== -1;
        },
        timeoutMs,
        logs,
      );
      await refreshRoles();
      return { promoted, afterKillMs: Date.now() - killedAt };
    },
    async keysPerPrimary(pattern) {
      const counts = new Map<number, number>();
      for (const port of (await slotMap()).map((range) => range.primary).filter((port, index, all) => all.indexOf(port) === index)) {
        let cursor = '0';
        let count = 0;
        do {
          const [next, keys] = (await command(port, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)) as [string, string[]];
          cursor = next;
          count += keys.length;
        } while (cursor !== '0');
        counts.set(port, count);
      }
      return counts;
    },
    logs,
    stop,
  };
}
