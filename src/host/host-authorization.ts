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

export interface HostAuthorizationOptions {
  /** The gateway as the host can reach it, e.g. `http://iam-gateway:8080` (its JWKS and decision endpoints). */
  gatewayUrl: string;
  /** `iam.forward.assertion.issuer`. */
  issuer: string;
  /** `iam.forward.assertion.audience`, when the gateway sets one (then it is required). */
  audience?: string;
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
  /** Resolves when allowed; rejects with a {@link HostAuthorizationError} (403 problem carrying `decisionId`) otherwise. */
  require(check: HostCheck): Promise<void>;
  plan(permissionCode: string, resourceType: string, access?: AccessMode): Promise<HostPlan>;
}

export interface HostAuthorization {
  /** The principal of a request's `X-IAM-Assertion` (verified: signature by the gateway's key, `iss`, `aud`, `exp`). */
  principal(headers: IncomingHttpHeaders): Promise<HostPrincipal | null>;
  forRequest(headers: IncomingHttpHeaders): RequestAuthorization;
}

const MAX_CACHED = 10_000;

/** The client of the gateway's decision endpoints for one Node host (see the module comment of index.ts). */
export function createHostAuthorization(options: HostAuthorizationOptions): HostAuthorization {
  const base = options.gatewayUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 5000;
  // jose keeps the gateway's keys, refetching on an unknown key id (with its own cooldown).
  const keys = createRemoteJWKSet(new URL(`${base}/iam/.well-known/jwks.json`), { timeoutDuration: timeoutMs, ...(options.fetch ? { [customFetch]: options.fetch } : {}) });
  // A verified assertion is remembered until it expires: a host asks several times per request.
  const verified = new Map<string, { principal: HostPrincipal; expiresAtMs: number }>();

  async function principalOf(assertion: string): Promise<HostPrincipal | null> {
    const cached = verified.get(assertion);
    if (cached && cached.expiresAtMs > Date.now()) return cached.principal;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(assertion, keys, { issuer: options.issuer, algorithms: ['EdDSA'], requiredClaims: ['exp', 'sub', 'sid'], ...(options.audience ? { audience: options.audience } : {}) }));
    } catch {
      return null;
    }
    const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);
    const principal: HostPrincipal = {
      userId: String(payload.sub),
      sessionId: String(payload.sid),
      identityId: text(payload.identity_id),
      identityDomain: text(payload.identity_domain),
      profileId: text(payload.profile_id),
      permission: text(payload.permission),
      decisionId: text(payload.decision_id),
      assertion,
    };
    if (verified.size >= MAX_CACHED) verified.delete(verified.keys().next().value as string);
    verified.set(assertion, { principal, expiresAtMs: (payload.exp as number) * 1000 });
    return principal;
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

  const assertionOf = (headers: IncomingHttpHeaders): string | null => {
    const value = headers['x-iam-assertion'];
    return typeof value === 'string' && value.length > 0 && value.length <= 8192 ? value : null;
  };
  const unauthenticated = (): HostAuthorizationError =>
    new HostAuthorizationError(401, { status: 401, title: 'Unauthenticated', code: 'IAM_UNAUTHENTICATED', detail: 'The request carries no valid X-IAM-Assertion from the gateway.' });

  return {
    principal: (headers) => {
      const assertion = assertionOf(headers);
      return assertion === null ? Promise.resolve(null) : principalOf(assertion);
    },
    forRequest(headers) {
      const assertion = assertionOf(headers);
      let pending: Array<{ check: HostCheck; resolve: (result: HostCheckResult) => void; reject: (error: unknown) => void }> = [];
      const flush = async (): Promise<void> => {
        const batch = pending;
        pending = [];
        try {
          if (assertion === null) throw unauthenticated();
          const answer = await call<{ results: HostCheckResult[] }>('/iam/authorization/check', assertion, { checks: batch.map((entry) => entry.check) });
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
        principal: () => (assertion === null ? Promise.resolve(null) : principalOf(assertion)),
        check,
        async require(one) {
          const result = await checkOne(one);
          if (result.allowed) return;
          throw new HostAuthorizationError(403, {
            type: 'https://iam-gateway.dev/problems/iam-access-denied',
            title: 'Access denied',
            status: 403,
            code: 'IAM_ACCESS_DENIED',
            detail: `${one.permissionCode}${one.resource ? ` on ${one.resource.type} ${one.resource.id}` : ''} is not allowed (${result.failedStep ?? 'denied'}).`,
            decisionId: result.decisionId,
            step: result.failedStep,
          });
        },
        async plan(permissionCode, resourceType, access = 'READ') {
          if (assertion === null) throw unauthenticated();
          return call<HostPlan>('/iam/authorization/plan', assertion, { permissionCode, resourceType, access });
        },
      };
    },
  };
}
