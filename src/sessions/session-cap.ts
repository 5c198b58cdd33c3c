import type { SessionRecord } from '../domain/records';

/**
 * Which live sessions to end so that a user keeps at most `max` (docs/threat-model.md #11.18, `iam.token.max-sessions-per-user`):
 * the oldest first. `keep` (the session just opened and the sessions it was derived from) is never chosen,
 * so a login or a switch never ends the session it returns.
 */
export function sessionsOverCap(rows: readonly SessionRecord[], live: ReadonlyMap<string, string>, max: number, keep: ReadonlySet<string>): SessionRecord[] {
  if (live.size <= max) return [];
  const candidates = rows
    .filter((row) => live.has(row.sessionId) && !keep.has(row.sessionId))
    .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.sessionId < b.sessionId ? -1 : 1));
  return candidates.slice(0, live.size - max);
}

/** `sessionId` and every session it was derived from (origin links, cycle-safe). */
export function withOrigins(rows: readonly SessionRecord[], sessionId: string): Set<string> {
  const byId = new Map(rows.map((row) => [row.sessionId, row]));
  const chain = new Set<string>();
  for (let id: string | null | undefined = sessionId; id && !chain.has(id); id = byId.get(id)?.originSessionId) chain.add(id);
  return chain;
}
