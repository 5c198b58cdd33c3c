/**
 * The candidate policy deciding beside the live one (`iam.policy.candidate-dir`, docs/policy-changes.md): every
 * request the live policy decided on the proxy or forward-auth is decided again by the candidate, never enforced.
 * Where the two disagree it is counted (`iam_policy_candidate_divergences_total{live, candidate}`), the request's
 * access-log line carries `candidate: {decision, step, route}`, and a bounded summary per route keeps recent examples
 * for the console's Policy page.
 *
 * The candidate makes no call of its own: it uses the grant the live decision loaded (cached) and the resolution the
 * live decision made. When it needs a grant that is not cached or a resolution the live decision did not make, its
 * decision is `unknown` — an extra database or resolver call per request would be the cost of a policy nobody enforces.
 */
import type { CompiledGrant } from '../authz/ability-compiler';
import type { AuthorizationDecision } from '../authz/decision';
import { DecisionEngine, UNKNOWN_RESOLUTION, type DecisionSubject, type RecordedResolutions } from '../authz/decision-engine';
import type { ResolveResult } from '../authz/resource-resolver';
import type { IamPrincipal } from '../domain/principal';
import type { GatewayMetrics } from '../observability/metrics';
import { scrubText } from '../observability/redaction';
import type { CandidatePolicyHolder } from '../policy/candidate-holder';
import type { CompiledPolicy, ResourceResolverConfig } from '../policy/compiled-policy';
import { sameResolution } from '../policy/resolver-answer';

/** The candidate's decision for a request: `unknown` when it could not decide without a call of its own. */
export type CandidateVerdict = 'allow' | 'deny' | 'unknown';

/** What the access-log line of a divergent request carries (docs/observability.md). */
export interface CandidateOutcome {
  decision: CandidateVerdict;
  /** The candidate's failed step (null when it allows). */
  step: string | null;
  /** The candidate's matched route pattern, or null (its `default` decided). */
  route: string | null;
}

/** A request the two policies decided differently. */
export interface CandidateDivergence {
  /** What the live policy enforced: a shadow route's would-be denial went through, so it is `allow`. */
  live: 'allow' | 'deny';
  candidate: CandidateOutcome;
}

/** One request as the live policy decided it, for {@link CandidateDecisions.compare}. */
export interface LiveDecided {
  method: string;
  /** The normalized path. */
  path: string;
  decision: AuthorizationDecision;
  /** The live policy snapshot that made the decision. */
  policy: CompiledPolicy;
  subject: DecisionSubject | null;
}

/** The divergences of one candidate route, as the console shows them. */
export interface RouteDivergences {
  /** The candidate's route (`file:line`) and pattern; both null for requests its `default` decided. */
  routeId: string | null;
  route: string | null;
  allowToDeny: number;
  denyToAllow: number;
  /** The candidate could not decide (it needed a grant or a resolution the live decision did not load). */
  unknown: number;
  lastAt: string;
  /** The most recent first, at most {@link MAX_EXAMPLES}. */
  examples: DivergenceExample[];
}

export interface DivergenceExample {
  at: string;
  method: string;
  path: string;
  userId: string | null;
  live: { decision: 'allow' | 'deny'; step: string | null; route: string | null; decisionId: string };
  candidate: CandidateOutcome;
}

/** The summary since the serving candidate was loaded (a new candidate starts a new one). */
export interface DivergenceSummary {
  /** The candidate's hash the summary is about. */
  hash: string;
  since: string;
  total: number;
  routes: RouteDivergences[];
  /** Divergences on routes beyond {@link MAX_ROUTES} (counted, not itemized). */
  otherRoutes: number;
}

/** Routes itemized in the summary; a candidate diverging on more is counted in `otherRoutes`. */
export const MAX_ROUTES = 200;
/** Recent examples kept per route. */
export const MAX_EXAMPLES = 10;

