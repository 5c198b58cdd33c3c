/**
 * The one limit on audit events of unauthenticated requests (src/audit/audit-limits.ts, docs/threat-model.md round 3):
 * a budget per kind (action, failed step, authenticator) and minute on an injected clock, one summary per kind.
 */
import { AnonymousAuditLimit } from '../../src/audit/audit-limits';
import type { AuditEventRecord } from '../../src/domain/records';

const T0 = 1_800_000_000_000;

function event(action: string, details: Record<string, unknown> | null): AuditEventRecord {
  return { occurredAt: new Date(T0), action, actorUserId: null, targetType: 'route', targetId: null, outcome: 'denied', decisionId: null, clientAddress: null, requestId: null, details };
}

const probe = event('authz.deny', { decision: { failedStep: 'ROUTE_NOT_DECLARED' } });
const shadow = event('authz.shadow_deny', { decision: { failedStep: 'UNAUTHENTICATED' } });
const callback = { ...event('auth.login.failed', { reason: 'IAM_OIDC_STATE_INVALID', authenticator: 'oidc' }), outcome: 'failure' as const, targetType: 'user' };

describe('AnonymousAuditLimit', () => {
  it('admits the budget of each kind per minute: a flood of one kind leaves the others their own budget', () => {
    const limit = new AnonymousAuditLimit(3);
    const admitted = (sample: AuditEventRecord, n: number, now = T0): number => Array.from({ length: n }, () => limit.admit(sample, now)).filter(Boolean).length;
    expect(admitted(probe, 100)).toBe(3);
    expect(admitted(shadow, 100)).toBe(3);
    expect(admitted(callback, 100)).toBe(3);
    // Another failed step of the same action is another kind.
    expect(admitted(event('authz.shadow_deny', { decision: { failedStep: 'PERMISSION_DENIED' } }), 5)).toBe(3);
    // A new minute, a new budget.
    expect(admitted(probe, 5, T0 + 60_000)).toBe(3);
  });

  it('summarises each kind once its minute is over (or when forced), with its step or authenticator and the count', () => {
    const limit = new AnonymousAuditLimit(2);
    for (let i = 0; i < 10; i++) limit.admit(shadow, T0);
    for (let i = 0; i < 5; i++) limit.admit(callback, T0 + 1_000);
    expect(limit.takeSummaries(T0 + 59_999)).toEqual([]);
    const summaries = limit.takeSummaries(T0 + 61_000);
    expect(summaries.map((summary) => [summary.action, summary.outcome, summary.details])).toEqual([
      ['authz.shadow_deny.suppressed', 'denied', { failedStep: 'UNAUTHENTICATED', suppressed: 8, since: new Date(T0).toISOString(), perMinute: 2 }],
      ['auth.login.failed.suppressed', 'failure', { authenticator: 'oidc', suppressed: 3, since: new Date(T0 + 1_000).toISOString(), perMinute: 2 }],
    ]);
    expect(limit.takeSummaries(T0 + 200_000)).toEqual([]);
    for (let i = 0; i < 3; i++) limit.admit(probe, T0 + 200_000);
    expect(limit.takeSummaries(T0 + 200_001, true).map((summary) => [summary.action, summary.details?.suppressed])).toEqual([['authz.deny.suppressed', 1]]);
  });
});
