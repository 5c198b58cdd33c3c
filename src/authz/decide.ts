/**
 * The decision engine's two calls for Node hosts embedding the package (src/index.ts, docs/policy-format.md):
 * `decide()` returns the decision; `require()` throws the problem of a denial.
 */
import type { AuthorizationDecision } from './decision';
import { problemFromDecision, type DecideInput, type DecisionEngine } from './decision-engine';

/** `AuthorizationEngine.decide()`: the decision, allowed or not. */
export function decide(engine: Pick<DecisionEngine, 'decide'>, input: DecideInput): Promise<AuthorizationDecision> {
  return engine.decide(input);
}

/**
 * `AuthorizationEngine.require()`: resolves with the decision when allowed, otherwise
 * rejects with its `ProblemError` (403 IAM_ACCESS_DENIED, 404, 500 or 502, with `decisionId` and `step`).
 * Exported as `require`; a top-level function cannot carry that name in a CommonJS module.
 */
async function requireAllowed(engine: Pick<DecisionEngine, 'decide'>, input: DecideInput): Promise<AuthorizationDecision> {
  const decision = await engine.decide(input);
  if (!decision.allowed) throw problemFromDecision(decision);
  return decision;
}
export { requireAllowed as require };