export interface CandidateDecisionsDeps {
  holder: Pick<CandidatePolicyHolder, 'current' | 'onSwap'>;
  /** The live grants' cache: read only, never loaded from (see the module comment). */
  grants: { peek(principal: IamPrincipal): CompiledGrant | null | undefined };
  metrics: Pick<GatewayMetrics, 'policyCandidateDivergences'>;
  /** Wall clock for the summary's times (injected in tests). */
  now?: () => number;
}

/** Thrown by the candidate's grant source when the grant is not cached: the candidate's decision is `unknown`. */
class GrantNotCached extends Error {}

const NOTHING_RECORDED: RecordedResolutions = () => undefined;

/** Decides requests by the candidate policy beside the live one; see the module comment. */
export class CandidateDecisions {
  private readonly engine: DecisionEngine;
  private readonly now: () => number;
  private summary: SummaryBuilder | null = null;
  /** `iam_policy_candidate_divergences_total` cells by `live|candidate`, looked up once each. */
  private readonly cells = new Map<string, { inc(): void }>();

  constructor(private readonly deps: CandidateDecisionsDeps) {
    this.now = deps.now ?? Date.now;
    this.engine = new DecisionEngine({
      grants: {
        peek: (principal) => deps.grants.peek(principal),
        getGrant: () => {
          throw new GrantNotCached();
        },
      },
      // Never asked: every decision of this engine passes its recorded resolutions.
      resolvers: { resolve: () => Promise.resolve({ kind: 'unavailable', reason: UNKNOWN_RESOLUTION }) },
    });
    deps.holder.onSwap((policy) => {
      this.summary = new SummaryBuilder(policy.hash, new Date(this.now()).toISOString());
    });
  }

  /** True while a candidate is loaded (and requests are decided by it). */
  get active(): boolean {
    return this.deps.holder.current !== null;
  }

  /**
   * Decides the request by the candidate (synchronously; never throws). Returns the divergence, already counted and
   * summarized, or null when the candidate agrees or none is loaded.
   */
  compare(live: LiveDecided): CandidateDivergence | null {
    const policy = this.deps.holder.current;
    if (policy === null) return null;
    const { outcome, routeId } = this.decide(policy, live);
    const liveVerdict = live.decision.allowed ? 'allow' : 'deny';
    if (outcome.decision === liveVerdict) return null;
    this.cell(liveVerdict, outcome.decision).inc();
    this.summaryFor(policy).add(this.now(), live, liveVerdict, outcome, routeId);
    return { live: liveVerdict, candidate: outcome };
  }

  /** The divergences since the serving candidate loaded; null when none is loaded. */
  divergences(): DivergenceSummary | null {
    const policy = this.deps.holder.current;
    return policy === null ? null : this.summaryFor(policy).view();
  }

  private decide(policy: CompiledPolicy, live: LiveDecided): { outcome: CandidateOutcome; routeId: string | null } {
    let route: string | null = null;
    let routeId: string | null = null;
    const unknown = (): { outcome: CandidateOutcome; routeId: string | null } => ({ outcome: { decision: 'unknown', step: null, route }, routeId });
    try {
      const match = policy.match(live.method, live.path);
      route = match?.route.pattern ?? null;
      routeId = match?.route.id ?? null;
      const recorded = live.decision.resource ? (type: string, id: string, resolver: ResourceResolverConfig) => recordedResolution(live, type, id, resolver) : NOTHING_RECORDED;
      const decided = this.engine.decideRequestFast({ method: live.method, path: live.path, policy, subject: live.subject, match, recorded });
      if (decided instanceof Promise) {
        // Not reached (grants are peeked, resolutions recorded); never left unhandled if it were.
        decided.catch(() => undefined);
        return unknown();
      }
      if (decided.failedStep === 'RESOURCE_RESOLUTION_UNAVAILABLE' && decided.steps[decided.steps.length - 1]?.reason === UNKNOWN_RESOLUTION) return unknown();
      return { outcome: { decision: decided.allowed ? 'allow' : 'deny', step: decided.failedStep, route }, routeId };
    } catch {
      // A grant that is not cached (GrantNotCached), or a bug: unknown, never a failure of the live request.
      return unknown();
    }
  }

