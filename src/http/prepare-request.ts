import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ProblemError, problems } from '../domain/problem';
import { isWellFormedToken } from '../domain/token-hash';
import { clientAddressOf } from './client-address';
import { inspectRequestHeaders } from './inbound-headers';
import type { TrustedProxyCheck } from './trusted-proxies';
import { normalizeRequestTarget } from './normalize-target';

/**
 * What is known of a request refused before it was interpreted (400 IAM_BAD_REQUEST, 414), for the access log and
 * its span: security logging includes refusals.
 */
export interface RefusedRequest {
  requestId: string;
  method: string;
  /** The target's path as sent, without the query (it may carry a token), cut at {@link REFUSED_PATH_MAX} characters. */
  path: string;
  clientAddress: string | null;
  trustedPeer: boolean;
}

/** A refused target is logged up to this length (a 414's is longer by definition). */
export const REFUSED_PATH_MAX = 1024;

/** A request the gateway agreed to interpret: everything after this step sees only these values. */
export interface PreparedRequest {
  requestId: string;
  method: string;
  /** Normalized path (docs/http-contract.md): what is matched, authorized and forwarded. */
  path: string;
  /** Original query with its `?`, or ''. */
  search: string;
  /** The single Authorization header, if any. */
  authorization: string | null;
  /** The client's IP address (the trusted-proxy rule of {@link clientAddressOf}); null when unknown. */
  clientAddress: string | null;
  /**
   * The host the client addressed ({@link addressedHost}): `http(s)://` + this is the gateway's own origin for the
   * CSRF rule (http/csrf.ts); null when unknown.
   */
  host: string | null;
  /**
   * The connection comes from a trusted proxy (`iam.forward.trusted-proxies`): what it says about the request
   * (`X-Forwarded-For`, `X-Request-Id`, the trace context it continues) is vouched for.
   */
  trustedPeer: boolean;
  /**
   * The session token of the gateway's session cookie (`PrepareOptions.sessionCookie`), when the request carries
   * exactly one; with it, what a CSRF check needs (docs/http-contract.md).
   */
  cookieSession: CookieSession | null;
}

/** A session cookie and the request's browser context. */
export interface CookieSession {
  token: string;
  /** `Origin`, when sent. */
  origin: string | null;
  /** `Sec-Fetch-Site` (`same-origin`, `same-site`, `cross-site`, `none`), when sent. */
  fetchSite: string | null;
  /** {@link PreparedRequest.host}: the gateway's own origin is `http(s)://` + this. */
  host: string | null;
}

export interface PrepareOptions {
  allowPathParameters: boolean;
  maxUrlLength: number;
  /** `iam.forward.trusted-proxies`: whose X-Forwarded-For names the client. */
  isTrustedProxy?: TrustedProxyCheck;
  /** The name of the session cookie (`__Host-iam-session`, or `iam-session` when not secure); absent: none read. */
  sessionCookie?: string;
}

/**
 * The proxy's reading of a request target, and its refusals (414 IAM_URI_TOO_LONG, 400 IAM_BAD_REQUEST):
 * the one rule shared by proxied requests and forward-auth (`X-Forwarded-Uri`), so both judge the same path.
 */
export function interpretRequestTarget(
  rawTarget: string,
  host: string | undefined,
  options: PrepareOptions,
): { ok: true; path: string; search: string } | { ok: false; problem: ProblemError } {
  if (rawTarget.length > options.maxUrlLength) {
    return { ok: false, problem: new ProblemError('IAM_URI_TOO_LONG', `The request target is longer than ${options.maxUrlLength} bytes.`) };
  }
  const target = normalizeRequestTarget(rawTarget, { allowPathParameters: options.allowPathParameters, host });
  if (!target.ok) return { ok: false, problem: problems.badRequest(target.reason) };
  return target;
}

/**
 * The first step of every request, `/iam` and proxied alike: refuse what cannot be interpreted safely
 * (400 IAM_BAD_REQUEST, 414), then normalize the target once.
 */
export function prepareRequest(req: IncomingMessage, options: PrepareOptions): { ok: true; request: PreparedRequest } | { ok: false; problem: ProblemError; refused: RefusedRequest } {
  const trustedPeer = options.isTrustedProxy?.(req.socket.remoteAddress) ?? false;
  const requestId = (trustedPeer ? forwardedRequestId(req) : null) ?? randomUUID();
  const clientAddress = clientAddressOf(req.socket.remoteAddress, req.headers['x-forwarded-for'], options.isTrustedProxy ?? (() => false));
  const rawTarget = req.url ?? '';
  const refuse = (problem: ProblemError): { ok: false; problem: ProblemError; refused: RefusedRequest } => ({
    ok: false,
    problem,
    refused: { requestId, method: req.method ?? 'GET', path: refusedPath(rawTarget), clientAddress, trustedPeer },
  });
  if (rawTarget.length > options.maxUrlLength) return refuse(new ProblemError('IAM_URI_TOO_LONG', `The request target is longer than ${options.maxUrlLength} bytes.`));
  // RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400 (the server's own check is off so that the
  // answer is a problem body like every other error).
  if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) return refuse(problems.badRequest('An HTTP/1.1 request needs a Host header.'));
  const inspected = inspectRequestHeaders(req.rawHeaders);
  if (!inspected.ok) return refuse(problems.badRequest(inspected.reason));
  const target = interpretRequestTarget(rawTarget, req.headers.host, options);
  if (!target.ok) return refuse(target.problem);
  const host = addressedHost(req, options.isTrustedProxy);
  return {
    ok: true,
    request: {
      requestId,
      method: req.method ?? 'GET',
      path: target.path,
      search: target.search,
      authorization: inspected.authorization,
      clientAddress,
      host,
      trustedPeer,
      cookieSession: options.sessionCookie !== undefined && req.headers.cookie !== undefined ? cookieSessionOf(req, options.sessionCookie, host) : null,
    },
  };
}

