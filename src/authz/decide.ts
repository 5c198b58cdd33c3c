/**
 * The authorization core (docs/policy-format.md): what the rest of the gateway — and Node hosts embedding the
 * package — may use. `decide()` returns the decision; `require()` throws the problem of a denial.
 */
import type { AuthorizationDecision } from './decision';
import { problemFromDecision, type DecideInput, type DecisionEngine } from './decision-engine';

export type { AuthorizationDecision, DecisionStep, DecisionRoute, DecisionResource, PassedStepCode, FailedStepCode } from './decision';
export { isValidPermissionCode, parsePermissionCode, type ParsedPermissionCode } from '../domain/permission-code';
export { compileGrant, type CompiledGrant, type ScopeSubject } from './ability-compiler';
export { GrantCache } from './grant-cache';
export { GrantProvider, type GrantProviderOptions } from './grant-provider';
export { ResourceResolverClient, decodeResourceId, type ResolveResult, type ScopeRef } from './resource-resolver';
export {
  DecisionEngine,
  problemFromDecision,
  type DecideInput,
  type DecideRequestInput,
  type DecisionEngineDeps,
  type DecisionResourceInput,
  type DecisionSubject,
} from './decision-engine';

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
