import { Agent, request } from 'undici';
import { ProblemError } from '../problem';
import type { AuthenticationOutcome, IdentityAuthenticator, LoginRequest } from './authenticator';
import { checkAuthenticatedIdentity } from './identity-validation';

/**
 * `http` authenticator (design.md §6.1): POSTs the login to the host's own credential check.
 * 200 with an identity = accepted; 401/403 = rejected; anything else, or no answer, is
 * 502 IAM_AUTHENTICATOR_UNAVAILABLE — never a login.
 */
export class HttpAuthenticator implements IdentityAuthenticator {
  readonly type = 'http' as const;
  private readonly agent: Agent;

  constructor(
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {
    this.agent = new Agent({ connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  }

  async authenticate(login: LoginRequest): Promise<AuthenticationOutcome> {
    let statusCode: number;
    let payload: unknown;
    try {
      const response = await request(this.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ username: login.username, password: login.password, clientType: login.clientType }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      statusCode = response.statusCode;
      if (statusCode === 200) {
        payload = await response.body.json().catch(() => undefined);
      } else {
        await response.body.dump();
      }
    } catch (error) {
      throw unavailable('the credential check did not answer', error);
    }
    if (statusCode === 401) return { kind: 'rejected', reason: 'invalid-credentials' };
    if (statusCode === 403) return { kind: 'rejected', reason: 'disabled' };
    if (statusCode !== 200) throw unavailable(`the credential check answered ${statusCode}`);
    const checked = checkAuthenticatedIdentity(payload);
    if ('error' in checked) throw unavailable(checked.error);
    return { kind: 'accepted', identity: checked.identity };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

function unavailable(reason: string, cause?: unknown): ProblemError {
  return new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', `The host's credential check is unavailable: ${reason}.`, { cause });
}
