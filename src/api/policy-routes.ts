import type Router from '@koa/router';
import type { Static } from '@sinclair/typebox';
import type { Middleware } from 'koa';
import type { DecisionEngine } from '../authz/decision-engine';
import { problems } from '../domain/problem';
import type { CompiledPolicy, CompiledRoute } from '../policy/compiled-policy';
import type { PolicyHolder } from '../policy/policy-holder';
import type { CandidatePolicyHolder } from '../policy/candidate-holder';
import type { CandidateDecisions } from '../gateway/candidate-decisions';
import { OpenApiError, computeCoverage, parseOpenApiOperations } from '../policy-tools/policy-coverage';
import { ADMIN_PERMISSIONS, adminOperation } from './admin-routes';
import { BODY_FAILURES, NO_STORE, response } from './openapi-builders';
import { registerDeclaredRoutes, route, type RouteDeclaration } from './route-declaration';
import { PolicyCoverageRequest } from './schemas/requests';
import { PolicyCoverage, PolicyView, type CandidatePolicyView, type PolicyRoute } from './schemas/responses';

export const POLICY_COVERAGE_PATH = '/iam/admin/policy/coverage' as const;
/** A host's OpenAPI description can be large: the coverage check takes up to 4 MiB (other `/iam` bodies: `server.iam-body-limit`). */
export const POLICY_COVERAGE_BODY_LIMIT = 4 * 1024 * 1024;

export interface PolicyRoutesDeps {
  holder: Pick<PolicyHolder, 'current' | 'lastError'>;
  /** The candidate policy and its divergences; null when `iam.policy.candidate-dir` is not set. */
  candidate: { holder: Pick<CandidatePolicyHolder, 'current' | 'lastError' | 'dir'>; decisions: Pick<CandidateDecisions, 'divergences'> } | null;
  engine: Pick<DecisionEngine, 'decide'>;
  requireSession: Middleware;
}

type PolicyContext = Pick<PolicyRoutesDeps, 'holder' | 'candidate'>;

/**
 * `GET /iam/admin/policy` (the route table the proxy serves now, its hash and load time, the last failed reload with
 * `file:line`, and the candidate policy with its divergences per route) and `POST /iam/admin/policy/coverage` (a host
 * OpenAPI document against it), both `iam.admin.policy:read` (docs/http-contract.md), each declared once
 * (route-declaration.ts). The console's Policy page is built on them.
 */
export const policyRoutes: ReadonlyArray<RouteDeclaration<PolicyContext>> = [
  route({
    method: 'get',
    path: '/iam/admin/policy',
    access: { permission: ADMIN_PERMISSIONS.policyRead },
    response: { schema: PolicyView, description: 'The serving policy.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'getPolicy',
      summary: 'The policy the proxy serves now: routes with file:line, hash, load time, the last failed reload',
      responses: {},
    }),
    handler: ({ holder, candidate }) => (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { ...policyView(holder.current, holder.lastError), candidate: candidateView(candidate) };
    },
  }),
  route({
    method: 'post',
    path: POLICY_COVERAGE_PATH,
    access: { permission: ADMIN_PERMISSIONS.policyRead },
    body: { schema: PolicyCoverageRequest },
    response: { schema: PolicyCoverage, description: 'The coverage report.', headers: NO_STORE },
    operation: adminOperation({
      operationId: 'checkPolicyCoverage',
      summary: "Check a host OpenAPI document against the serving policy: operations no route declares, routes no operation uses",
      responses: { '400': response('ValidationFailed'), ...BODY_FAILURES },
    }),
    handler: ({ holder }, request) => (ctx) => {
      const body = request.read(ctx);
      let operations;
      try {
        operations = parseOpenApiOperations(body.document, body.basePath === undefined ? {} : { basePath: body.basePath });
      } catch (error) {
        if (error instanceof OpenApiError) throw problems.validation([{ pointer: '/document', message: error.message }], 'The OpenAPI document cannot be read.');
        throw error;
      }
      const report = computeCoverage(holder.current, operations);
      const answer: Static<typeof PolicyCoverage> = {
        operations: operations.length,
        uncovered: report.uncovered.map((operation) => ({ method: operation.method, path: operation.path })),
        unusedRoutes: report.unusedRoutes.map((route) => ({ id: route.id, methods: route.methods, pattern: route.pattern, file: route.source.file, line: route.source.line })),
      };
      ctx.set('Cache-Control', 'no-store');
      ctx.body = answer;
    },
   }),
];

/** Registers {@link policyRoutes}. */
export function registerPolicyRoutes(router: Router, deps: PolicyRoutesDeps): void {
  registerDeclaredRoutes(router, policyRoutes, { holder: deps.holder, candidate: deps.candidate }, { requireSession: deps.requireSession, engine: deps.engine });
}

function policyView(policy: CompiledPolicy, lastError: PolicyHolder['lastError']): Omit<Static<typeof PolicyView>, 'candidate'> {
  return {
    hash: policy.hash,
    loadedAt: policy.loadedAt.toISOString(),
    files: [...policy.files],
    defaultAction: policy.defaultAction,
    lastError: failureView(policy, lastError),
    routes: policy.routes.map(routeView),
  };
}

/** The last failed reload; only a failure after the serving policy was loaded is news (an older one was superseded). */
function failureView(policy: CompiledPolicy | null, lastError: PolicyHolder['lastError']): Static<typeof PolicyView>['lastError'] {
  if (lastError === null || (policy !== null && lastError.at < policy.loadedAt)) return null;
  return {
    at: lastError.at.toISOString(),
    issues: lastError.issues.map((issue) => ({ severity: issue.severity, kind: issue.kind, message: issue.message, file: issue.source?.file ?? null, line: issue.source?.line ?? null })),
  };
}

/** The candidate: where it is read from, what is loaded (null while nothing is), its last failure and its divergences. */
function candidateView(candidate: PolicyRoutesDeps['candidate']): Static<typeof CandidatePolicyView> | null {
  if (candidate === null) return null;
  const policy = candidate.holder.current;
  return {
    dir: candidate.holder.dir,
    loaded: policy === null ? null : { hash: policy.hash, loadedAt: policy.loadedAt.toISOString(), files: [...policy.files], routes: policy.routes.length },
    lastError: failureView(policy, candidate.holder.lastError),
    divergences: candidate.decisions.divergences(),
  };
}

function routeView(route: CompiledRoute): Static<typeof PolicyRoute> {
  return {
    id: route.id,
    methods: [...route.methods],
    pattern: route.pattern,
    public: route.public,
    permission: route.permission,
    resource: route.resource ? { type: route.resource.type, idParam: route.resource.idParam, access: route.resource.access, resolve: route.resource.resolve } : null,
    mode: route.mode,
    profile: route.profile ?? null,
    file: route.source.file,
    line: route.source.line,
  };
}
