import { createHash } from 'node:crypto';
import { ProblemError } from '../domain/problem';
import type { TokenCounters } from '../domain/token-store';

export interface LoginRateLimits {
  /** Attempts per username + client address that may fail within the window. */
  maxFailures: number;
  /** Failed attempts per client address within the window, whatever the username (unknown ones too). */
  maxFailuresPerAddress: number;
  windowMs: number;
}

/** One login attempt that was let through: tell the limiter how it ended. */
export interface LoginAttempt {
  /** The login succeeded: the username+address count is cleared and the address's unit given back. */
  succeeded(): Promise<void>;
  /** The password was never checked (queue full): both units are given back. */
  notTried(): Promise<void>;
}

/**
 * Failed-login limits (`iam.login.rate-limit`): per username + client address, and per client address.
 * An attempt takes one unit of both counters *before* the password is checked, in one atomic step of the
 * token store (a Redis script, or one synchronous step in process), so concurrent attempts can never
 * exceed the limit (#11.8); a failure keeps its units, a success clears the username+address count and
 * gives back the address's unit. When a counter is full the answer is 429 IAM_RATE_LIMITED with
 * Retry-After until its window ends — even with the right password, so guessing cannot continue.
 * The client address is the trusted-proxy one (#11.9): failures from one address never lock the same
 * username out from another. Counters live in the token store so every instance shares them.
 */
export class LoginRateLimiter {
  constructor(
    private readonly store: TokenCounters,
    private readonly limits: LoginRateLimits,
  ) {}

  /** Takes one attempt, or throws 429 when the username/address pair or the address is used up. */
  async acquire(username: string, clientAddress: string): Promise<LoginAttempt> {
    const pair = this.pairKey(username, clientAddress);
    const address = this.addressKey(clientAddress);
    const taken = await this.store.takeCounters([pair, address], [this.limits.maxFailures, this.limits.maxFailuresPerAddress], this.limits.windowMs);
    if (!taken.allowed) throw rateLimited(taken.resetInMs);
    return {
      succeeded: async () => {
        await this.store.resetCounter(pair);
        await this.store.releaseCounter(address);
      },
      notTried: async () => {
        await this.store.releaseCounter(pair);
        await this.store.releaseCounter(address);
      },
    };
  }

  /**
   * Takes one unit of the address's counter alone, for a login whose user is not known before it is tried (an OpenID
   * Connect callback: the provider names the user). Throws 429 when the address is used up.
   */
  async acquireAddress(clientAddress: string): Promise<LoginAttempt> {
    const address = this.addressKey(clientAddress);
    const taken = await this.store.takeCounters([address], [this.limits.maxFailuresPerAddress], this.limits.windowMs);
    if (!taken.allowed) throw rateLimited(taken.resetInMs);
    const giveBack = (): Promise<void> => this.store.releaseCounter(address);
    return { succeeded: giveBack, notTried: giveBack };
  }

  /** Usernames are hashed: they are user input and must not shape store keys. */
  private pairKey(username: string, clientAddress: string): string {
    const digest = createHash('sha256').update(username.toLowerCase()).update('\0').update(clientAddress).digest('hex');
    return `login:${digest.slice(0, 40)}`;
  }

  private addressKey(clientAddress: string): string {
    return `login-address:${createHash('sha256').update(clientAddress).digest('hex').slice(0, 40)}`;
  }
}

function rateLimited(resetInMs: number): ProblemError {
  const seconds = Math.max(1, Math.ceil(resetInMs / 1000));
  return new ProblemError('IAM_RATE_LIMITED', `Too many failed logins; try again in ${seconds} s.`, {
    headers: { 'Retry-After': String(seconds) },
  });
}
