/**
 * The package's public API for Node programs: run the gateway in-process, or use its decision engine
 * inside a Node host (`decide()` returns the decision, `require()` throws the problem of a denial).
 */
export { startGateway, type Gateway, type StartOptions } from './app/public-gateway';
export { loadConfig, ConfigError, type GatewayConfig } from './config';
export { openAuthorizationEngine, type EmbeddedAuthorizationEngine } from './app/embedded-engine';
export { decide, require } from './authz/decide';
export { DecisionEngine, problemFromDecision, type DecideInput, type DecideRequestInput } from './authz/decision-engine';
export type { AuthorizationDecision, DecisionStep } from './authz/decision';
export { isValidPermissionCode } from './domain/permission-code';
export { loadPolicyDirectory, compilePolicyFiles } from './policy/load-policy-directory';
export type { CompiledPolicy, CompiledRoute, PolicyIssue } from './policy/compiled-policy';
export { ProblemError, PROBLEM_CATALOG, type ProblemCode, type ProblemBody } from './domain/problem';
export type { IamPrincipal } from './domain/principal';
export type { LoginRequest, AuthenticatedIdentity } from './auth/authenticator';
export type { IdentityAuthenticator } from './auth/authenticators';
