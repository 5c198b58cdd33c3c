import type { CompiledPolicy, PolicyIssue } from './compiled-policy';

/**
 * The candidate policy (`iam.policy.candidate-dir`, docs/policy-changes.md): decided beside the live policy on every
 * proxied and forward-auth request, never enforced. Unlike the live {@link PolicyHolder} it may hold nothing — a
 * candidate directory that is missing or broken at start does not stop the gateway — and a failed reload keeps the
 * last good candidate, as the live policy does.
 */
export class CandidatePolicyHolder {
  private policy: CompiledPolicy | null = null;
  private failure: { at: Date; issues: PolicyIssue[] } | null = null;
  private readonly listeners: Array<(policy: CompiledPolicy) => void> = [];

  /** `dir`: the candidate directory, absolute. */
  constructor(readonly dir: string) {}

  /** The candidate that decides beside the live policy; null until one loads. */
  get current(): CompiledPolicy | null {
    return this.policy;
  }

  get lastError(): { at: Date; issues: PolicyIssue[] } | null {
    return this.failure;
  }

  swap(next: CompiledPolicy): void {
    const changed = this.policy === null || this.policy.hash !== next.hash;
    this.policy = next;
    this.failure = null;
    if (changed) for (const listener of this.listeners) listener(next);
  }

  reject(issues: PolicyIssue[]): void {
    this.failure = { at: new Date(), issues };
  }

  /** Calls `listener` each time another candidate (another hash) starts deciding. */
  onSwap(listener: (policy: CompiledPolicy) => void): void {
    this.listeners.push(listener);
  }
}
