import type { AuditEventRecord } from '../domain/records';

/** Longest stored `targetId` (a route target is `METHOD /path`; paths may be 8 KB long). */
export const MAX_TARGET_LENGTH = 512;
/** Longest string stored inside `details` (a denial's reason repeats the path). */
export const MAX_DETAIL_STRING_LENGTH = 1024;

function cap(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Objects nested deeper than this are stored as they are, neither copied nor cut (as they always were). */
const MAX_DETAIL_DEPTH = 8;

/** A copy of `value` with every string within reach cut to {@link MAX_DETAIL_STRING_LENGTH}. */
function copyDetails(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return cap(value, MAX_DETAIL_STRING_LENGTH);
  if (value === null || typeof value !== 'object' || depth > MAX_DETAIL_DEPTH) return value;
  if (Array.isArray(value)) return value.map((item) => copyDetails(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[key] = copyDetails(item, depth + 1);
  return out;
}

/**
 * Whether {@link copyDetails} would give back `value` unchanged: every string it reaches within bounds, and only
 * objects a copy reproduces as they are — plain objects (no `__proto__` key: assigning it to the copy would set
 * the copy's prototype) and plain arrays. Anything else (a string to cut, a Date, a class instance, a null
 * prototype) is left to the copy. Reads without allocating: the common event is within bounds.
 */
function withinBounds(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return value.length <= MAX_DETAIL_STRING_LENGTH;
  if (value === null || typeof value !== 'object' || depth > MAX_DETAIL_DEPTH) return true;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return false;
    for (let i = 0; i < value.length; i++) if (!withinBounds(value[i], depth + 1)) return false;
    return true;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value) {
    // Inherited keys are read too (a copy skips them): stricter, never looser.
    if (key === '__proto__' || !withinBounds((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/**
 * `details` bounded: every string within {@link MAX_DETAIL_DEPTH} levels cut to {@link MAX_DETAIL_STRING_LENGTH}
 * (marked `…`). Details already within bounds — nearly all of them — are returned as they are, not copied: what is
 * stored is the same (callers hand over details they no longer change); only details with something to cut, or
 * an object a copy would reshape, are copied.
 */
export function capDetails(details: NonNullable<AuditEventRecord['details']>): NonNullable<AuditEventRecord['details']> {
  return withinBounds(details, 0) ? details : (copyDetails(details, 0) as NonNullable<AuditEventRecord['details']>);
}

/**
 * Bounds what one event stores: the target and every string in its details are cut (marked `…`). In place: for an
 * event its caller has just built and hands over (no second object per event).
 */
export function capOwnEvent(event: AuditEventRecord): AuditEventRecord {
  if (event.targetId !== null && event.targetId.length > MAX_TARGET_LENGTH) event.targetId = cap(event.targetId, MAX_TARGET_LENGTH);
  if (event.details !== null) event.details = capDetails(event.details);
  return event;
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

/** What the limit reads of an event: enough to tell its kind and to describe the kind in a summary. */
export type AuditKindSource = Pick<AuditEventRecord, 'action' | 'outcome'> & Partial<Pick<AuditEventRecord, 'targetType' | 'details'>>;

/** One kind's minute: when it began, how many it recorded, how many it only counted. */
interface Window {
  start: number;
  admitted: number;
  suppressed: number;
  suppressedSince: number | null;
  /** What the summary says of the kind (from its first event). */
  action: string;
  targetType: string | null;
  outcome: AuditEventRecord['outcome'];
  details: { failedStep?: string; authenticator?: string };
}

/**
 * Events raised by requests nobody authenticated — an anonymous denial or shadow "would deny", a failed OpenID
 * Connect callback — cost the sender nothing, so storing each one lets anyone fill the trail. They are limited per
 * kind (the action and, for a decision, its failed step: a closed set) and minute: the first `perMinute` are
 * recorded, the others only counted, and each minute of a kind that suppressed some yields one summary event
 * (`<action>.suppressed`). Per kind, so a flood of scanner probes does not also hide the first failed callbacks.
 */
export class AnonymousAuditLimit {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly perMinute: number) {}

  /** Whether to record `event` (read before it is built: a suppressed one costs no more than this). */
  admit(event: AuditKindSource, now: number): boolean {
    const details = kindDetails(event);
    const key = `${event.action}\0${details.failedStep ?? ''}\0${details.authenticator ?? ''}`;
    let window = this.windows.get(key);
    if (window === undefined) {
      window = { start: now, admitted: 0, suppressed: 0, suppressedSince: null, action: event.action, targetType: event.targetType ?? null, outcome: event.outcome, details };
      this.windows.set(key, window);
    } else if (now - window.start >= MINUTE_MS) {
      window.start = now;
      window.admitted = 0;
    }
    if (window.admitted < this.perMinute) {
      window.admitted++;
      return true;
    }
    window.suppressedSince ??= now;
    window.suppressed++;
    return false;
  }

  /** The summaries of the kinds whose suppressing minute is over (every one with `force`), then resets them. */
  takeSummaries(now: number, force = false): AuditEventRecord[] {
    const summaries: AuditEventRecord[] = [];
    for (const window of this.windows.values()) {
      if (window.suppressed === 0 || (!force && now - window.start < MINUTE_MS)) continue;
      summaries.push({
        occurredAt: new Date(now),
        action: `${window.action}.suppressed`,
        actorUserId: null,
        targetType: window.targetType,
        targetId: null,
        outcome: window.outcome,
        decisionId: null,
        clientAddress: null,
        requestId: null,
        details: { ...window.details, suppressed: window.suppressed, since: new Date(window.suppressedSince!).toISOString(), perMinute: this.perMinute },
      });
      window.suppressed = 0;
      window.suppressedSince = null;
    }
    return summaries;
  }
}

/**
 * What, besides its action, tells one kind of unauthenticated event from another: a decision's failed step
 * (`ROUTE_NOT_DECLARED`, `UNAUTHENTICATED`...) and a failed login's authenticator. Both come from closed sets.
 */
function kindDetails(event: AuditKindSource): { failedStep?: string; authenticator?: string } {
  const decision = event.details?.decision as { failedStep?: unknown } | undefined;
  const authenticator = event.details?.authenticator;
  return {
    ...(typeof decision?.failedStep === 'string' ? { failedStep: decision.failedStep } : {}),
    ...(typeof authenticator === 'string' ? { authenticator } : {}),
  };
}
