/**
 * The step codes of an authorization decision (docs/http-contract.md): the vocabulary decisions, problem bodies
 * and the OpenAPI document share.
 */
/** Steps that passed, in evaluation order (the one list: the OpenAPI document's enums come from it). */
export const PASSED_STEP_CODES = ['AUTHENTICATED', 'PROFILE_ACTIVE', 'PERMISSION_GRANTED', 'RESOURCE_RESOLVED', 'SCOPE_GRANTED'] as const;
export type PassedStepCode = (typeof PASSED_STEP_CODES)[number];

/**
 * The step that stopped an evaluation (docs/http-contract.md); `UNAUTHENTICATED` only on the proxy path,
 * `RESOLUTION_BUDGET_EXCEEDED` only off it (a caller's own check or diagnostics over its resolution budget).
 */
export const FAILED_STEP_CODES = [
  'UNAUTHENTICATED',
  'NO_ACTIVE_PROFILE',
  'DOMAIN_MISMATCH',
  'CLIENT_TYPE_MISMATCH',
  'PERMISSION_DENIED',
  'RESOURCE_NOT_FOUND',
  'RESOURCE_RESOLUTION_UNAVAILABLE',
  'SCOPE_DENIED',
  'ROUTE_NOT_DECLARED',
  'RESOLUTION_BUDGET_EXCEEDED',
] as const;
export type FailedStepCode = (typeof FAILED_STEP_CODES)[number];