/** The path part of a refused target (an absolute-form target keeps its origin), bounded. */
function refusedPath(target: string): string {
  const query = target.indexOf('?');
  const path = query < 0 ? target : target.slice(0, query);
  return path.length > REFUSED_PATH_MAX ? `${path.slice(0, REFUSED_PATH_MAX)}…` : path;
}

/**
 * What a kept request id may look like: 1–128 characters of letters, digits and `._:+=@/-` (UUIDs, nginx's
 * `$request_id`, Envoy's and most tracing ids); never a comma (two headers joined), space or control character.
 */
export const REQUEST_ID_PATTERN = '^[A-Za-z0-9._:+=@/-]{1,128}$';
const REQUEST_ID = new RegExp(REQUEST_ID_PATTERN);

/**
 * The `X-Request-Id` a trusted proxy (`iam.forward.trusted-proxies`; the caller checks) set, so one id follows the
 * request along the proxy chain (docs/http-contract.md); null (a new id) for one that is not a single valid id.
 */
function forwardedRequestId(req: IncomingMessage): string | null {
  const given = req.headers['x-request-id'];
  if (typeof given !== 'string') return null;
  return REQUEST_ID.test(given) ? given : null;
}

/**
 * The value of the one `name` cookie of the request (RFC 6265 §5.4), or null when there is none, more than one
 * (cookie tossing: a second cookie of the same name set for a parent domain is not guessed between), or its value
 * is not a well-formed gateway token.
 */
function cookieSessionOf(req: IncomingMessage, name: string, host: string | null): CookieSession | null {
  const header = req.headers.cookie!;
  if (!header.includes(name)) return null;
  let token: string | null = null;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at < 0 || pair.slice(0, at).trim() !== name) continue;
    if (token !== null) return null;
    token = pair.slice(at + 1).trim();
  }
  // A value that is not a gateway token is no session cookie (the request is anonymous, as without one).
  if (token === null || !isWellFormedToken(token)) return null;
  const fetchSite = req.headers['sec-fetch-site'];
  return { token, origin: req.headers.origin ?? null, fetchSite: typeof fetchSite === 'string' ? fetchSite : null, host };
}

/** One host with an optional port (RFC 3986 §3.2.2: an IP literal in brackets, or a registered name). */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::[0-9]{1,5})?$/;

/**
 * The host the client addressed: `X-Forwarded-Host` when a trusted proxy (`iam.forward.trusted-proxies`) sent one,
 * else `Host`. A proxy in front may rewrite `Host` (nginx's auth subrequest arrives with its upstream's name), and
 * states the original in `X-Forwarded-Host` — the same header the host receives as the original (upstream-headers.ts).
 * From anyone else the header is ignored: a client cannot choose which origin counts as the gateway's own. From a
 * trusted proxy, a value that is not one host (a list, two lines, anything else) is null, so no origin is the
 * gateway's own rather than a guessed one (a cookie-authenticated unsafe request with an `Origin` is then refused).
 */
function addressedHost(req: IncomingMessage, isTrustedProxy: TrustedProxyCheck | undefined): string | null {
  const host = req.headers.host ?? null;
  const forwarded = req.headers['x-forwarded-host'];
  // Checked only when the header is there: most requests pay nothing for it.
  if (forwarded === undefined || isTrustedProxy === undefined || !isTrustedProxy(req.socket.remoteAddress)) return host;
  // Node joins repeated lines with `, ` (a list, refused below); the type allows an array, refused as well.
  const value = typeof forwarded === 'string' ? forwarded.trim() : '';
  return HOST.test(value) ? value : null;
}

/** True when a normalized path belongs to the gateway's own endpoints. */
export function isIamPath(path: string): boolean {
  return path === '/iam' || path.startsWith('/iam/');
}

/** The front door attaches the prepared request to the Node request before handing it to the /iam app. */
export const PREPARED_REQUEST = Symbol('iam-gateway.prepared-request');

export type RequestWithPrepared = IncomingMessage & { [PREPARED_REQUEST]?: PreparedRequest };
