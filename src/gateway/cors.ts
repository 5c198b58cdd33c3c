import type { IncomingMessage, ServerResponse } from 'node:http';
import { ProblemError } from '../domain/problem';
import { sendProblem } from '../http/problem-response';

/** `iam.cors` (docs/configuration.md). */
export interface CorsConfig {
  origins: string[];
  methods: string[];
  headers: string[];
  maxAgeSeconds: number;
  credentials: boolean;
}

/**
 * CORS answered by the gateway (docs/http-contract.md, Fetch standard §3.2): preflights never reach the host — they
 * carry no credentials, so proxying them would be proxying unauthenticated requests — and the CORS headers
 * of actual responses come from one place, the gateway's configuration.
 */
export class CorsPolicy {
  private readonly origins: Set<string>;
  private readonly anyOrigin: boolean;
  private readonly methods: Set<string>;
  private readonly allowHeaders: string;

  constructor(private readonly config: CorsConfig) {
    this.origins = new Set(config.origins);
    this.anyOrigin = this.origins.has('*');
    this.methods = new Set(config.methods.map((m) => m.toUpperCase()));
    this.allowHeaders = config.headers.join(', ');
  }

  isPreflight(req: IncomingMessage): boolean {
    return req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined;
  }

  /** Answers a preflight: 204 with the allowances, or 403 when the origin or method is not allowed. */
  answerPreflight(req: IncomingMessage, res: ServerResponse, path: string, requestId: string): void {
    const origin = req.headers.origin ?? '';
    const method = String(req.headers['access-control-request-method']).toUpperCase();
    if (!this.allows(origin) || !this.methods.has(method)) {
      sendProblem(res, new ProblemError('IAM_ACCESS_DENIED', `CORS: origin ${JSON.stringify(origin)} may not send ${method} requests.`), path, requestId);
      return;
    }
    const headers: Record<string, string> = {
      'access-control-allow-origin': this.anyOrigin && !this.config.credentials ? '*' : origin,
      'access-control-allow-methods': [...this.methods].join(', '),
      'access-control-allow-headers': this.allowHeaders,
      'access-control-max-age': String(this.config.maxAgeSeconds),
      vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
      'x-request-id': requestId,
    };
    if (this.config.credentials) headers['access-control-allow-credentials'] = 'true';
    res.writeHead(204, headers);
    res.end();
  }

  /** CORS headers for an actual response to `origin`, or an empty list when it is not allowed. */
  responseHeaders(origin: string | undefined): Array<[string, string]> {
    if (origin === undefined || !this.allows(origin)) return [];
    const headers: Array<[string, string]> = [
      ['access-control-allow-origin', this.anyOrigin && !this.config.credentials ? '*' : origin],
      ['access-control-expose-headers', 'X-Request-Id, WWW-Authenticate, Retry-After'],
      ['vary', 'Origin'],
    ];
    if (this.config.credentials) headers.push(['access-control-allow-credentials', 'true']);
    return headers;
  }

  private allows(origin: string): boolean {
    return this.anyOrigin || this.origins.has(origin);
  }
}
