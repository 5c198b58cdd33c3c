/**
 * THE decision engine (docs/http-contract.md, docs/policy-format.md): the proxy,
 * forward-auth, diagnostics and `policy test` all call it, and every explanation is a view of the
 * decision it returns. Steps run in a fixed order and stop at the first failure; the permission step runs
 * before any resolver call, so a caller without the permission cannot probe which resources exist.
 * Hot path: with a cached grant and no resolver, one route match, one or two CASL checks, a few small objects.
 */
import { withSpan } from '../observability/tracing';
import { codeOfRule } from './grant-ability';
import { randomUUID } from 'node:crypto';
import type { IamPrincipal } from '../domain/principal';
import type { CompiledPolicy, CompiledRoute, RouteMatch } from '../policy/compiled-policy';
import { ProblemError, problems, type ProblemCode } from '../domain/problem';
import type { CompiledGrant } from './ability-compiler';
import type { AuthorizationDecision, DecisionRoute, FailedStepCode, PassedStepCode } from './decision';
import { parsePermissionCode } from '../domain/permission-code';
import type { ResolveResult, ResourceResolverClient, ScopeRef } from './resource-resolver';
import { decodeResourceId } from './resource-url';
import type { ResourceResolverConfig } from '../policy/compiled-policy';

/** Who is asking: the session's principal and the client type it logged in with. */
export interface DecisionSubject {
  principal: IamPrincipal;
  clientType: string;
}

/** The resource a permission is checked on; `id` as it appears in the normalized path. */
export interface DecisionResourceInput {
  type: string;
  id: string;
  access: 'READ' | 'WRITE';
  resolve: 'optional' | 'required';
}

/** Input of {@link DecisionEngine.decide}: `AuthorizationEngine.decide()`. */
export interface DecideInput {
  subject: DecisionSubject;
  permissionCode: string;
  resource: DecisionResourceInput | null;
  /** Diagnostics `domain`: the principal's identity domain must equal it. */
  expectedDomain?: string;
  /** Diagnostics `clientType`: checked against the profile instead of the session's own. */
  expectedClientType?: string;
  resources: CompiledPolicy['resources'];
  route?: AuthorizationDecision['route'];
  /** Resolutions already made, asked instead of the resolvers (see {@link RecordedResolutions}). */
  recorded?: RecordedResolutions;
}

/**
 * What a resolver already answered for a resource (`id` decoded), for a decision that must not ask again — a
 * candidate policy deciding beside the live one. `undefined`: nobody asked; the decision then fails its resource
 * step with {@link UNKNOWN_RESOLUTION} instead of calling the resolver.
 */
export type RecordedResolutions = (type: string, id: string, resolver: ResourceResolverConfig) => ResolveResult | undefined;

/** The reason of the failed resource step when {@link RecordedResolutions} did not know the answer. */
export const UNKNOWN_RESOLUTION = 'the resolution was not recorded (no resolver is asked for this decision)';

/** Input of {@link DecisionEngine.decideRequest}: a host request as the proxy sees it. */
export interface DecideRequestInput {
  method: string;
  /** The normalized path (docs/http-contract.md). */
  path: string;
  policy: CompiledPolicy;
  /** Null when the request carries no valid session. */
  subject: DecisionSubject | null;
  /** `policy.match(method, path)` when the caller already has it (the proxy does), to match only once. */
  match?: RouteMatch | null;
  /** Resolutions already made, asked instead of the resolvers (see {@link RecordedResolutions}). */
  recorded?: RecordedResolutions;
}

/** A decision now, or later when a grant must be loaded or a resolver asked. */
export type MaybeDecision = AuthorizationDecision | Promise<AuthorizationDecision>;

/** Input of {@link DecisionEngine.plan}: which resources of a type may the subject reach with a permission? */
export interface PlanInput {
  subject: DecisionSubject;
  permissionCode: string;
  resourceType: string;
  access: 'READ' | 'WRITE';
}

/**
 * The answer of {@link DecisionEngine.plan}, for filtering a list in the host's own query: `ALL` resources of the
 * type, `NONE`, or `SOME` — those whose id is one of `ids` (the covering scopes' `scopeRefId`s, sorted).
 */
