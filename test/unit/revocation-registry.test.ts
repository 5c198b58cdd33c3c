/**
 * #11.28/#11.29: the in-memory copy of the durable revocation record (src/sessions/revocation-registry.ts).
 * #28 item 3: revocation is decided by time, not by first use (docs/threat-model.md, Round 3); every instant here is
 * fixed, none is read from the clock.
 */
import { RevocationRegistry } from '../../src/sessions/revocation-registry';
import type { TokenRecord } from '../../src/domain/token-record';

const record = (sessionId: string, userId: string, sessionEpoch?: number): TokenRecord => ({
  sessionId,
  principal: { userId, identityId: `id-${userId}`, identityDomain: 'example.com', activeProfileId: null, authorizationVersion: 0 },
  clientType: 'WEB',
  createdAt: new Date().toISOString(),
  expiresAt: new Date(Date.now() + 60_000).toISOString(),
  idleTimeoutMs: 0,
  ...(sessionEpoch === undefined ? {} : { sessionEpoch }),
});

describe('#11.29 revocation registry', () => {
  it('#11.29: refuses ended sessions, loaded from the record or learnt from events, and nothing else', () => {
    const registry = new RevocationRegistry(60_000);
    registry.load({ sessions: [{ sessionId: 's-loaded', expiresAt: new Date(Date.now() + 60_000) }], epochs: [] });
    registry.apply({ type: 'session-ended', sessionId: 's-event', tokenHash: 'h', userId: 'u', reason: 'logout' });
    expect(registry.refuses(record('s-loaded', 'u'))).toBe(true);
    expect(registry.refuses(record('s-event', 'u'))).toBe(true);
    expect(registry.refuses(record('s-live', 'u'))).toBe(false);
  });

  it('#11.28: a token issued under an older session epoch is refused, one issued under the current epoch is not; epochs never go back', () => {
    const registry = new RevocationRegistry(60_000);
    registry.apply({ type: 'user-sessions-ended', userId: 'u', reason: 'user_disabled', sessionEpoch: 2 });
    registry.raiseEpoch('u', 1);
    expect(registry.epochOf('u')).toBe(2);
    expect(registry.refuses(record('s1', 'u'))).toBe(true); // no epoch in the record: issued before any
    expect(registry.refuses(record('s2', 'u', 1))).toBe(true);
    expect(registry.refuses(record('s3', 'u', 2))).toBe(false);
    expect(registry.refuses(record('s4', 'other'))).toBe(false);
  });

  it('#11.7: a session derived by profile switches is refused as soon as any session it derives from ended', () => {
    const registry = new RevocationRegistry(60_000);
    const grandchild: TokenRecord = { ...record('s-c', 'u'), originSessionId: 's-b', ancestorSessionIds: ['s-b', 's-a'] };
    expect(registry.refuses(grandchild)).toBe(false);
    registry.apply({ type: 'session-ended', sessionId: 's-a', tokenHash: 'h', userId: 'u', reason: 'logout' });
    expect(registry.refuses(grandchild)).toBe(true);
    expect(registry.refuses({ ...record('s-d', 'u'), originSessionId: 's-x', ancestorSessionIds: ['s-x'] })).toBe(false);
  });
});

/** Fixed instants: the revocation at 12:00:00.500, tokens issued around it (a provider's `iat` has whole seconds). */
const REVOKED_AT = Date.parse('2030-01-01T12:00:00.500Z');
const at = (iso: string): string => new Date(Date.parse(`2030-01-01T${iso}Z`)).toISOString();

/** A provider access token as AccessTokenVerifier records it: createdAt from `iat`, the epoch read at its first verification. */
const accessToken = (userId: string, createdAt: string, sessionEpoch: number): TokenRecord => ({ ...record(`at:${createdAt}`, userId, sessionEpoch), createdAt, source: 'access-token' });

