import { Agent, request } from 'undici';
import { ProblemError } from '../domain/problem';
import type { AuthenticationOutcome, Authenticator, LoginRequest } from './authenticator';
import { checkAuthenticatedIdentity } from './identity-validation';

/** The largest answer read from the credential check (an identity with projected profiles fits easily). */
export const AUTHENTICATOR_ANSWER_LIMIT = 64 * 1024;

/**
 * `http` authenticator: POSTs the login to the host's own credential check.
 * 200 with an identity = accepted; 401/403 = rejected; anything else, no answer within the timeout, or an
 * answer larger than {@link AUTHENTICATOR_ANSWER_LIMIT}, is 502 IAM_AUTHENTICATOR_UNAVAILABLE — never a login.
 */
export class HttpAuthenticator implements Authenticator<'http'> {
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
        payload = await readBounded(response.body);
      } else {
        // dump() reads at most its limit, then destroys the stream.
        await response.body.dump({ limit: AUTHENTICATOR_ANSWER_LIMIT });
      }
    } catch (error) {
      throw unavailable(error instanceof AnswerTooLarge ? error.message : 'the credential check did not answer', error);
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

class AnswerTooLarge extends Error {
  constructor() {
    super(`the credential check answered more than ${AUTHENTICATOR_ANSWER_LIMIT} bytes`);
  }
}

/** The JSON answer, refused past the limit (the stream is destroyed, not drained); undefined when not JSON. */
async function readBounded(body: AsyncIterable<Buffer> & { destroy(error?: Error): unknown }): Promise<unknown> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += chunk.length;
    if (length > AUTHENTICATOR_ANSWER_LIMIT) {
      body.destroy();
      throw new AnswerTooLarge();
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function unavailable(reason: string, cause?: unknown): ProblemError {
  return new ProblemError('IAM_AUTHENTICATOR_UNAVAILABLE', `The host's credential check is unavailable: ${reason}.`, { cause });
}
