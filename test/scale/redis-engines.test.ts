/**
 * The Redis engines the scale tests run on (issue #17), tested on their own: a Redis Cluster of 3 primaries and
 * 3 replicas forms, serves a key from the primary its slot names, and promotes a replica when a primary is killed;
 * Sentinel promotes the replica when the primary is killed. No gateway is involved.
 */
import { notRun } from '../support/env';
import { command, redisEnginesAvailable } from '../support/redis-node';
import { keySlot, startRedisCluster, type RedisCluster } from '../support/redis-cluster';
import { startRedisSentinel, type RedisSentinelSetup } from '../support/redis-sentinel';

const runnable = redisEnginesAvailable();
if (!runnable) notRun('redis-engines: Redis Cluster and Sentinel test harness (needs /usr/bin/redis-server and redis-cli; CI has them)');
const describeWithEngines = runnable ? describe : describe.skip;

describeWithEngines('a Redis Cluster of 3 primaries and 3 replicas on loopback', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3, replicasPerPrimary: 1 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('forms: 3 primaries each serving slots, 3 replicas, every slot covered', async () => {
    expect(cluster.nodes.filter((node) => node.role === 'primary')).toHaveLength(3);
    expect(cluster.nodes.filter((node) => node.role === 'replica')).toHaveLength(3);
    const ranges = await cluster.slotMap();
    expect(ranges.reduce((sum, range) => sum + range.to - range.from + 1, 0)).toBe(16384);
    expect(new Set(ranges.map((range) => range.primary))).toEqual(new Set(cluster.primaries()));
    for (const range of ranges) expect(range.replicas).toHaveLength(1);
    expect(cluster.url).toMatch(/^redis\+cluster:\/\/127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){5}$/);
  });

  it('stores a key on the primary its hash slot names (the hash tag decides), and counts keys per primary', async () => {
    const keys = Array.from({ length: 60 }, (_, index) => `selftest:token:{${index.toString(16).padStart(64, '0')}}`);
    for (const key of [...keys, 'plain', 'a{}b', '{}{x}', 'x{y}{z}', 'ümlaut:{ü}']) {
      expect(keySlot(key)).toBe(Number(await command(cluster.primaries()[0]!, 'CLUSTER', 'KEYSLOT', key)));
    }
    for (const key of keys) {
      const port = await cluster.primaryOf(key);
      expect(await command(port, 'SET', key, '1')).toBe('OK');
      expect(await command(port, 'GET', key)).toBe('1');
    }
    // The same hash tag lands on the same slot, whatever else the key says.
    expect(await cluster.primaryOf('a:{same}:1')).toBe(await cluster.primaryOf('b:{same}:2'));
    const counts = await cluster.keysPerPrimary('selftest:token:*');
    expect([...counts.values()].reduce((sum, count) => sum + count, 0)).toBe(60);
    expect(counts.size).toBe(3);
    // A key asked of the wrong primary is redirected.
    const owner = await cluster.primaryOf(keys[0]!);
    const other = cluster.primaries().find((port) => port !== owner)!;
    await expect(command(other, 'GET', keys[0]!)).rejects.toThrow(/MOVED/);
  });

  it('promotes the replica of a killed primary; its keys survive (replicated) and the cluster is ok again', async () => {
    const key = 'selftest:failover:{x}';
    const owner = await cluster.primaryOf(key);
    await command(owner, 'SET', key, 'kept');
    expect(await command(owner, 'WAIT', 1, 1000)).toBe(1);
    const replicaOfOwner = (await cluster.slotMap()).find((range) => range.primary === owner)!.replicas[0]!;
    await cluster.killPrimary(owner);
    const { promoted, afterKillMs } = await cluster.waitForFailover();
    process.stdout.write(`[scale] cluster failover: replica ${promoted} serves the slots of ${owner} ${afterKillMs} ms after the kill\n`);
    expect(promoted).toBe(replicaOfOwner);
    expect(await cluster.primaryOf(key)).toBe(promoted);
    expect(await command(promoted, 'GET', key)).toBe('kept');
    expect(cluster.primaries()).toHaveLength(3);
    expect(cluster.primaries()).not.toContain(owner);
    expect(cluster.nodes.find((node) => node.port === owner)!.alive).toBe(false);
  }, 60_000);
});

describeWithEngines('Redis Sentinel (1 primary, 1 replica, 3 sentinels) on loopback', () => {
  let setup: RedisSentinelSetup;
  beforeAll(async () => {
    setup = await startRedisSentinel();
  }, 60_000);
  afterAll(async () => {
    await setup?.stop();
  });

  it('names the primary, and promotes the replica when the primary is killed', async () => {
    expect(setup.url).toMatch(/^redis\+sentinel:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/mymaster$/);
    const old = setup.primaryPort();
    const replica = setup.replicaPort();
    expect(await setup.masterAddress()).toEqual({ host: '127.0.0.1', port: old });
    await command(old, 'SET', 'selftest:sentinel', 'kept');
    expect(await command(old, 'WAIT', 1, 1000)).toBe(1);

    await setup.killPrimary();
    const { promoted, afterKillMs } = await setup.waitForFailover();
    process.stdout.write(`[scale] sentinel failover: ${promoted} is the primary ${afterKillMs} ms after the kill of ${old}\n`);
    expect(promoted).toBe(replica);
    expect(setup.primaryPort()).toBe(replica);
    expect(await setup.masterAddress()).toEqual({ host: '127.0.0.1', port: replica });
    expect(await command(replica, 'GET', 'selftest:sentinel')).toBe('kept');
    expect(await command(replica, 'SET', 'selftest:sentinel', 'written after')).toBe('OK');
  }, 60_000);
});
