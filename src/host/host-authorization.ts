import type { IncomingHttpHeaders } from 'node:http';
import { createRemoteJWKSet, customFetch, jwtVerify, type JWTPayload } from 'jose';

export type AccessMode = 'READ' | 'WRITE';

/** One question: may the subject do `permissionCode` (on this resource)? */
export interface HostCheck {
  permissionCode: string;
  resource?: { type: string; id: string; access: AccessMode };
}

/** The gateway's answer to one check: the proxy's decision for such a route. */
export interface HostCheckResult {
  allowed: boolean;
  /** What enforcement would answer: 200, or 401/403/404/500/502. */
  status: number;
  failedStep: string | null;
  decisionId: string;
}

/** Which resources of a type the subject reaches (filter the host's own query with it). */
export type HostPlan = { kind: 'ALL' } | { kind: 'NONE' } | { kind: 'SOME'; ids: string[] };

/** Who the gateway authorized, from the verified assertion. */
export interface HostPrincipal {
  userId: string;
  sessionId: string;
  identityId: string | null;
  identityDomain: string | null;
  profileId: string | null;
  /** The permission the gateway granted for this request (null on a shadow denial or a route without one). */
  permission: string | null;
  decisionId: string | null;
  /** The assertion itself: the bearer of this request's check and plan calls. */
  assertion: string;
}

/**
 * The request as the host received it: Node's `IncomingMessage`, Express's `req`, Koa's `ctx.req`. The assertion is
 * compared with its method and path.
 */
export interface HostRequest {
  method?: string;
  /** The request target as received (`/api/tasks/10?x=1`). */
  url?: string;
  /** Express: the target before a mounted router cut its prefix off `url`; preferred when present. */
  originalUrl?: string;
  headers: IncomingHttpHeaders;
}

export interface HostAuthorizationOptions {
  /** The gateway as the host can reach it, e.g. `http://iam-gateway:8080` (its JWKS and decision endpoints). */
  gatewayUrl: string;
  /** `iam.forward.assertion.issuer`. */
  issuer: string;
  /**
   * The audience this host is: `iam.forward.assertion.audience`, or the `audience` of the policy routes that reach
   * it. An assertion for another audience is refused; without this option, so is every assertion that names one.
   */
  audience?: string;
  /**
   * Default true: an assertion counts only on the request it was issued for (its `htm` is the request's method, its
   * `htu` the request's path), so one captured from `GET /api/whoami` is refused on `DELETE /api/tasks/10`. Turn it
   * off only for a host that receives its requests rewritten by something between it and the gateway.
   */
  bindToRequest?: boolean;
  /** How long one call may take (default 5 s). */
  timeoutMs?: number;
  /** For tests: the fetch to use. */
  fetch?: typeof fetch;
}

/** A refusal as the gateway would answer it: an RFC 9457 problem with the `decisionId` of the decision. */
export class HostAuthorizationError extends Error {
  constructor(
    readonly status: number,
    readonly problem: { type?: string; title?: string; status: number; detail?: string; code?: string; decisionId?: string; step?: string | null },
  ) {
    super(problem.detail ?? problem.title ?? `the gateway answered ${status}`);
    this.name = 'HostAuthorizationError';
  }

  /** The problem+json body to answer the client with. */
  toJSON(): HostAuthorizationError['problem'] {
    return this.problem;
  }
}

/** The decisions of one host request: its principal, and checks sent to the gateway together. */
export interface RequestAuthorization {
  /** The verified principal, or null when the request carries no (valid) assertion. */
  principal(): Promise<HostPrincipal | null>;
  /** Answers in order; checks asked in the same tick of one request go to the gateway as one call. */
  check(checks: HostCheck): Promise<HostCheckResult>;
  check(checks: HostCheck[]): Promise<HostCheckResult[]>;
  /** Resolves when allowed; otherwise rejects with a {@link HostAuthorizationError}: the proxy's problem for that result (403, 404, 429, 502…) carrying `decisionId`. */
  require(check: HostCheck): Promise<void>;
  plan(permissionCode: string, resourceType: string, access?: AccessMode): Promise<HostPlan>;
}

export interface HostAuthorization {
  /**
   * The principal of a request's `X-IAM-Assertion` (verified: signature by the gateway's key, `iss`, `aud`, `exp`, and
   * `htm`/`htu` against the request unless `bindToRequest: false`), or null.
   */
  principal(request: HostRequest): Promise<HostPrincipal | null>;
  /** The request's decisions; its check, plan and require refuse, without a call, an assertion `principal` refuses. */
  forRequest(request: HostRequest): RequestAuthorization;
}

