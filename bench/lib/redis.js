'use strict';
/** Which Redis the bench uses, and cleaning up what it wrote there. */
const net = require('node:net');
const { requireDist } = require('./dist');

const LOCAL_REDIS = 'redis://127.0.0.1:6379';

/** True when something at 127.0.0.1:6379 answers PING with +PONG within `timeoutMs`. */
function localRedisAnswers(timeoutMs = 500) {
  return new Promise((resolve) => {
    const socket = net.connect(6379, '127.0.0.1');
    let answer = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'));
    });
  });
}

/**
 * REDIS_URL when set; else the local default when it answers; else null (in-process token store).
 * Resolves `{ url, source }` with source `REDIS_URL`, `local` or `none`.
 */
async function resolveRedis(env = process.env) {
  if (env.REDIS_URL) return { url: env.REDIS_URL, source: 'REDIS_URL' };
  if (await localRedisAnswers()) return { url: LOCAL_REDIS, source: 'local' };
  return { url: null, source: 'none' };
}

/** The gateway's own RedisTokenStore (from dist) under `prefix`. */
async function connectStore(url, prefix) {
  const { RedisTokenStore } = requireDist('adapters/redis/redis-token-store');
  return RedisTokenStore.connect({ url, prefix, commandTimeoutMs: 5000 });
}

/** Deletes every key under each prefix (the gateway's own purge); resolves the number deleted. */
async function purgePrefixes(url, prefixes) {
  if (!url) return 0;
  let deleted = 0;
  for (const prefix of prefixes) {
    const store = await connectStore(url, prefix);
    try {
      deleted += await store.purge();
    } finally {
      await store.close();
    }
  }
  return deleted;
}

/** `calls` of one command from INFO commandstats (server-wide: other clients count too), or null. */
/** The commands that read a token record: GET, MGET (coalesced reads), EVALSHA (sliding idle timeout). */
const TOKEN_READ_COMMANDS = ['get', 'mget', 'evalsha'];

/** Calls of the given commands since the server started (`INFO commandstats`), summed; null if unreadable. */
async function commandCalls(url, commands) {
  const { Redis } = require('ioredis');
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  try {
    await client.connect();
    const info = await client.info('commandstats');
    let total = 0;
    for (const command of [].concat(commands)) {
      const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
      total += match ? Number(match[1]) : 0;
    }
    return total;
  } catch {
    return null;
  } finally {
    client.disconnect();
  }
}

module.exports = { LOCAL_REDIS, resolveRedis, connectStore, purgePrefixes, commandCalls, TOKEN_READ_COMMANDS };
