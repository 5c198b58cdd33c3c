import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/** A Lua script and its SHA1, so it can be run by EVALSHA. */
export interface LuaScript {
  lua: string;
  sha: string;
}

const luaScript = (lua: string): LuaScript => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

/**
 * Reads a token and, in the same round trip, slides its idle window (one round trip per request).
 * Value layout: `<expiresAtMs>|<idleTimeoutMs>|<json>`. ARGV[1] = the caller's clock (the same clock that
 * computed the PX at put time). A malformed value is returned as is for the client to reject.
 */
export const GET_TOKEN = luaScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local a = string.find(v, '|', 1, true)
local b = a and string.find(v, '|', a + 1, true)
if not b then return v end
local expiresAt = tonumber(string.sub(v, 1, a - 1))
local idle = tonumber(string.sub(v, a + 1, b - 1))
if not expiresAt or not idle then return v end
local left = expiresAt - tonumber(ARGV[1])
if left <= 0 then return false end
if idle > 0 then
  local ttl = idle
  if left < ttl then ttl = left end
  redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(ttl)))
end
return v`);

/** Fixed-window counter: INCR, and start the window on the first hit (or if a TTL was lost). */
export const HIT_COUNTER = luaScript(`
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}`);

/**
 * Rate limiting in one step (no check-then-increment race): KEYS = counters, ARGV[1] = window ms,
 * ARGV[1 + i] = limit of KEYS[i]. If every counter is below its limit, all are incremented (a window
 * starts at a counter's first increment) and {1, 0} is returned; else nothing changes and {0, pttl of the
 * full counter} is returned. A full counter that lost its TTL gets the window again (never locked forever).
 */
export const TAKE_COUNTERS = luaScript(`
for i = 1, #KEYS do
  local count = tonumber(redis.call('GET', KEYS[i]) or '0')
  if count >= tonumber(ARGV[i + 1]) then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then
      redis.call('PEXPIRE', KEYS[i], ARGV[1])
      ttl = tonumber(ARGV[1])
    end
    return {0, ttl}
  end
end
for i = 1, #KEYS do
  redis.call('INCR', KEYS[i])
  if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return {1, 0}`);

/** Gives back one unit of a counter (never below zero, keeping its TTL). */
export const RELEASE_COUNTER = luaScript(`
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count > 0 then return redis.call('DECR', KEYS[1]) end
return 0`);

/** {@link runScript} with any number of keys and arguments. */
export async function runScriptKeys(redis: Redis | Cluster, script: LuaScript, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return redis.eval(script.lua, keys.length, ...keys, ...args);
  }
}

/** EVALSHA, falling back to EVAL when the server lost its script cache (restart, SCRIPT FLUSH). */
export async function runScript(redis: Redis | Cluster, script: LuaScript, key: string, arg: number): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, 1, key, arg);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return redis.eval(script.lua, 1, key, arg);
  }
}
