/** #11.28/#11.29: the in-memory copy of the durable revocation record (src/sessions/revocation-registry.ts). */
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