/** A verified assertion, or why it does not count for the request. */
type Verdict = { principal: HostPrincipal; refused?: undefined } | { principal?: undefined; refused: string };

/** What the gateway signed about the request: its method and path (docs/http-contract.md). */
interface Issued {
  principal: HostPrincipal;
  method: string | null;
  path: string | null;
  /** The assertion names an audience (checked by jose when this host has one). */
  audience: boolean;
  expiresAtMs: number;
}

const MAX_CACHED = 10_000;

/** The client of the gateway's decision endpoints for one Node host (see the module comment of index.ts). */
export function createHostAuthorization(options: HostAuthorizationOptions): HostAuthorization {
  const base = options.gatewayUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 5000;
  // jose keeps the gateway's keys, refetching on an unknown key id (with its own cooldown).
  const keys = createRemoteJWKSet(new URL(`${base}/iam/.well-known/jwks.json`), { timeoutDuration: timeoutMs, ...(options.fetch ? { [customFetch]: options.fetch } : {}) });
  const bindToRequest = options.bindToRequest ?? true;
  // A verified assertion is remembered until it expires: a host asks several times per request.
  const verified = new Map<string, Issued>();

  async function issuedOf(assertion: string): Promise<Issued | null> {
    const cached = verified.get(assertion);
    if (cached && cached.expiresAtMs > Date.now()) return cached;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(assertion, keys, { issuer: options.issuer, algorithms: ['EdDSA'], requiredClaims: ['exp', 'sub', 'sid'], ...(options.audience ? { audience: options.audience } : {}) }));
    } catch {
      return null;
    }
    const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);
    const issued: Issued = {
      principal: {
        userId: String(payload.sub),
        sessionId: String(payload.sid),
        identityId: text(payload.identity_id),
        identityDomain: text(payload.identity_domain),
        profileId: text(payload.profile_id),
        permission: text(payload.permission),
        decisionId: text(payload.decision_id),
        assertion,
      },
      method: text(payload.htm),
      path: text(payload.htu),
      audience: payload.aud !== undefined,
      expiresAtMs: (payload.exp as number) * 1000,
    };
    if (verified.size >= MAX_CACHED) verified.delete(verified.keys().next().value as string);
    verified.set(assertion, issued);
    return issued;
  }

  async function verdictOf(assertion: string | null, target: RequestTarget): Promise<Verdict> {
    if (assertion === null) return { refused: 'The request carries no X-IAM-Assertion from the gateway.' };
    const issued = await issuedOf(assertion);
    if (issued === null) return { refused: 'The X-IAM-Assertion is not valid here (signature, issuer, audience or expiry).' };
    // RFC 7519 §4.1.3: a recipient not named among the audiences refuses the token; a host without an audience is never named.
    if (issued.audience && !options.audience) return { refused: 'The X-IAM-Assertion names an audience and this host is configured with none.' };
    if (bindToRequest && (issued.method === null || issued.path === null || issued.method !== target.method || issued.path !== target.path)) {
      return { refused: `The X-IAM-Assertion was issued for ${issued.method ?? '?'} ${issued.path ?? '?'}, not for this request (${target.method ?? '?'} ${target.path ?? '?'}).` };
    }
    return { principal: issued.principal };
  }

  async function call<T>(path: string, assertion: string, body: unknown): Promise<T> {
    const answer = await doFetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${assertion}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const parsed = (await answer.json().catch(() => ({}))) as T & { status?: number };
    if (!answer.ok) throw new HostAuthorizationError(answer.status, { status: answer.status, ...(parsed as object) });
    return parsed;
  }

  const unauthenticated = (detail: string): HostAuthorizationError =>
    new HostAuthorizationError(401, { type: 'https://iam-gateway.dev/problems/iam-unauthenticated', title: 'Unauthenticated', status: 401, code: 'IAM_UNAUTHENTICATED', detail });

  return {
    principal: async (request) => (await verdictOf(assertionOf(request), targetOf(request))).principal ?? null,
    forRequest(request) {
      const assertion = assertionOf(request);
      // Read now: a mounted router may rewrite the request's url before a handler asks.
      const target = targetOf(request);
      let verdict: Promise<Verdict> | null = null;
      const verify = (): Promise<Verdict> => (verdict ??= verdictOf(assertion, target));
      /** The assertion to send as the bearer, once it counts for this request. */
      const bearer = async (): Promise<string> => {
        const { principal, refused } = await verify();
        if (refused !== undefined) throw unauthenticated(refused);
        return principal.assertion;
      };
      let pending: Array<{ check: HostCheck; resolve: (result: HostCheckResult) => void; reject: (error: unknown) => void }> = [];
      const flush = async (): Promise<void> => {
        const batch = pending;
        pending = [];
        try {
          const answer = await call<{ results: HostCheckResult[] }>('/iam/authorization/check', await bearer(), { checks: batch.map((entry) => entry.check) });
          batch.forEach((entry, index) => entry.resolve(answer.results[index]!));
        } catch (error) {
          for (const entry of batch) entry.reject(error);
        }
      };
      const checkOne = (check: HostCheck): Promise<HostCheckResult> =>
        new Promise((resolve, reject) => {
          // Checks asked in the same tick go out together (one call per host request, up to 100 checks).
          if (pending.length === 0) queueMicrotask(() => void flush());
          pending.push({ check, resolve, reject });
          if (pending.length >= 100) void flush();
        });
      function check(checks: HostCheck): Promise<HostCheckResult>;
      function check(checks: HostCheck[]): Promise<HostCheckResult[]>;
      function check(checks: HostCheck | HostCheck[]): Promise<HostCheckResult | HostCheckResult[]> {
        return Array.isArray(checks) ? Promise.all(checks.map(checkOne)) : checkOne(checks);
      }
      return {
        principal: async () => (await verify()).principal ?? null,
        check,
        async require(one) {
          const result = await checkOne(one);
          if (result.allowed) return;
          // The status the proxy would answer for this decision: a resolver that is down (502) or a spent resolution
          // budget (429) is not a denial, and a host that retries or reports must be able to tell.
          const refusal = REFUSALS[result.status] ?? REFUSALS[403]!;
          throw new HostAuthorizationError(result.status in REFUSALS ? result.status : 403, {
            type: `https://iam-gateway.dev/problems/${refusal.code.toLowerCase().replace(/_/g, '-')}`,
            title: refusal.title,
            status: result.status in REFUSALS ? result.status : 403,
            code: refusal.code,
            detail: `${one.permissionCode}${one.resource ? ` on ${one.resource.type} ${one.resource.id}` : ''} is not allowed (${result.failedStep ?? 'denied'}).`,
            decisionId: result.decisionId,
            step: result.failedStep,
          });
        },
        async plan(permissionCode, resourceType, access = 'READ') {
          return call<HostPlan>('/iam/authorization/plan', await bearer(), { permissionCode, resourceType, access });
        },
      };
    },
  };
}