export type ResourcePlan = { kind: 'ALL' } | { kind: 'NONE' } | { kind: 'SOME'; ids: string[] };

/** A plan with the decision of its permission (the steps up to PERMISSION_GRANTED, or the one that failed). */
export interface PlannedResources {
  decision: AuthorizationDecision;
  plan: ResourcePlan;
}

export interface DecisionEngineDeps {
  grants: {
    getGrant(principal: IamPrincipal): Promise<CompiledGrant | null>;
    /** A cached grant without a promise, or undefined when only getGrant can tell. */
    peek?(principal: IamPrincipal): CompiledGrant | null | undefined;
  };
  resolvers: Pick<ResourceResolverClient, 'resolve'>;
}

type DecisionFailure = { status: number; problemCode: ProblemCode };
const ACCESS_DENIED: DecisionFailure = { status: 403, problemCode: 'IAM_ACCESS_DENIED' };
const UNAUTHENTICATED: DecisionFailure = { status: 401, problemCode: 'IAM_UNAUTHENTICATED' };
const NOT_FOUND: DecisionFailure = { status: 404, problemCode: 'IAM_RESOURCE_NOT_FOUND' };
const NO_RESOLVER: DecisionFailure = { status: 500, problemCode: 'IAM_RESOURCE_RESOLUTION_UNAVAILABLE' };
const RESOLVER_DOWN: DecisionFailure = { status: 502, problemCode: 'IAM_UPSTREAM_UNAVAILABLE' };
const OVER_BUDGET: DecisionFailure = { status: 429, problemCode: 'IAM_RATE_LIMITED' };

/** `toISOString()` costs ~0.4 µs; under load many decisions share a millisecond, so reuse its string. */
let isoMs = 0;
let isoText = '';
function nowIso(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoMs = ms;
    isoText = new Date(ms).toISOString();
  }
  return isoText;
}

function newDecision(
  subject: DecisionSubject | null,
  permissionCode: string | null,
  route: AuthorizationDecision['route'],
): AuthorizationDecision {
  return {
    decisionId: randomUUID(),
    allowed: true,
    permissionCode,
    profileId: subject?.principal.activeProfileId ?? null,
    userId: subject?.principal.userId ?? null,
    clientType: subject?.clientType ?? null,
    route,
    steps: [],
    status: 200,
    problemCode: null,
    failedStep: null,
    shadowed: false,
    evaluatedAt: nowIso(),
  };
}

function pass(decision: AuthorizationDecision, code: PassedStepCode, reason: string, callerReason?: string): void {
  decision.steps.push(callerReason === undefined ? { code, passed: true, reason } : { code, passed: true, reason, callerReason });
}

function fail(decision: AuthorizationDecision, code: FailedStepCode, reason: string, failure: DecisionFailure, callerReason?: string): AuthorizationDecision {
  decision.steps.push(callerReason === undefined ? { code, passed: false, reason } : { code, passed: false, reason, callerReason });
  decision.allowed = false;
  decision.failedStep = code;
  decision.status = failure.status;
  decision.problemCode = failure.problemCode;
  return decision;
}

function describeRefs(refs: ScopeRef[]): string {
  return refs.map((ref) => `${ref.type} ${ref.id}`).join(', ');
}

const MAX_LISTED_SCOPES = 10;

