/**
 * The one table of problem codes (docs/http-contract.md). Every error the gateway answers with is one of these;
 * tests assert on `code`, never on message text.
 */
export const PROBLEM_CATALOG = {
  IAM_UNAUTHENTICATED: { status: 401, title: 'Authentication required' },
  IAM_INVALID_CREDENTIALS: { status: 401, title: 'Invalid credentials' },
  IAM_OIDC_LOGIN_FAILED: { status: 401, title: 'Identity provider login failed' },
  IAM_ACCESS_DENIED: { status: 403, title: 'Access denied' },
  IAM_CSRF_REJECTED: { status: 403, title: 'Cross-site request refused' },
  IAM_RESOURCE_NOT_FOUND: { status: 404, title: 'Resource not found' },
  IAM_PROFILE_NOT_FOUND: { status: 404, title: 'Profile not found' },
  IAM_SESSION_NOT_FOUND: { status: 404, title: 'Session not found' },
  IAM_NOT_FOUND: { status: 404, title: 'Not found' },
  IAM_DECISION_NOT_FOUND: { status: 404, title: 'Decision not found' },
  IAM_CONFLICT: { status: 409, title: 'Conflicting update' },
  IAM_VALIDATION_FAILED: { status: 400, title: 'Request validation failed' },
  IAM_BAD_REQUEST: { status: 400, title: 'Request target refused' },
  IAM_OIDC_STATE_INVALID: { status: 400, title: 'Login state invalid' },
  IAM_LOGOUT_TOKEN_INVALID: { status: 400, title: 'Logout token invalid' },
  IAM_METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  IAM_PAYLOAD_TOO_LARGE: { status: 413, title: 'Request body too large' },
  IAM_URI_TOO_LONG: { status: 414, title: 'Request target too long' },
  IAM_UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  IAM_HEADERS_TOO_LARGE: { status: 431, title: 'Request header fields too large' },
  IAM_RATE_LIMITED: { status: 429, title: 'Too many requests' },
  IAM_RESOURCE_RESOLUTION_UNAVAILABLE: { status: 500, title: 'Resource resolution unavailable' },
  IAM_INTERNAL_ERROR: { status: 500, title: 'Internal error' },
  IAM_LOGIN_NOT_CONFIGURED: { status: 501, title: 'Login not configured' },
  IAM_UPSTREAM_UNAVAILABLE: { status: 502, title: 'Upstream unavailable' },
  IAM_AUTHENTICATOR_UNAVAILABLE: { status: 502, title: 'Authenticator unavailable' },
  IAM_IDP_UNAVAILABLE: { status: 502, title: 'Identity provider unavailable' },
  IAM_FILTER_FAILED: { status: 502, title: 'List could not be filtered' },
  IAM_STORE_UNAVAILABLE: { status: 503, title: 'Token store unavailable' },
  IAM_DATABASE_UNAVAILABLE: { status: 503, title: 'Database unavailable' },
  IAM_BUSY: { status: 503, title: 'Too busy' },
  IAM_UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream timeout' },
  IAM_IDP_TIMEOUT: { status: 504, title: 'Identity provider timeout' },
} as const;

export type ProblemCode = keyof typeof PROBLEM_CATALOG;