/**
 * What `require` rejects with for a check result's `status`: the problem the proxy answers for the same decision
 * (docs/host-integration.md). Any other status is reported as a denial.
 */
const REFUSALS: Readonly<Record<number, { code: string; title: string }>> = {
  401: { code: 'IAM_UNAUTHENTICATED', title: 'Authentication required' },
  403: { code: 'IAM_ACCESS_DENIED', title: 'Access denied' },
  404: { code: 'IAM_RESOURCE_NOT_FOUND', title: 'Resource not found' },
  429: { code: 'IAM_RATE_LIMITED', title: 'Too many requests' },
  500: { code: 'IAM_RESOURCE_RESOLUTION_UNAVAILABLE', title: 'Resource resolution unavailable' },
  502: { code: 'IAM_UPSTREAM_UNAVAILABLE', title: 'Upstream unavailable' },
};

/** The method and path an assertion is compared with. */
interface RequestTarget {
  method: string | null;
  path: string | null;
}

function assertionOf(request: HostRequest): string | null {
  if (request === null || typeof request !== 'object' || typeof request.headers !== 'object' || request.headers === null) {
    throw new TypeError('iam-gateway/host: pass the request ({ method, url, headers }), not its headers');
  }
  const value = request.headers['x-iam-assertion'];
  return typeof value === 'string' && value.length > 0 && value.length <= 8192 ? value : null;
}

/** The gateway signs the path it forwards, without the query (which no decision reads). */
function targetOf(request: HostRequest): RequestTarget {
  const url = request.originalUrl ?? request.url;
  if (typeof url !== 'string') return { method: request.method ?? null, path: null };
  const query = url.indexOf('?');
  return { method: request.method ?? null, path: query < 0 ? url : url.slice(0, query) };
}
