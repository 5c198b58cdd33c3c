/**
 * The package's public API for Node programs: run the gateway in-process, or use its decision engine
 * inside a Node host (`decide()` returns the decision, `require()` throws the problem of a denial).
 */
export { startGateway, type RunningGateway, type GatewayServices, type StartOptions } from './server/gateway';
export { loadConfig, ConfigError, type GatewayConfig } from './config';
export { openAuthorizationEngine, type EmbeddedAuthorizationEngine } from './authz/embedded-engine';
export {
  decide,
  require,
  DecisionEngine,
  problemFromDecision,
  isValidPermissionCode,
  type AuthorizationDecision,
  type DecisionStep,
  type DecideInput,
  type DecideRequestInput,
} from './authz';
export { loadPolicyDirectory, compilePolicyFiles } from './policy';
export type { CompiledPolicy, CompiledRoute, PolicyIssue } from './policy/compiled-policy';
export { ProblemError, PROBLEM_CATALOG, type ProblemCode, type ProblemBody } from './problem';
export type { IamPrincipal } from './auth/principal';
export type { IdentityAuthenticator, LoginRequest, AuthenticatedIdentity } from './auth/authenticator';
