/**
 * The resolution budget of a caller's own questions (src/authz/resolution-budget.ts): per call, each resource once
 * and at most `perCall` distinct ones; per caller, at most `inFlightPerCaller` waiting over all their calls; beyond
 * either `refused` at once, without asking the resolver, and counted by reason. The engine turns a refusal into
 * 429 RESOLUTION_BUDGET_EXCEEDED.
 */
import { compileGrant, type CompiledGrant } from '../../src/authz/ability-compiler';
import { DecisionEngine, type DecisionSubject } from '../../src/authz/decision-engine';
import { ResolutionBudget, type RefusalReason } from '../../src/authz/resolution-budget';
import type { ResolveResult } from '../../src/authz/resource-resolver';
import type { ResourceResolverConfig } from '../../src/policy/compiled-policy';

const CONFIG: ResourceResolverConfig = { url: 'http://resolver.test/tasks/{id}', timeoutMs: 1000 };

/** A resolver whose answers wait until the test settles them; it records what it was asked. */
class HeldResolver {
  readonly asked: string[] = [];
  private readonly pending: Array<{ settle: (result: ResolveResult) => void; fail: (error: Error) => void }> = [];
  resolve(_config: ResourceResolverConfig, type: string, id: string): Promise<ResolveResult> {
    this.asked.push(`${type} ${id}`);
    return new Promise((settle, fail) => this.pending.push({ settle, fail }));
  }
  answerAll(): void {
    for (const { settle } of this.pending.splice(0)) settle({ kind: 'found', scopeRefs: [{ type: 'PROJECT', id: '1' }] });
  }
  failAll(): void {
    for (const { fail } of this.pending.splice(0)) fail(new Error('socket hang up'));
  }
}

function budgetOf(limits: { perCall: number; inFlightPerCaller: number }): { resolver: HeldResolver; budget: ResolutionBudget; refused: RefusalReason[] } {
  const resolver = new HeldResolver();
  const refused: RefusalReason[] = [];
  return { resolver, budget: new ResolutionBudget(resolver, limits, (reason) => refused.push(reason)), refused };
}

const kinds = (answers: Array<Promise<ResolveResult>>): Promise<string[]> => Promise.all(answers).then((results) => results.map((result) => result.kind));

describe('ResolutionBudget', () => {
  it('resolves a resource once per call, and bounds a call by the distinct resources it names (repeats are free)', async () => {
    const { resolver, budget, refused } = budgetOf({ perCall: 3, inFlightPerCaller: 100 });
    const call = budget.forCall('u-bob');
    const answers = ['1', '2', '1', '3', '2', '4', '5', '4'].map((id) => call.resolve(CONFIG, 'TASK', id));
    expect(resolver.asked).toEqual(['TASK 1', 'TASK 2', 'TASK 3']);
    expect(refused).toEqual(['per_call', 'per_call']);
    resolver.answerAll();
    expect(await kinds(answers)).toEqual(['found', 'found', 'found', 'found', 'found', 'refused', 'refused', 'refused']);
  });

  it('bounds the resolutions one caller has waiting over all their calls; other callers keep their own', async () => {
    const { resolver, budget, refused } = budgetOf({ perCall: 10, inFlightPerCaller: 4 });
    const first = budget.forCall('u-bob');
    const second = budget.forCall('u-bob');
    const waiting = ['1', '2', '3'].map((id) => first.resolve(CONFIG, 'TASK', id));
    const overflow = ['4', '5', '6'].map((id) => second.resolve(CONFIG, 'TASK', id));
    const someoneElse = ['1', '2', '3', '4'].map((id) => budget.forCall('u-alice').resolve(CONFIG, 'TASK', id));
    expect(budget.inFlightOf('u-bob')).toBe(4);
    expect(refused).toEqual(['per_caller', 'per_caller']);
    expect(resolver.asked).toEqual(['TASK 1', 'TASK 2', 'TASK 3', 'TASK 4', 'TASK 1', 'TASK 2', 'TASK 3', 'TASK 4']);
    // A refusal is answered at once: it never waits for the resolutions that spent the budget.
    expect(await kinds(overflow.slice(1))).toEqual(['refused', 'refused']);
    resolver.answerAll();
    expect(await kinds([...waiting, overflow[0]!, ...someoneElse])).toEqual(Array(8).fill('found'));
    expect([budget.inFlightOf('u-bob'), budget.inFlightOf('u-alice')]).toEqual([0, 0]);
  });

  it('gives the budget back when a resolution fails as when it answers', async () => {
    const { resolver, budget } = budgetOf({ perCall: 10, inFlightPerCaller: 2 });
    const failing = ['1', '2'].map((id) => budget.forCall('u-bob').resolve(CONFIG, 'TASK', id));
    resolver.failAll();
    await Promise.allSettled(failing);
    expect(budget.inFlightOf('u-bob')).toBe(0);
    const again = ['3', '4'].map((id) => budget.forCall('u-bob').resolve(CONFIG, 'TASK', id));
    resolver.answerAll();
    expect(await kinds(again)).toEqual(['found', 'found']);
  });
});

describe('a decision over the budget', () => {
  it('fails its resource step RESOLUTION_BUDGET_EXCEEDED with 429 IAM_RATE_LIMITED, the resolver never asked', async () => {
    const grant: CompiledGrant = compileGrant({
      userId: 'u-bob',
      authorizationVersion: 1,
      profile: { profileId: 'p-reader', userId: 'u-bob', profileName: 'reader', templateVersionId: 't-reader', clientTypes: ['WEB'], enabled: true, revoked: false, unscoped: true, scopes: [], version: 1 },
      template: { versionId: 't-reader', name: 'reader', description: null, permissions: ['task:read'] },
    });
    const { resolver, budget } = budgetOf({ perCall: 1, inFlightPerCaller: 10 });
    const engine = new DecisionEngine({ grants: { getGrant: async () => grant, peek: () => grant }, resolvers: resolver }).perCall(budget.forCall('u-bob'));
    const subject: DecisionSubject = {
      principal: { userId: 'u-bob', identityId: 'id-bob', identityDomain: 'example.com', activeProfileId: 'p-reader', authorizationVersion: 1 },
      clientType: 'WEB',
    };
    const resources = { TASK: { resolver: CONFIG } };
    const decide = (id: string) => engine.decide({ subject, permissionCode: 'task:read', resource: { type: 'TASK', id, access: 'READ', resolve: 'optional' }, resources });
    const first = decide('1');
    const second = await decide('2');
    expect(second).toMatchObject({ allowed: false, status: 429, problemCode: 'IAM_RATE_LIMITED', failedStep: 'RESOLUTION_BUDGET_EXCEEDED' });
    resolver.answerAll();
    expect((await first).allowed).toBe(true);
    expect(resolver.asked).toEqual(['TASK 1']);
  });
});
