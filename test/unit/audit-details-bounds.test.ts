/**
 * The bounds of what one audit event stores (src/audit/audit-limits.ts): `capDetails` returns details already within
 * bounds as they are and copies only when something must be cut, so it is held here to the copying algorithm it
 * replaced — the same stored value for every generated input, just over and just under each limit, deep and odd
 * ones included — and an event whose target or details are too long is still cut.
 */
import { capDetails, capOwnEvent, MAX_DETAIL_STRING_LENGTH, MAX_TARGET_LENGTH } from '../../src/audit/audit-limits';
import type { AuditEventRecord } from '../../src/domain/records';

/** The algorithm every event went through before: a full copy, every string within 8 levels cut. */
function previousCapDetails(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length <= MAX_DETAIL_STRING_LENGTH ? value : `${value.slice(0, MAX_DETAIL_STRING_LENGTH - 1)}…`;
  if (value === null || typeof value !== 'object' || depth > 8) return value;
  if (Array.isArray(value)) return value.map((item) => previousCapDetails(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[key] = previousCapDetails(item, depth + 1);
  return out;
}

/** A seeded generator (mulberry32): the same inputs on every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LENGTHS = [0, 1, 40, MAX_DETAIL_STRING_LENGTH - 1, MAX_DETAIL_STRING_LENGTH, MAX_DETAIL_STRING_LENGTH + 1, 3 * MAX_DETAIL_STRING_LENGTH];

/** `[1, <hole>, 3]`. */
function sparse(): unknown[] {
  const items: unknown[] = [1];
  items[2] = 3;
  return items;
}

class Instance {
  readonly kind = 'instance';
}

function generate(next: () => number, depth: number, maxDepth: number): unknown {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const roll = next();
  if (depth >= maxDepth || roll < 0.3) {
    // Mostly strings within bounds, as real details are; a long one now and then.
    const length = next() < 0.85 ? pick(LENGTHS.slice(0, 5)) : pick(LENGTHS);
    return pick<unknown>(['é'.repeat(length), 'x'.repeat(length), 7, -0.5, true, false, null, undefined]);
  }
  if (roll < 0.33) return pick<unknown>([new Date(0), Object.create(null), new Instance(), new Map([['k', 'v']]), JSON.parse('{"__proto__": {"a": "b"}, "c": "d"}'), sparse()]);
  const size = Math.floor(next() * 4);
  if (roll < 0.6) return Array.from({ length: size }, () => generate(next, depth + 1, maxDepth));
  const out: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) out[pick(['reason', 'steps', 'id', 'decision', '0', 'a b'])] = generate(next, depth + 1, maxDepth);
  return out;
}

/** An object `levels` deep whose innermost value is `leaf`: `{ n: { n: … leaf } }`. */
function nested(levels: number, leaf: unknown): Record<string, unknown> {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = { n: value };
  return value as Record<string, unknown>;
}

describe('capDetails', () => {
  it('stores what the copying algorithm stored, for generated details on both sides of every limit', () => {
    const next = random(20261128);
    let copied = 0;
    let kept = 0;
    for (let i = 0; i < 3000; i++) {
      const details = { decision: generate(next, 1, 1 + Math.floor(next() * 12)) };
      const before = JSON.stringify(details);
      const expected = previousCapDetails(details);
      const stored = capDetails(details);
      expect(stored).toStrictEqual(expected);
      expect(JSON.stringify(stored)).toBe(JSON.stringify(expected));
      // The input is never changed: a cut is made in a copy.
      expect(JSON.stringify(details)).toBe(before);
      if (stored === details) kept++;
      else copied++;
    }
    // Both paths ran, many times.
    expect(kept).toBeGreaterThan(300);
    expect(copied).toBeGreaterThan(300);
  });

  it('cuts a string one over the limit at every depth it always reached, and keeps one at the limit', () => {
    for (let levels = 0; levels <= 8; levels++) {
      const over = nested(levels, { reason: 'r'.repeat(MAX_DETAIL_STRING_LENGTH + 1) });
      const stored = capDetails(over);
      expect(stored).not.toBe(over);
      expect(stored).toStrictEqual(previousCapDetails(over));
      expect(JSON.stringify(stored)).toContain(`"${'r'.repeat(MAX_DETAIL_STRING_LENGTH - 1)}…"`);
      const at = nested(levels, { reason: 'r'.repeat(MAX_DETAIL_STRING_LENGTH) });
      expect(capDetails(at)).toBe(at);
    }
    // In an array too, after strings within bounds.
    const steps = { decision: { steps: [{ reason: 'ok' }, { reason: 'ok' }, { reason: 'x'.repeat(8192) }] } };
    const stored = capDetails(steps) as typeof steps;
    expect(stored.decision.steps[2]!.reason).toHaveLength(MAX_DETAIL_STRING_LENGTH);
    expect(stored.decision.steps[2]!.reason.endsWith('…')).toBe(true);
    expect(stored.decision.steps[0]).toEqual({ reason: 'ok' });
  });

  it('copies what a copy reshapes even when no string is long: a Date, a null prototype, a __proto__ key', () => {
    for (const odd of [new Date(0), Object.create(null) as object, JSON.parse('{"__proto__": {"a": 1}}') as object, new Instance()]) {
      const details = { decision: { odd } };
      const stored = capDetails(details);
      expect(stored).not.toBe(details);
      expect(stored).toStrictEqual(previousCapDetails(details));
    }
  });
});

describe('capOwnEvent', () => {
  const event = (targetId: string | null, details: AuditEventRecord['details']): AuditEventRecord => ({
    occurredAt: new Date(0),
    action: 'authz.check',
    actorUserId: 'u-1',
    targetType: 'permission',
    targetId,
    outcome: 'success',
    decisionId: 'd-1',
    clientAddress: null,
    requestId: null,
    details,
  });

  it('cuts a target one over its limit and keeps one at it', () => {
    expect(capOwnEvent(event('t'.repeat(MAX_TARGET_LENGTH + 1), null)).targetId).toBe(`${'t'.repeat(MAX_TARGET_LENGTH - 1)}…`);
    expect(capOwnEvent(event('t'.repeat(MAX_TARGET_LENGTH), null)).targetId).toBe('t'.repeat(MAX_TARGET_LENGTH));
  });

  it('bounds the details: kept as they are within bounds, a cut copy beyond', () => {
    const within = { decision: { reason: 'ok' } };
    expect(capOwnEvent(event(null, within)).details).toBe(within);
    const long = { decision: { reason: 'p'.repeat(MAX_DETAIL_STRING_LENGTH * 2) } };
    expect(capOwnEvent(event(null, long)).details).toStrictEqual(previousCapDetails(long));
  });
});
