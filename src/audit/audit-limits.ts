import type { AuditEventRecord } from '../domain/records';

/** Longest stored `targetId` (a route target is `METHOD /path`; paths may be 8 KB long). */
export const MAX_TARGET_LENGTH = 512;
/** Longest string stored inside `details` (a denial's reason repeats the path). */
export const MAX_DETAIL_STRING_LENGTH = 1024;

function cap(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function capDetails(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return cap(value, MAX_DETAIL_STRING_LENGTH);
  if (value === null || typeof value !== 'object' || depth > 8) return value;
  if (Array.isArray(value)) return value.map((item) => capDetails(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[key] = capDetails(item, depth + 1);
  return out;
}

/** Bounds what one event stores: the target and every string in its details are cut (marked `…`). */
export function capEvent(event: AuditEventRecord): AuditEventRecord {
  const targetId = event.targetId !== null && event.targetId.length > MAX_TARGET_LENGTH ? cap(event.targetId, MAX_TARGET_LENGTH) : event.targetId;
  const details = event.details === null ? null : (capDetails(event.details) as AuditEventRecord['details']);
  return { ...event, targetId, details };
}

/**
 * What a log line may say about a failed write: the error's class and SQLSTATE, never its message (the
 * driver's message carries the SQL and the values).
 */
export function describeFailure(error: unknown): { name: string; code?: string } {
  let current: unknown = error;
  const name = error instanceof Error ? error.name : typeof error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code.length <= 16) return { name, code };
    current = (current as { cause?: unknown }).cause;
  }
  return { name };
}

const MINUTE_MS = 60_000;

/**
 * Anonymous denials of undeclared routes, per minute: the first `perMinute` are recorded, the others only
 * counted, and each minute that suppressed some yields one summary event.
 */
export class AnonymousDenialLimit {
  private windowStart = 0;
  private admitted = 0;
  private suppressed = 0;
  private suppressedSince: Date | null = null;

  constructor(private readonly perMinute: number) {}

  admit(now: number): boolean {
    if (now - this.windowStart >= MINUTE_MS) {
      this.windowStart = now;
      this.admitted = 0;
    }
    if (this.admitted < this.perMinute) {
      this.admitted++;
      return true;
    }
    this.suppressedSince ??= new Date(now);
    this.suppressed++;
    return false;
  }

  /** The summary of the suppressed denials once their minute is over (or `force`), then resets. */
  takeSummary(now: number, force = false): AuditEventRecord | null {
    if (this.suppressed === 0 || (!force && now - this.windowStart < MINUTE_MS)) return null;
    const summary: AuditEventRecord = {
      occurredAt: new Date(now),
      action: 'authz.deny.suppressed',
      actorUserId: null,
      targetType: 'route',
      targetId: null,
      outcome: 'denied',
      decisionId: null,
      clientAddress: null,
      requestId: null,
      details: { failedStep: 'ROUTE_NOT_DECLARED', suppressed: this.suppressed, since: this.suppressedSince!.toISOString(), perMinute: this.perMinute },
    };
    this.suppressed = 0;
    this.suppressedSince = null;
    return summary;
  }
}
