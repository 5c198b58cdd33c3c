import { ProblemError } from '../problem';
import type { AuthenticationOutcome, IdentityAuthenticator, LoginRequest } from './authenticator';
import { checkAuthenticatedIdentity } from './identity-validation';

type AuthenticateFunction = (request: LoginRequest) => unknown;

/**
 * `module` authenticator (design.md §6.1): a JS module exporting `authenticate(request)` that returns a
 * principal (`{userId, identityId, identityDomain, displayName?, profiles?}`) or null, sync or async.
 */
export class ModuleAuthenticator implements IdentityAuthenticator {
  readonly type = 'module' as const;
  private readonly authenticateFn: AuthenticateFunction;

  constructor(modulePath: string) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const loaded = require(modulePath) as { authenticate?: unknown; default?: { authenticate?: unknown } };
    const fn = loaded.authenticate ?? loaded.default?.authenticate;
    if (typeof fn !== 'function') throw new Error(`authenticator module ${modulePath} does not export authenticate(request)`);
    this.authenticateFn = fn as AuthenticateFunction;
  }

  async authenticate(login: LoginRequest): Promise<AuthenticationOutcome> {
    let answer: unknown;
    try {
      answer = await this.authenticateFn({ username: login.username, password: login.password, clientType: login.clientType });
    } catch (error) {
      throw new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', 'The authenticator module failed.', { cause: error });
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
