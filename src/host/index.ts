/**
 * `iam-gateway/host`: what a Node host behind the gateway uses to ask the gateway for decisions
 * (docs/host-integration.md). It knows nothing of the gateway's internals: it verifies the `X-IAM-Assertion` the
 * gateway sent with the request (its JWKS, with jose), and calls `POST /iam/authorization/check` and `/plan` with
 * that assertion as the bearer — the host needs no secret of its own.
 */
export { createHostAuthorization, HostAuthorizationError } from './host-authorization';
export type { AccessMode, HostAuthorization, HostAuthorizationOptions, HostCheck, HostCheckResult, HostPlan, HostPrincipal, HostRequest, RequestAuthorization } from './host-authorization';
export { expressMiddleware, koaMiddleware } from './middleware';
