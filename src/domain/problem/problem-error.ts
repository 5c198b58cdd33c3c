import type { FailedStepCode } from '../decision-steps';
import { PROBLEM_CATALOG, type ProblemCode } from './catalog';

/** Extra members of a problem body (RFC 9457 §3.2 extension members); the OpenAPI `Problem` schema lists the same. */
export interface ProblemExtensions {
  /** The decision behind a denial (`GET /iam/authorization/decisions/{decisionId}`). */
  decisionId?: string;
  /** The decision step that failed. */
  step?: FailedStepCode;
  /** An admin write refused by a rule rather than a decision. */
  rule?: 'ESCALATION_PREVENTION';
  errors?: Array<{ pointer: string; message: string }>;
}

/** The RFC 9457 body every error of the gateway carries (docs/http-contract.md). */
export interface ProblemBody extends ProblemExtensions {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ProblemCode;
  requestId: string;
}

/**
 * An error that becomes an `application/problem+json` answer. `detail` is always safe to show:
 * internal causes stay in `cause` and only reach the log.
 */
export class ProblemError extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly title: string;
  readonly extensions: ProblemExtensions;
  /** Extra response headers, e.g. `Retry-After` or `WWW-Authenticate`. */
  readonly headers: Record<string, string>;

  constructor(
    code: ProblemCode,
    detail: string,
    options: {
      extensions?: ProblemExtensions;
      headers?: Record<string, string>;
      cause?: unknown;
      /**
       * Overrides the catalog status for the same code, e.g. 422 for a well-formed admin body that names an
       * unknown user or template (RFC 9110 §15.5.21), while the code stays `IAM_VALIDATION_FAILED`.
       */
      status?: number;
    } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProblemError';
    this.code = code;
    this.status = options.status ?? PROBLEM_CATALOG[code].status;
    this.title = PROBLEM_CATALOG[code].title;
    this.extensions = options.extensions ?? {};
    this.headers = options.headers ?? {};
  }

  /** The response body for a request with `requestId` to `instance` (the request path). */
  toBody(instance: string, requestId: string): ProblemBody {
    return {
      type: `https://iam-gateway.dev/problems/${this.code.toLowerCase().replace(/_/g, '-')}`,
      title: this.title,
      status: this.status,
      detail: this.message,
      instance,
      code: this.code,
      requestId,
      ...this.extensions,
    };
  }
}

export function isProblemError(error: unknown): error is ProblemError {
  return error instanceof ProblemError;
}

/** Any thrown value as a problem: unknown errors become a 500 that reveals nothing. */
export function toProblem(error: unknown): ProblemError {
  if (isProblemError(error)) return error;
  return new ProblemError('IAM_INTERNAL_ERROR', 'The gateway could not complete the request.', { cause: error });
}
