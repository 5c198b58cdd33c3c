import { ProblemError, type ProblemExtensions } from './problem-error';

/** Named factories for the problems raised in more than one place. */
export const problems = {
  /** RFC 6750 §3: a 401 names the scheme; `invalid_token` when a token was sent but refused. */
  unauthenticated(detail: string, tokenSent: boolean): ProblemError {
    const challenge = tokenSent
      ? 'Bearer realm="iam-gateway", error="invalid_token", error_description="' + detail.replace(/"/g, "'") + '"'
      : 'Bearer realm="iam-gateway"';
    return new ProblemError('IAM_UNAUTHENTICATED', detail, { headers: { 'WWW-Authenticate': challenge } });
  },
  invalidCredentials(): ProblemError {
    return new ProblemError('IAM_INVALID_CREDENTIALS', 'The username or password is not correct, or the user is disabled.', {
      headers: { 'WWW-Authenticate': 'Bearer realm="iam-gateway"' },
    });
  },
  /** A cookie-authenticated request from another site (docs/http-contract.md, CSRF). */
  crossSiteCookie(): ProblemError {
    return new ProblemError('IAM_CSRF_REJECTED', 'A cross-site request may not use the session cookie (send a bearer token, or add the origin to iam.session-cookie.trusted-origins).');
  },
  accessDenied(detail: string, extensions: ProblemExtensions = {}): ProblemError {
    return new ProblemError('IAM_ACCESS_DENIED', detail, { extensions });
  },
  validation(errors: Array<{ pointer: string; message: string }>, detail = 'The request body is not valid.'): ProblemError {
    return new ProblemError('IAM_VALIDATION_FAILED', detail, { extensions: { errors } });
  },
  badRequest(detail: string): ProblemError {
    return new ProblemError('IAM_BAD_REQUEST', detail);
  },
  storeUnavailable(cause?: unknown): ProblemError {
    return new ProblemError('IAM_STORE_UNAVAILABLE', 'The session store cannot be reached; try again shortly.', {
      headers: { 'Retry-After': '5' },
      cause,
    });
  },
  databaseUnavailable(cause?: unknown): ProblemError {
    return new ProblemError('IAM_DATABASE_UNAVAILABLE', 'The database cannot be reached; try again shortly.', {
      headers: { 'Retry-After': '5' },
      cause,
    });
  },
};