describe('#28 revocation is decided by time, not by first use', () => {
  it('#28: a provider access token issued before the revocation instant is refused even with the current epoch (first verified afterwards); one issued after is not', () => {
    const registry = new RevocationRegistry(60_000);
    registry.raiseEpoch('u', 3, REVOKED_AT);
    // The epoch a first verification after the revoke stamps is the current one: only the time decides.
    expect(registry.refuses(accessToken('u', at('11:59:59.000'), 3))).toBe(true);
    expect(registry.refuses(accessToken('u', at('11:00:00.000'), 3))).toBe(true);
    expect(registry.refuses(accessToken('u', at('12:00:01.000'), 3))).toBe(false);
    expect(registry.refuses(accessToken('other', at('11:59:59.000'), 0))).toBe(false);
  });

  it('#28: iat has whole seconds: a token of the revocation second is refused (fail closed), also one whose iat equals the instant', () => {
    const registry = new RevocationRegistry(60_000);
    registry.raiseEpoch('u', 1, REVOKED_AT);
    // Issued at 12:00:00.900 (after the revoke) or 12:00:00.100 (before): both carry iat 12:00:00.
    expect(registry.refuses(accessToken('u', at('12:00:00.000'), 1))).toBe(true);
    const exact = new RevocationRegistry(60_000);
    exact.raiseEpoch('u', 1, Date.parse(at('12:00:00.000')));
    expect(exact.refuses(accessToken('u', at('12:00:00.000'), 1))).toBe(true);
    expect(exact.refuses(accessToken('u', at('12:00:01.000'), 1))).toBe(false);
  });

  it('#28: the instant is learnt from the loaded record, from user-sessions-ended events (with or without the epoch) and never goes back', () => {
    const loaded = new RevocationRegistry(60_000);
    loaded.load({ sessions: [], epochs: [{ userId: 'u', sessionEpoch: 2, sessionsRevokedAt: new Date(REVOKED_AT) }, { userId: 'v', sessionEpoch: 1, sessionsRevokedAt: null }] });
    expect(loaded.refuses(accessToken('u', at('12:00:00.000'), 2))).toBe(true);
    expect(loaded.refuses(accessToken('u', at('12:00:01.000'), 2))).toBe(false);
    // A user whose epoch was raised before the instant was recorded (a record of an older version): the epoch alone.
    expect(loaded.refuses(accessToken('v', at('11:00:00.000'), 1))).toBe(false);

    const events = new RevocationRegistry(60_000);
    // Published by the revoking instance before the database recorded it (no epoch yet).
    events.apply({ type: 'user-sessions-ended', userId: 'u', reason: 'revoked_by_admin', revokedAt: new Date(REVOKED_AT).toISOString() });
    expect(events.epochOf('u')).toBe(0);
    expect(events.refuses(accessToken('u', at('12:00:00.000'), 0))).toBe(true);
    // A later instant wins; an earlier one (a record written late) does not move it back.
    events.apply({ type: 'user-sessions-ended', userId: 'u', reason: 'user_disabled', sessionEpoch: 4, revokedAt: at('12:00:05.000') });
    events.apply({ type: 'user-sessions-ended', userId: 'u', reason: 'revoked_by_admin', sessionEpoch: 3, revokedAt: at('11:00:00.000') });
    expect(events.epochOf('u')).toBe(4);
    expect(events.refuses(accessToken('u', at('12:00:04.000'), 4))).toBe(true);
    expect(events.refuses(accessToken('u', at('12:00:06.000'), 4))).toBe(false);

    // An event of an older instance: the epoch only, no time rule.
    const old = new RevocationRegistry(60_000);
    old.apply({ type: 'user-sessions-ended', userId: 'u', reason: 'revoked_by_admin', sessionEpoch: 1 });
    expect(old.refuses(accessToken('u', at('11:00:00.000'), 1))).toBe(false);
    expect(old.refuses(accessToken('u', at('11:00:00.000'), 0))).toBe(true);
  });

  it("#28: the gateway's own tokens are left to the epoch: a login right after the revoke on an instance whose clock is behind is not refused", () => {
    const registry = new RevocationRegistry(60_000);
    registry.raiseEpoch('u', 2, REVOKED_AT);
    // Stamped with the current epoch at issue (checked again after the write), createdAt from a clock 2 s behind.
    expect(registry.refuses({ ...record('s-fresh', 'u', 2), createdAt: at('11:59:58.600') })).toBe(false);
    expect(registry.refuses({ ...record('s-old', 'u', 1), createdAt: at('11:59:58.600') })).toBe(true);
  });

  it('#28: an access token whose issue time cannot be read is refused once its user has a revocation instant', () => {
    const registry = new RevocationRegistry(60_000);
    const unreadable = (userId: string): TokenRecord => ({ ...accessToken(userId, at('12:00:01.000'), 1), createdAt: 'not a date' });
    expect(registry.refuses(unreadable('u'))).toBe(false);
    registry.raiseEpoch('u', 1, REVOKED_AT);
    expect(registry.refuses(unreadable('u'))).toBe(true);
  });

  it('#28: iam.oidc.revocation-margin refuses tokens issued up to the margin after the instant (a provider clock running ahead)', () => {
    const registry = new RevocationRegistry(60_000, 2_000);
    registry.raiseEpoch('u', 1, REVOKED_AT);
    // A provider 1.5 s ahead stamps a token issued at 11:59:59.9 (before the revoke) with iat 12:00:01.
    expect(registry.refuses(accessToken('u', at('12:00:01.000'), 1))).toBe(true);
    expect(registry.refuses(accessToken('u', at('12:00:02.000'), 1))).toBe(true);
    expect(registry.refuses(accessToken('u', at('12:00:03.000'), 1))).toBe(false);
  });
});
