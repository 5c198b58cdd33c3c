import { ProblemError } from '../domain/problem';
import type { AuthenticationOutcome, Authenticator, LoginRequest } from './authenticator';
import { checkAuthenticatedIdentity } from './identity-validation';

type AuthenticateFunction = (request: LoginRequest & { signal: AbortSignal }) => unknown;

/**
 * `module` authenticator: a JS module exporting `authenticate(request)` that returns a
 * principal (`{userId, identityId, identityDomain, displayName?, profiles?}`) or null, sync or async.
 * An answer later than `iam.authenticator.timeout` is 502 IAM_AUTHENTICATOR_UNAVAILABLE, never a login; the
 * request carries an AbortSignal (`signal`) that fires then, so the module can stop its own work.
 */
export class ModuleAuthenticator implements Authenticator<'module'> {
  readonly type = 'module' as const;
  private readonly authenticateFn: AuthenticateFunction;

  constructor(
    modulePath: string,
    private readonly timeoutMs: number,
  ) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the configured module, loaded by path at start-up
    const loaded = require(modulePath) as { authenticate?: unknown; default?: { authenticate?: unknown } };
    const fn = loaded.authenticate ?? loaded.default?.authenticate;
    if (typeof fn !== 'function') throw new Error(`authenticator module ${modulePath} does not export authenticate(request)`);
    this.authenticateFn = fn as AuthenticateFunction;
  }

  async authenticate(login: LoginRequest): Promise<AuthenticationOutcome> {
    let answer: unknown;
    const timeout = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timeout.abort();
        reject(new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', `The authenticator module did not answer within ${this.timeoutMs} ms.`));
      }, this.timeoutMs);
    });
    try {
      const call = Promise.resolve().then(() =>
        this.authenticateFn({ username: login.username, password: login.password, clientType: login.clientType, signal: timeout.signal }),
      );
      answer = await Promise.race([call, expired]);
    } catch (error) {
      if (error instanceof ProblemError) throw error;
      throw new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', 'The authenticator module failed.', { cause: error });
    } finally {
      clearTimeout(timer);
    }
    if (answer === null || answer === undefined || answer === false) return { kind: 'rejected', reason: 'invalid-credentials' };
    const checked = checkAuthenticatedIdentity(answer);
    if ('error' in checked) {
      throw new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', `The authenticator module answered an unusable principal.`, {
        cause: new Error(checked.error),
      });
    }
    return { kind: 'accepted', identity: checked.identity };
  }
}