/** The profile's own scopes, for the caller's view of a scope denial (what they hold, not what the resource is in). */
function describeHeldScopes(grant: CompiledGrant): string {
  if (grant.scopes.length === 0) return 'it has no scopes';
  const listed = grant.scopes.slice(0, MAX_LISTED_SCOPES).map((scope) => `${scope.scopeType} ${scope.scopeRefId} (${scope.accessMode})`);
  const more = grant.scopes.length - listed.length;
  return `its scopes: ${listed.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

function noActiveProfile(principal: IamPrincipal): string {
  return principal.activeProfileId === null
    ? 'the session has no active profile'
    : `profile ${principal.activeProfileId} is not available (missing, disabled, revoked or not the user's)`;
}

function clientTypeMismatch(grant: CompiledGrant, clientType: string): string {
  return `profile ${grant.profileId} does not apply to client type ${clientType} (only ${grant.clientTypes.join(', ') || 'none'})`;
}

/** The last sentence built, for the same user deciding again (the checks of one call): the same text, built once. */
let authenticated = { userId: '', identityId: '', identityDomain: '', reason: '' };
function authenticatedReason(principal: IamPrincipal): string {
  const { userId, identityId, identityDomain } = principal;
  if (userId !== authenticated.userId || identityId !== authenticated.identityId || identityDomain !== authenticated.identityDomain || authenticated.reason === '') {
    authenticated = { userId, identityId, identityDomain, reason: `user ${userId} is authenticated as ${identityId} (${identityDomain})` };
  }
  return authenticated.reason;
}

/** The route as decisions show it; cached per compiled route (routes are immutable). */
const routeViews = new WeakMap<CompiledRoute, DecisionRoute>();
function routeView(route: CompiledRoute): DecisionRoute {
  let view = routeViews.get(route);
  if (!view) {
    view = { id: route.id, pattern: route.pattern, file: route.source.file, line: route.source.line, mode: route.mode, public: route.public };
    const filter = route.filter;
    if (filter !== undefined) view.filter = { type: filter.type, id: filter.id, items: filter.items, access: filter.access };
    routeViews.set(route, view);
  }
  return view;
}

export class DecisionEngine {
  private readonly grants: DecisionEngineDeps['grants'];
  private readonly resolvers: DecisionEngineDeps['resolvers'];

  constructor(deps: DecisionEngineDeps) {
    this.grants = deps.grants;
    this.resolvers = deps.resolvers;
  }

  /**
   * Decides a host request exactly as the proxy enforces it: route match, then `default` for unmatched
   * requests, public routes, authentication, and {@link decide} for routes with a permission. A denial on a
   * shadow route comes back `allowed: true, shadowed: true` with the would-be failure kept in the object.
   */
  async decideRequest(input: DecideRequestInput): Promise<AuthorizationDecision> {
    return this.decideRequestFast(input);
  }

  /**
   * {@link decideRequest} without a promise when nothing has to wait (cached grant, no resolver): the
   * proxy's warm path, where every promise costs measurable time.
   */
  decideRequestFast(input: DecideRequestInput): MaybeDecision {
    const { policy, subject } = input;
    const match = input.match !== undefined ? input.match : policy.match(input.method, input.path);
    if (match === null) return this.decideUndeclared(input);

    const route = match.route;
    const view = routeView(route);
    let decision: AuthorizationDecision;
    if (route.public) {
      decision = newDecision(subject, route.permission, view);
    } else if (subject === null) {
      decision = fail(newDecision(null, route.permission, view), 'UNAUTHENTICATED', 'the route needs a valid session and none was presented', UNAUTHENTICATED);
    } else if (route.permission === null) {
      decision = newDecision(subject, null, view);
      pass(decision, 'AUTHENTICATED', authenticatedReason(subject.principal));
      const pending = this.checkSessionProfile(subject, decision, route.profile === 'optional');
      if (pending instanceof Promise) return pending.then((later) => applyMode(route, later));
      decision = pending;
    } else {
      const declared = route.resource;
      const id = declared === null ? undefined : match.params[declared.idParam];
      if (declared !== null && id === undefined) {
        // The policy compiler rejects such routes; fail closed if one slips through.
        decision = newDecision(subject, route.permission, view);
        pass(decision, 'AUTHENTICATED', authenticatedReason(subject.principal));
        fail(decision, 'RESOURCE_RESOLUTION_UNAVAILABLE', `route ${route.id} has no path parameter :${declared.idParam}`, NO_RESOLVER);
      } else {
        const pending = this.decideFast({
          subject,
          permissionCode: route.permission,
          resource: declared === null ? null : { type: declared.type, id: id as string, access: declared.access, resolve: declared.resolve },
          resources: policy.resources,
          route: view,
          recorded: input.recorded,
        });
        if (pending instanceof Promise) return pending.then((later) => applyMode(route, later));
        decision = pending;
      }
    }
    return applyMode(route, decision);
  }

  /**
   * `AuthorizationEngine.decide()`: AUTHENTICATED → domain → active profile → client
   * type → PROFILE_ACTIVE → permission → resource resolution → scope, stopping at the first failure.
   * Rejects only when the grant cannot be loaded (e.g. `DatabaseUnavailableError`).
   */
  async decide(input: DecideInput): Promise<AuthorizationDecision> {
    return this.decideFast(input);
  }

  /**
   * The same engine (the same grants) asking `resolvers` instead of its own: for the decisions of one call a caller
   * makes, through their resolution budget (resolution-budget.ts `forCall`), so they never reach the proxy's resolver pool.
   */
  perCall(resolvers: DecisionEngineDeps['resolvers']): DecisionEngine {
    return new DecisionEngine({ grants: this.grants, resolvers });
  }

  /**
   * A permission on a resource that no policy route pairs with it, asked with the user's own credential: denied as
   * `ROUTE_NOT_DECLARED` without asking a resolver — otherwise anyone could learn from the resolvers which
   * resource belongs to which parent by pairing any permission with any resource type (docs/threat-model.md).
   */
  notDeclared(subject: DecisionSubject, permissionCode: string, resource: { type: string; id: string; access: 'READ' | 'WRITE' }): AuthorizationDecision {
    const decision = newDecision(subject, permissionCode, null);
    decision.resource = { type: resource.type, id: resource.id, access: resource.access };
    return fail(decision, 'ROUTE_NOT_DECLARED', `no policy route checks ${permissionCode} on a ${resource.type}: such a pair is not resolved for its own caller`, ACCESS_DENIED);
  }

  /**
   * Which resources of `resourceType` the subject reaches with `permissionCode` for `access`: the decision's steps up
   * to the permission (the same as for a route without a resource), then the profile's scopes of that type — `ALL`
   * for an unscoped profile or a `*` scope covering the access, `SOME` with the ids of the covering scopes (a WRITE
   * scope covers READ), `NONE` when the permission or the profile fails, or no scope covers. Scopes of other types
   * do not count: a resource whose scope is its parent's (a task in a project) is planned as the parent's type.
   */
  async plan(input: PlanInput): Promise<PlannedResources> {
    const maybe = this.decideFast({ subject: input.subject, permissionCode: input.permissionCode, resource: null, resources: {} });
    const decision = maybe instanceof Promise ? await maybe : maybe;
    if (!decision.allowed) return { decision, plan: { kind: 'NONE' } };
    const covered = this.coveredFast(input);
    return { decision, plan: covered instanceof Promise ? await covered : covered };
  }

  /**
   * The plan's second half, for a subject whose permission is already decided: which resources of the type its
   * active profile's scopes cover. The proxy asks it after a filtered list route allowed the request (its decision
   * checked the route's permission: deciding it again would be the same work twice), without a promise when the
   * grant is cached.
   */
  coveredFast(input: Pick<PlanInput, 'subject' | 'resourceType' | 'access'>): ResourcePlan | Promise<ResourcePlan> {
    const cached = this.grants.peek?.(input.subject.principal);
    if (cached !== undefined) return planOf(input, cached);
    return this.grants.getGrant(input.subject.principal).then((grant) => planOf(input, grant));
  }

  /** {@link decide} without a promise when the grant is cached and no resolver has to be asked. */
  decideFast(input: DecideInput): MaybeDecision {
    const { subject, permissionCode } = input;
    const principal = subject.principal;
    const decision = newDecision(subject, permissionCode, input.route ?? null);
    pass(decision, 'AUTHENTICATED', authenticatedReason(principal));

    if (input.expectedDomain !== undefined && input.expectedDomain !== principal.identityDomain) {
      return fail(decision, 'DOMAIN_MISMATCH', `identity domain ${principal.identityDomain} is not ${input.expectedDomain}`, ACCESS_DENIED);
    }

    const cached = this.grants.peek?.(principal);
    if (cached !== undefined) return this.decideWithGrant(input, decision, cached);
    return this.grants.getGrant(principal).then((grant) => this.decideWithGrant(input, decision, grant));
  }

  private decideWithGrant(input: DecideInput, decision: AuthorizationDecision, grant: CompiledGrant | null): MaybeDecision {
    const { subject, permissionCode } = input;
    const principal = subject.principal;
    if (grant === null) return fail(decision, 'NO_ACTIVE_PROFILE', noActiveProfile(principal), ACCESS_DENIED);
    const profileId = grant.profileId;
    const clientType = input.expectedClientType ?? subject.clientType;
    if (!grant.clientTypes.includes(clientType)) return fail(decision, 'CLIENT_TYPE_MISMATCH', clientTypeMismatch(grant, clientType), ACCESS_DENIED);
    pass(decision, 'PROFILE_ACTIVE', `profile ${profileId} is active for client type ${clientType}`);

    // Permission before any resolver call: no existence oracle for callers without the permission.
    const parsed = parsePermissionCode(permissionCode);
    if (parsed === null) {
      return fail(decision, 'PERMISSION_DENIED', `${permissionCode} is not a valid permission code`, ACCESS_DENIED);
    }
    // On a bare subject type CASL answers from the rules alone, ignoring their (scope) conditions.
    const permissionRule = grant.ability.relevantRuleFor(parsed.action, parsed.resource);
    if (permissionRule === null || permissionRule.inverted) {
      return fail(decision, 'PERMISSION_DENIED', `profile ${profileId} does not grant ${permissionCode}`, ACCESS_DENIED);
    }
    const via = codeOfRule(permissionRule, parsed.action);
    pass(decision, 'PERMISSION_GRANTED', via === permissionCode ? `profile ${profileId} grants ${permissionCode}` : `profile ${profileId} grants ${permissionCode} through ${via}`);

    const resource = input.resource;
    if (resource === null) return decision;
    const resourceId = decodeResourceId(resource.id);
    const shown = { type: resource.type, id: resourceId, access: resource.access } as NonNullable<AuthorizationDecision['resource']>;
    decision.resource = shown;

    const resolver = input.resources[resource.type]?.resolver ?? null;
    if (resolver !== null && input.recorded !== undefined) {
      const known = input.recorded(resource.type, resourceId, resolver);
      if (known === undefined) return fail(decision, 'RESOURCE_RESOLUTION_UNAVAILABLE', UNKNOWN_RESOLUTION, RESOLVER_DOWN);
      return this.resolved(input, decision, grant, shown, known);
    }
    if (resolver !== null) {
      // A span per resolver call when tracing is on (a no-op otherwise): it nests under the request being decided.
      return withSpan('resolve', { 'iam.resource.type': resource.type }, async (span) => {
        const result = await this.resolvers.resolve(resolver, resource.type, resource.id);
        span.setAttribute('iam.resolver.result', result.kind);
        return result;
      })
        .catch((error: unknown) => ({
          kind: 'unavailable' as const,
          reason: `resolver for ${resource.type} failed (${(error as Error)?.name ?? 'error'})`,
        }))
        .then((result) => this.resolved(input, decision, grant, shown, result));
    }
    let scopeRefs: ScopeRef[];
    if (resource.resolve === 'required') {
      return fail(
        decision,
        'RESOURCE_RESOLUTION_UNAVAILABLE',
        `${resource.type} ${resourceId} needs resolution but no resolver is configured for ${resource.type}`,
        NO_RESOLVER,
      );
    } else {
      scopeRefs = [{ type: resource.type, id: resourceId }];
      pass(decision, 'RESOURCE_RESOLVED', `${resource.type} has no resolver: ${resource.type} ${resourceId} is checked as its own scope`);
    }
    return this.checkScope(input, decision, grant, shown, scopeRefs);
  }

  /** The resource step from a resolver's answer, then the scope step. */
  private resolved(input: DecideInput, decision: AuthorizationDecision, grant: CompiledGrant, shown: NonNullable<AuthorizationDecision['resource']>, result: ResolveResult): AuthorizationDecision {
    const type = shown.type;
    if (result.kind === 'not-found') return fail(decision, 'RESOURCE_NOT_FOUND', `the resolver for ${type} knows no ${type} ${shown.id}`, NOT_FOUND);
    if (result.kind === 'unavailable') return fail(decision, 'RESOURCE_RESOLUTION_UNAVAILABLE', result.reason, RESOLVER_DOWN);
    if (result.kind === 'refused') return fail(decision, 'RESOLUTION_BUDGET_EXCEEDED', result.reason, OVER_BUDGET);
    pass(decision, 'RESOURCE_RESOLVED', `${type} ${shown.id} resolved to ${describeRefs(result.scopeRefs)}`, `${type} ${shown.id} resolved`);
    return this.checkScope(input, decision, grant, shown, result.scopeRefs);
  }

  /** The last step: does a scope of the profile cover the resource's scope refs for the access? */
  private checkScope(
    input: DecideInput,
    decision: AuthorizationDecision,
    grant: CompiledGrant,
    shown: NonNullable<AuthorizationDecision['resource']>,
    scopeRefs: ScopeRef[],
  ): AuthorizationDecision {
    const resource = input.resource!;
    const profileId = grant.profileId;
    const permissionCode = input.permissionCode;
    shown.scopeRefs = scopeRefs;

    const covering = grant.scopeIndex.covering(scopeRefs, resource.access);
    if (covering === null) {
      return fail(
        decision,
        'SCOPE_DENIED',
        `profile ${profileId} has no scope covering ${describeRefs(scopeRefs)} for ${resource.access}`,
        ACCESS_DENIED,
        `profile ${profileId} has no scope covering ${resource.type} ${shown.id} for ${resource.access} (${describeHeldScopes(grant)})`,
      );
    }
    pass(
      decision,
      'SCOPE_GRANTED',
      grant.scoped ? `${covering} of profile ${profileId} covers ${describeRefs(scopeRefs)} for ${resource.access}` : `profile ${profileId} is unscoped: ${permissionCode} applies to every resource`,
    );
    return decision;
  }

  /**
   * A session on a route that asks no permission (or an undeclared request under `default: authenticated`):
   * its active profile must still be valid for its client type, so a disabled, revoked, foreign or missing
   * profile never passes and is never named to the host. With `optional` (policy `profile: optional`) the
   * request passes either way, and only a valid profile gets its PROFILE_ACTIVE step (what the host sees).
   */
  private checkSessionProfile(subject: DecisionSubject, decision: AuthorizationDecision, optional: boolean): MaybeDecision {
    const principal = subject.principal;
    if (principal.activeProfileId === null && optional) return decision;
    const conclude = (grant: CompiledGrant | null): AuthorizationDecision => {
      if (grant === null) return optional ? decision : fail(decision, 'NO_ACTIVE_PROFILE', noActiveProfile(principal), ACCESS_DENIED);
      if (!grant.clientTypes.includes(subject.clientType)) {
        return optional ? decision : fail(decision, 'CLIENT_TYPE_MISMATCH', clientTypeMismatch(grant, subject.clientType), ACCESS_DENIED);
      }
      pass(decision, 'PROFILE_ACTIVE', `profile ${grant.profileId} is active for client type ${subject.clientType}`);
      return decision;
    };
    const cached = this.grants.peek?.(principal);
    if (cached !== undefined) return conclude(cached);
    return this.grants.getGrant(principal).then(conclude);
  }

  /** A request no route declares: the policy's `default` decides (docs/policy-format.md: deny out of the box). */
  private decideUndeclared(input: DecideRequestInput): MaybeDecision {
    const { subject } = input;
    const decision = newDecision(subject, null, null);
    // A method a declared path does not list never falls through to a rule that checks less (#11.30).
    const refusal = input.policy.refusal(input.method, input.path);
    if (refusal !== null) {
      const declared = refusal.declared;
      const by = refusal.fallback ? `the broader route ${refusal.fallback.pattern} at ${refusal.fallback.id}` : `"default: ${input.policy.defaultAction}"`;
      const reason = `${input.method} is not declared for ${declared[0].pattern} (${declared.map((route) => `${route.methods.join(',')} at ${route.id}`).join('; ')}) and ${by} checks less`;
      return fail(decision, 'ROUTE_NOT_DECLARED', reason, ACCESS_DENIED);
    }
    switch (input.policy.defaultAction) {
      case 'allow':
        return decision;
      case 'authenticated':
        if (subject === null) return fail(decision, 'UNAUTHENTICATED', 'undeclared routes need a valid session and none was presented', UNAUTHENTICATED);
        pass(decision, 'AUTHENTICATED', authenticatedReason(subject.principal));
        return this.checkSessionProfile(subject, decision, false);
      case 'deny':
      default:
        return fail(decision, 'ROUTE_NOT_DECLARED', `no policy route declares ${input.method} ${input.path} and the default is deny`, ACCESS_DENIED);
    }
  }
}

/** The scopes of `grant` that cover `input`'s type and access, as a plan (see {@link DecisionEngine.plan}). */
function planOf(input: Pick<PlanInput, 'resourceType' | 'access'>, grant: CompiledGrant | null): ResourcePlan {
  if (grant === null) return { kind: 'NONE' };
  if (!grant.scoped) return { kind: 'ALL' };
  const ids = new Set<string>();
  for (const scope of grant.scopes) {
    if (scope.scopeType !== input.resourceType || (input.access === 'WRITE' && scope.accessMode !== 'WRITE')) continue;
    if (scope.scopeRefId === '*') return { kind: 'ALL' };
    ids.add(scope.scopeRefId);
  }
  return ids.size === 0 ? { kind: 'NONE' } : { kind: 'SOME', ids: [...ids].sort() };
}

/**
 * The decisions of `items` in order, each made by `decide` (`decideFast`, `notDeclared`...): without a promise when
 * none had to wait (warm grants, no resolver), else all of them awaited. A decision that throws rejects the whole, as
 * a rejected promise among the others would (the items after it are still decided).
 */
export function decideEach<T>(items: readonly T[], decide: (item: T) => MaybeDecision): AuthorizationDecision[] | Promise<AuthorizationDecision[]> {
  const decisions: MaybeDecision[] = [];
  let waiting = false;
  for (let i = 0; i < items.length; i++) {
    let decision: MaybeDecision;
    try {
      decision = decide(items[i]!);
    } catch (error) {
      decision = Promise.reject(error as Error);
    }
    if (decision instanceof Promise) waiting = true;
    decisions.push(decision);
  }
  return waiting ? Promise.all(decisions.map((decision) => Promise.resolve(decision))) : (decisions as AuthorizationDecision[]);
}

/** Shadow routes (docs/policy-format.md): a denial is kept in the decision but the request goes through. */
function applyMode(route: CompiledRoute, decision: AuthorizationDecision): AuthorizationDecision {
  if (route.mode === 'shadow' && !decision.allowed) {
    decision.allowed = true;
    decision.shadowed = true;
  }
  return decision;
}

/** Safe `detail` for 5xx answers: the step reason may name hosts or error codes only the log should see. */
const SERVER_SIDE_DETAIL: Partial<Record<ProblemCode, string>> = {
  IAM_RESOURCE_RESOLUTION_UNAVAILABLE: 'This route needs resource resolution, but no resolver is configured for its resource type.',
  IAM_UPSTREAM_UNAVAILABLE: 'The host could not resolve the resource; try again shortly.',
};

/**
 * The problem an enforcement point answers for a decision that denies (shadowed ones included: the proxy
 * logs it instead of sending it). Carries `decisionId` and the failed step (docs/http-contract.md). `tokenSent`
 * picks the RFC 6750 §3.1 `invalid_token` challenge on a 401.
 */
export function problemFromDecision(decision: AuthorizationDecision, options: { tokenSent?: boolean } = {}): ProblemError {
  if (decision.problemCode === null || decision.failedStep === null) {
    throw new TypeError(`decision ${decision.decisionId} allows the request: there is no problem to answer`);
  }
  const failed = decision.steps[decision.steps.length - 1];
  const extensions = { decisionId: decision.decisionId, step: decision.failedStep };
  // The problem goes to the caller: their view of the failed step (decisionView), never a resolver's answer.
  const detail = SERVER_SIDE_DETAIL[decision.problemCode] ?? failed?.callerReason ?? failed?.reason ?? 'Access denied.';
  if (decision.problemCode === 'IAM_UNAUTHENTICATED') {
    const challenge = problems.unauthenticated(detail, options.tokenSent ?? false);
    return new ProblemError('IAM_UNAUTHENTICATED', detail, { extensions, headers: challenge.headers });
  }
  return new ProblemError(decision.problemCode, detail, { extensions });
}