  private cell(live: string, candidate: string): { inc(): void } {
    const key = `${live}|${candidate}`;
    let cell = this.cells.get(key);
    if (cell === undefined) {
      const labels = { live, candidate };
      const counter = this.deps.metrics.policyCandidateDivergences;
      cell = { inc: () => counter.inc(labels) };
      this.cells.set(key, cell);
    }
    return cell;
  }

  private summaryFor(policy: CompiledPolicy): SummaryBuilder {
    if (this.summary === null || this.summary.hash !== policy.hash) this.summary = new SummaryBuilder(policy.hash, new Date(this.now()).toISOString());
    return this.summary;
  }
}

/**
 * What the live decision learned about a resource, when it is the same resource asked of the same resolver: its scope
 * refs, its absence, or the resolver's failure. Anything else was not asked: `undefined`.
 */
function recordedResolution(live: LiveDecided, type: string, id: string, resolver: ResourceResolverConfig): ResolveResult | undefined {
  const resource = live.decision.resource;
  if (!resource || resource.type !== type || resource.id !== id) return undefined;
  // Resolved by the live policy's resolver for the type, at the same URL, its answer read the same way: otherwise the scopes could differ.
  const liveResolver = live.policy.resources[type]?.resolver ?? null;
  if (liveResolver === null || !sameResolution(liveResolver, resolver)) return undefined;
  if (resource.scopeRefs !== undefined) return { kind: 'found', scopeRefs: resource.scopeRefs };
  const failed = live.decision.failedStep;
  if (failed === 'RESOURCE_NOT_FOUND') return { kind: 'not-found' };
  if (failed === 'RESOURCE_RESOLUTION_UNAVAILABLE') return { kind: 'unavailable', reason: live.decision.steps[live.decision.steps.length - 1]?.reason ?? 'the resolver failed' };
  return undefined;
}

/** The bounded summary of one candidate's divergences. */
class SummaryBuilder {
  private readonly routes = new Map<string, RouteDivergences>();
  private total = 0;
  private otherRoutes = 0;

  constructor(
    readonly hash: string,
    private readonly since: string,
  ) {}

  add(nowMs: number, live: LiveDecided, liveVerdict: 'allow' | 'deny', candidate: CandidateOutcome, routeId: string | null): void {
    this.total++;
    const key = routeId ?? '';
    let entry = this.routes.get(key);
    if (entry === undefined) {
      if (this.routes.size >= MAX_ROUTES) {
        this.otherRoutes++;
        return;
      }
      entry = { routeId, route: candidate.route, allowToDeny: 0, denyToAllow: 0, unknown: 0, lastAt: '', examples: [] };
      this.routes.set(key, entry);
    }
    if (candidate.decision === 'unknown') entry.unknown++;
    else if (liveVerdict === 'allow') entry.allowToDeny++;
    else entry.denyToAllow++;
    const at = new Date(nowMs).toISOString();
    entry.lastAt = at;
    const decision = live.decision;
    entry.examples.unshift({
      at,
      method: live.method,
      // The path is the client's choice: the redaction layer's text rule, as in the access log.
      path: scrubText(live.path),
      userId: decision.userId,
      live: { decision: liveVerdict, step: decision.failedStep, route: decision.route?.pattern ?? null, decisionId: decision.decisionId },
      candidate,
    });
    if (entry.examples.length > MAX_EXAMPLES) entry.examples.pop();
  }

  view(): DivergenceSummary {
    const routes = [...this.routes.values()].sort((a, b) => b.allowToDeny + b.denyToAllow + b.unknown - (a.allowToDeny + a.denyToAllow + a.unknown));
    return { hash: this.hash, since: this.since, total: this.total, routes: routes.map((entry) => ({ ...entry, examples: [...entry.examples] })), otherRoutes: this.otherRoutes };
  }
}
