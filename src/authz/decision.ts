/**
 * The authorization decision every enforcement point shares (docs/http-contract.md
 * AuthorizationDecision). The proxy, forward-auth, diagnostics and `policy test` all read this one
 * object: diagnostics is a view of it, never a second evaluator.
 */
import type { ProblemCode } from '../domain/problem';

import type { FailedStepCode, PassedStepCode } from '../domain/decision-steps';

export { FAILED_STEP_CODES, PASSED_STEP_CODES, type FailedStepCode, type PassedStepCode } from '../domain/decision-steps';

export interface DecisionStep {
  code: PassedStepCode | FailedStepCode;
  passed: boolean;
  /** A short human sentence naming the permission, profile and scope involved. */
  reason: string;
  /**
   * The sentence for the caller it concerns, when `reason` says more than the caller may learn: what a resolver
   * answered (which project a task belongs to) stays in the full trace. Only in the engine's trace and the audit
   * row; {@link decisionView} picks one of the two and never shows this field.
   */
  callerReason?: string;
}

/** The matched policy route as a decision shows it (file:line, so a denial points at its rule). */
export interface DecisionRoute {
  id: string;
  pattern: string;
  file: string;
  line: number;
  mode: 'enforce' | 'shadow';
  public: boolean;
  /** The route's list filter (policy `filter`): what of the host's answer a caller whose plan is not `ALL` sees. */
  filter?: { type: string; id: string; items: string; access: 'READ' | 'WRITE' };
}

/** The resource a decision was about, with the scope refs it resolved to (when resolution ran). */
export interface DecisionResource {
  type: string;
  id: string;
  access: 'READ' | 'WRITE';
  scopeRefs?: Array<{ type: string; id: string }>;
}

export interface AuthorizationDecision {
  /** `crypto.randomUUID()`: the 403 body and the audit trail carry it (docs/http-contract.md). */
  decisionId: string;
  allowed: boolean;
  permissionCode: string | null;
  profileId: string | null;
  userId: string | null;
  /** The client type of the session decided for (`WEB`, `API`…); null without a session. */
  clientType?: string | null;
  route?: DecisionRoute | null;
  resource?: DecisionResource | null;
  /** Ordered; evaluation stops at the first failed step. */
  steps: DecisionStep[];
  /** What enforcement answers: 200 when allowed; else 401/403/404/429/500/502 and the problem code. */
  status: number;
  /**
   * IAM_UNAUTHENTICATED | IAM_ACCESS_DENIED | IAM_RESOURCE_NOT_FOUND | IAM_RESOURCE_RESOLUTION_UNAVAILABLE |
   * IAM_UPSTREAM_UNAVAILABLE (resolver down or failing) | IAM_RATE_LIMITED (a caller's resolution budget spent); null
   * when allowed without a shadowed denial.
   */
  problemCode: ProblemCode | null;
  failedStep: FailedStepCode | null;
  /** True when the route is in shadow mode and the decision would deny: enforcement lets it through. */
  shadowed: boolean;
  /** ISO 8601 UTC. */
  evaluatedAt: string;
}

/**
 * Who a decision is shown to: `caller` — the user it concerns (the 403 body, their own decision lookup, their
 * own diagnostics); `full` — an auditor or a diagnostics administrator. The caller learns what they asked and what
 * their own profile holds, never what a resolver answered about the resource (its parent scope refs): that would
 * let anyone map resources to projects by asking. One trace, two views, no second evaluator.
 */
export type DecisionAudience = 'caller' | 'full';

/** The caller's sentence for the steps that name a resolver's answer, for decisions recorded without one. */
const RESOLVED_STEPS: Partial<Record<DecisionStep['code'], (decision: AuthorizationDecision) => string>> = {
  RESOURCE_RESOLVED: ({ resource }) => `${resource?.type} ${resource?.id} resolved`,
  SCOPE_DENIED: ({ resource, profileId }) => `profile ${profileId} has no scope covering ${resource?.type} ${resource?.id} for ${resource?.access}`,
};

/** The decision as `audience` may see it (a copy; the trace itself is unchanged). */
export function decisionView(decision: AuthorizationDecision, audience: DecisionAudience): AuthorizationDecision {
  const resolvedElsewhere = decision.resource?.scopeRefs?.some((ref) => ref.type !== decision.resource!.type || ref.id !== decision.resource!.id) ?? false;
  const steps = decision.steps.map(({ callerReason, ...step }) => {
    if (audience === 'full') return step;
    return { ...step, reason: callerReason ?? (resolvedElsewhere ? RESOLVED_STEPS[step.code]?.(decision) : undefined) ?? step.reason };
  });
  if (audience === 'full' || !decision.resource?.scopeRefs) return { ...decision, steps };
  const { scopeRefs: _resolved, ...resource } = decision.resource;
  return { ...decision, resource, steps };
}
