import type { CompiledPolicy, PolicyIssue } from './compiled-policy';

/**
 * The serving policy. A request reads `current` once and keeps that snapshot to the end, so a swap never
 * changes the rules under an in-flight request; a failed reload leaves `current` untouched and is kept
 * in `lastError` for readiness and logs.
 */
export class PolicyHolder {
  private policy: CompiledPolicy;
  private failure: { at: Date; issues: PolicyIssue[] } | null = null;

  constructor(initial: CompiledPolicy) {
    this.policy = initial;
  }

  get current(): CompiledPolicy {
    return this.policy;
  }

  get lastError(): { at: Date; issues: PolicyIssue[] } | null {
    return this.failure;
  }

  swap(next: CompiledPolicy): void {
    this.policy = next;
    this.failure = null;
  }

  reject(issues: PolicyIssue[]): void {
    this.failure = { at: new Date(), issues };
  }

  /** Readiness detail (docs/policy-format.md). */
  describe(): Record<string, unknown> {
    return {
      hash: this.policy.hash,
      loadedAt: this.policy.loadedAt.toISOString(),
      routes: this.policy.routes.length,
      files: this.policy.files,
      lastError: this.failure
        ? {
            at: this.failure.at.toISOString(),
            issues: this.failure.issues.filter((i) => i.severity === 'error').map((i) => `${i.source ? `${i.source.file}:${i.source.line}: ` : ''}${i.message}`),
          }
        : null,
    };
  }
}
