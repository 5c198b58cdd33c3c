import type { SessionRecord } from '../domain/records';

/** The sessions derived from `rootId` through `originSessionId` links, at any depth (cycle-safe). */
export function derivedSessions(sessions: readonly SessionRecord[], rootId: string): SessionRecord[] {
  const children = new Map<string, SessionRecord[]>();
  for (const session of sessions) {
    if (!session.originSessionId) continue;
    const list = children.get(session.originSessionId) ?? [];
    list.push(session);
    children.set(session.originSessionId, list);
  }
  const found: SessionRecord[] = [];
  const seen = new Set<string>([rootId]);
  const queue = [rootId];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      if (seen.has(child.sessionId)) continue;
      seen.add(child.sessionId);
      found.push(child);
      queue.push(child.sessionId);
    }
  }
  return found;
}
