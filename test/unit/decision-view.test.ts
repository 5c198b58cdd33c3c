import { decisionView, type AuthorizationDecision } from '../../src/authz/decision';

const decision = (overrides: Partial<AuthorizationDecision> = {}): AuthorizationDecision => ({
  decisionId: 'd-1',
  allowed: false,
  permissionCode: 'task:read',
  profileId: 'p-1',
  userId: 'u-1',
  resource: { type: 'TASK', id: '70', access: 'READ', scopeRefs: [{ type: 'PROJECT', id: '7' }] },
  steps: [
    { code: 'AUTHENTICATED', passed: true, reason: 'session s-1' },
    { code: 'RESOURCE_RESOLVED', passed: true, reason: 'TASK 70 resolved to PROJECT 7', callerReason: 'TASK 70 resolved' },
    { code: 'SCOPE_DENIED', passed: false, reason: 'profile p-1 has no scope covering PROJECT 7 for READ', callerReason: 'profile p-1 has no scope covering TASK 70 for READ (its scopes: PROJECT 1 (WRITE))' },
  ],
  status: 403,
  problemCode: 'IAM_ACCESS_DENIED',
  failedStep: 'SCOPE_DENIED',
  shadowed: false,
  evaluatedAt: '2026-11-28T00:00:00.000Z',
  ...overrides,
});

describe('decisionView', () => {
  it("the caller's view: the caller sentences, no resolved scope refs, no second field", () => {
    const view = decisionView(decision(), 'caller');
    expect(JSON.stringify(view)).not.toContain('PROJECT 7');
    expect(view.resource).toEqual({ type: 'TASK', id: '70', access: 'READ' });
    expect(view.steps.map((step) => step.reason)).toEqual(['session s-1', 'TASK 70 resolved', 'profile p-1 has no scope covering TASK 70 for READ (its scopes: PROJECT 1 (WRITE))']);
    expect(view.steps.every((step) => !('callerReason' in step))).toBe(true);
  });

  it('the full view: the trace as recorded, without the caller sentences', () => {
    const view = decisionView(decision(), 'full');
    expect(view.resource?.scopeRefs).toEqual([{ type: 'PROJECT', id: '7' }]);
    expect(view.steps[2]!.reason).toBe('profile p-1 has no scope covering PROJECT 7 for READ');
    expect(view.steps.every((step) => !('callerReason' in step))).toBe(true);
  });

  it('a decision recorded before caller sentences existed still hides what the resolver answered', () => {
    const old = decision();
    for (const step of old.steps) delete step.callerReason;
    const view = decisionView(old, 'caller');
    expect(JSON.stringify(view)).not.toContain('PROJECT 7');
    expect(view.steps[2]!.reason).toBe('profile p-1 has no scope covering TASK 70 for READ');
  });

  it('a resource checked as its own scope (no resolver) keeps its sentences: nothing to hide', () => {
    const own = decision({
      resource: { type: 'PROJECT', id: '2', access: 'READ', scopeRefs: [{ type: 'PROJECT', id: '2' }] },
      steps: [{ code: 'RESOURCE_RESOLVED', passed: true, reason: 'PROJECT has no resolver: PROJECT 2 is checked as its own scope' }],
    });
    expect(decisionView(own, 'caller').steps[0]!.reason).toBe('PROJECT has no resolver: PROJECT 2 is checked as its own scope');
    // The leaf's own ref is what the caller asked about; the view drops the field all the same.
    expect(decisionView(own, 'caller').resource).toEqual({ type: 'PROJECT', id: '2', access: 'READ' });
  });
});
