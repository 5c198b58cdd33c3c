/**
 * What a caller's own questions (`POST /iam/authorization/check`, diagnostics) may cost the hosts' resolvers
 * (docs/host-integration.md, "Limits and errors"). Every id in such a call is the caller's choice: without a bound, one
 * caller keeping a few 100-check calls in flight queues hundreds of resolver requests, and a resolver shared with the
 * proxy then times out for everyone. The proxy never goes through a budget: it asks its own client, whose pool
 * these resolutions never reach (app/start-gateway.ts).
 */
import type { ResolveResult, ResourceResolverClient } from './resource-resolver';

type Resolvers = Pick<ResourceResolverClient, 'resolve'>;

export interface ResolutionLimits {
  /** Distinct resources one call may have resolved (`iam.authz.caller-resolutions.per-call`). */
  perCall: number;
  /** Resolutions of one caller waiting at once, all their calls together (`iam.authz.caller-resolutions.in-flight-per-caller`). */
  inFlightPerCaller: number;
}

/** Which bound refused a resolution: the `reason` label of `iam_caller_resolutions_refused_total`. */
export type RefusalReason = 'per_call' | 'per_caller';

/**
 * The budget every caller-asked resolution goes through: per call, each resource resolved once and at most
 * `perCall` of them; per caller, at most `inFlightPerCaller` waiting at once. Over either, the answer is `refused`
 * at once, without a request: a bound that queued instead would still let a caller hold the resolver's time.
 */
export class ResolutionBudget {
  /** Resolutions waiting per caller; a caller with none has no entry (the map holds only callers in flight). */
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly resolvers: Resolvers,
    private readonly limits: ResolutionLimits,
    private readonly onRefused: (reason: RefusalReason) => void = () => undefined,
  ) {}

  /**
   * The resolvers of one call by `caller` (whoever is charged across calls: the user behind the credential, not
   * the subject they ask about). A resource two checks name is resolved once and both see the same answer.
   */
  forCall(caller: string): Resolvers {
    const answers = new Map<string, Promise<ResolveResult>>();
    return {
      resolve: (config, type, id) => {
        const key = `${type}\u0000${id}`;
        let answer = answers.get(key);
        if (answer !== undefined) return answer;
        // The call's first `perCall` distinct resources, whether the caller's budget then admits them or not: which
        // checks of a call are over it never depends on the caller's other calls.
        if (answers.size >= this.limits.perCall) {
          answer = this.refuse('per_call', `this call already named ${this.limits.perCall} resources to resolve, the most one call may have resolved`);
        } else if ((this.inFlight.get(caller) ?? 0) >= this.limits.inFlightPerCaller) {
          answer = this.refuse('per_caller', `the caller already has ${this.limits.inFlightPerCaller} resolutions waiting, the most one caller may have at once`);
        } else {
          answer = this.admit(caller, () => this.resolvers.resolve(config, type, id));
        }
        answers.set(key, answer);
        return answer;
      },
    };
  }

  /** Resolutions of `caller` waiting now (0 for a caller with none). */
  inFlightOf(caller: string): number {
    return this.inFlight.get(caller) ?? 0;
  }

  private refuse(reason: RefusalReason, text: string): Promise<ResolveResult> {
    this.onRefused(reason);
    return Promise.resolve({ kind: 'refused', reason: text });
  }

  private admit(caller: string, resolve: () => Promise<ResolveResult>): Promise<ResolveResult> {
    this.inFlight.set(caller, (this.inFlight.get(caller) ?? 0) + 1);
    const release = (): void => {
      const left = (this.inFlight.get(caller) ?? 1) - 1;
      if (left === 0) this.inFlight.delete(caller);
      else this.inFlight.set(caller, left);
    };
    let pending: Promise<ResolveResult>;
    try {
      pending = resolve();
    } catch (error) {
      pending = Promise.reject(error as Error);
    }
    return pending.finally(release);
  }
}
