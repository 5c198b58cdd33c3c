/**
 * `decideEach` (src/authz/decision-engine.ts), how `POST /iam/authorization/check` decides its checks: the decisions in
 * the checks' order, without a promise when none had to wait, all awaited when one did, and a decision that throws
 * rejecting the whole as a rejected promise among the others did (the checks after it still decided). And the
 * AUTHENTICATED sentence, built once for a user deciding again, is always the one of the principal decided for.
 */
import type { AuthorizationDecision } from '../../src/authz/decision';
import { DecisionEngine, decideEach, type DecisionSubject, type MaybeDecision } from '../../src/authz/decision-engine';

function decision(decisionId: string): AuthorizationDecision {
  return { decisionId, allowed: true, permissionCode: 'p:read', profileId: 'p-1', userId: 'u-1', steps: [], status: 200, problemCode: null, failedStep: null, shadowed: false, evaluatedAt: '2026-11-28T00:00:00.000Z' };
}

describe('decideEach', () => {
  it('answers in order without a promise when every decision is made at once', () => {
    const decided = decideEach(['a', 'b', 'c'], (id) => decision(id));
    expect(decided).not.toBeInstanceOf(Promise);
    expect((decided as AuthorizationDecision[]).map((one) => one.decisionId)).toEqual(['a', 'b', 'c']);
  });

  it('awaits all of them, in order, when one has to wait', async () => {
    const decided = decideEach(['a', 'b', 'c'], (id): MaybeDecision => (id === 'b' ? new Promise((resolve) => setTimeout(() => resolve(decision(id)), 5)) : decision(id)));
    expect(decided).toBeInstanceOf(Promise);
    expect((await decided).map((one) => one.decisionId)).toEqual(['a', 'b', 'c']);
  });

  it('rejects with the error of a decision that throws, after deciding the others', async () => {
    const asked: string[] = [];
    const decided = decideEach(['a', 'b', 'c'], (id) => {
      asked.push(id);
      if (id === 'b') throw new Error('b failed');
      return decision(id);
    });
    expect(asked).toEqual(['a', 'b', 'c']);
    await expect(decided).rejects.toThrow('b failed');
  });
});

describe('the AUTHENTICATED step of consecutive decisions', () => {
  it('names each principal decided for, one field apart from the previous one', () => {
    const engine = new DecisionEngine({ grants: { getGrant: () => Promise.resolve(null), peek: () => null }, resolvers: { resolve: () => Promise.reject(new Error('no resolver')) } });
    const subject = (userId: string, identityId: string, identityDomain: string): DecisionSubject => ({
      principal: { userId, identityId, identityDomain, activeProfileId: null, authorizationVersion: 0 } as DecisionSubject['principal'],
      clientType: 'WEB',
    });
    const sentences = [
      subject('u-1', 'alice', 'example.com'),
      subject('u-1', 'alice', 'example.com'),
      subject('u-1', 'alice', 'example.org'),
      subject('u-1', 'alice2', 'example.org'),
      subject('u-2', 'alice2', 'example.org'),
    ].map((one) => (engine.decideFast({ subject: one, permissionCode: 'p:read', resource: null, resources: {} }) as AuthorizationDecision).steps[0]!.reason);
    expect(sentences).toEqual([
      'user u-1 is authenticated as alice (example.com)',
      'user u-1 is authenticated as alice (example.com)',
      'user u-1 is authenticated as alice (example.org)',
      'user u-1 is authenticated as alice2 (example.org)',
      'user u-2 is authenticated as alice2 (example.org)',
    ]);
  });
});
