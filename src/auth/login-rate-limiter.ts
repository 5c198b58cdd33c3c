import { createHash } from 'node:crypto';
import { ProblemError } from '../problem';
import type { TokenStore } from '../sessions/token-store';

/**
 * Failed-login limit per username + client address (design.md §3 `iam.login.rate-limit`): after
 * `maxFailures` failures in the window, further attempts get 429 IAM_RATE_LIMITED with Retry-After until
 * the window ends — even with the right password, so guessing cannot continue. A success clears the count.
 * Counters live in the token store so every instance shares them.
 */
export class LoginRateLimiter {
  constructor(
    private readonly store: TokenStore,
    private readonly maxFailures: number,
    private readonly windowMs: number,
  ) {}

  /** Throws 429 when the username/address pair is locked out. */
  async check(username: string, clientAddress: string): Promise<void> {
    const { count, resetInMs } = await this.store.peek(this.key(username, clientAddress));
    if (count >= this.maxFailures) throw rateLimited(resetInMs);
  }

  async recordFailure(username: string, clientAddress: string): Promise<void> {
    await this.store.hit(this.key(username, clientAddress), this.windowMs);
  }

  async recordSuccess(username: string, clientAddress: string): Promise<void> {
    await this.store.resetCounter(this.key(username, clientAddress));
  }

  /** Usernames are hashed: they are user input and must not shape store keys. */
  private key(username: string, clientAddress: string): string {
    const digest = createHash('sha256').update(username.toLowerCase()).update('\0').update(clientAddress).digest('hex');
    return `login:${digest.slice(0, 40)}`;
  }
}

function rateLimited(resetInMs: number): ProblemError {
  const seconds = Math.max(1, Math.ceil(resetInMs / 1000));
  return new ProblemError('IAM_RATE_LIMITED', `Too many failed logins; try again in ${seconds} s.`, {
    headers: { 'Retry-After': String(seconds) },
  });
}
