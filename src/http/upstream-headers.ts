/*
 * The headers the host receives (docs/http-contract.md). The host trusts X-IAM-* and X-Forwarded-* because
 * the gateway sits in front of it, so everything a client could use to forge, hide or reinterpret them
 * is removed here, in one pass over `req.rawHeaders` with one Map lookup per header.
 */
import { hostCookie } from './host-cookie';

/** What {@link buildUpstreamHeaders} needs to know about one authorized request. */
export interface UpstreamHeaderInput {
  /** `req.rawHeaders`. */
  rawHeaders: string[];
  /** `req.socket.remoteAddress`. */
  remoteAddress: string;
  /** The remote address is a configured trusted proxy (`iam.forward.trusted-proxies`). */
  trustedProxy: boolean;
  protocol: 'http' | 'https';
  /** The request's Host header. */
  host: string | undefined;
  requestId: string;
  /** True when Authorization carried the gateway's own bearer token. */
  stripAuthorization: boolean;
  /** X-IAM-* headers to add, already built by the caller. */
  identity: ReadonlyArray<readonly [string, string]> | null;
}

export interface UpstreamHeaderOptions {
  /**
   * A WebSocket handshake (RFC 6455 §4.1) that was authorized: keep the client's `Upgrade` and send
   * `Connection: upgrade`. (`Sec-WebSocket-*` headers are end-to-end and always passed through.)
   */
  keepUpgrade?: boolean;
}

const PASS = 0;
const DROP = 1;
const CONNECTION = 2;
const UPGRADE = 3;
const AUTHORIZATION = 4;
const FORWARDED_FOR = 5;
const FORWARDED_PROTO = 6;
const FORWARDED_HOST = 7;
/** Other forwarding headers: kept from a trusted proxy, dropped otherwise. */
const FORWARDING = 8;
const COOKIE = 9;

/** Kept only from `iam.forward.trusted-proxies`; from any other client they are dropped. */
export const CLIENT_ADDRESS_HEADERS: readonly string[] = [
  'true-client-ip', // Akamai, Cloudflare Enterprise
  'x-client-ip',
  'cf-connecting-ip', // Cloudflare
  'cf-connecting-ipv6',
  'client-ip',
  'x-cluster-client-ip', // Rackspace, Riverbed
  'fastly-client-ip', // Fastly
  'fly-client-ip', // Fly.io
  'x-appengine-user-ip', // Google App Engine
  'x-azure-clientip', // Azure Front Door
  'x-azure-socketip',
  'x-nf-client-connection-ip', // Netlify
  'x-vercel-forwarded-for', // Vercel
  'x-envoy-external-address', // Envoy
  'x-proxyuser-ip',
  'x-originating-ip',
  'x-remote-ip',
  'x-remote-addr',
  'x-original-remote-addr',
  'x-original-forwarded-for',
  'forwarded-for',
  'wl-proxy-client-ip', // WebLogic
  'proxy-client-ip',
  'x-original-host',
  'x-host',
  'x-http-host-override',
  'x-forwarded',
];

/** Lower-case name → what to do with it. Built once; names with `_`, `x-iam-*`, `x-forwarded-*` are prefix checks. */
const HEADER_CLASS: ReadonlyMap<string, number> = new Map<string, number>([
  // RFC 9110 §7.6.1 hop-by-hop fields, plus Proxy-Authorization/-Authenticate (§11.7: meant for this hop).
  ['connection', CONNECTION],
  ['keep-alive', DROP],
  ['proxy-connection', DROP],
  ['te', DROP],
  ['trailer', DROP],
  ['transfer-encoding', DROP],
  ['upgrade', UPGRADE],
  ['proxy-authorization', DROP],
  ['proxy-authenticate', DROP],
  // The caller sets the upstream Host; the original goes in X-Forwarded-Host.
  ['host', DROP],
  // The gateway answers 100-continue itself, after authorizing (docs/http-contract.md).
  ['expect', DROP],
  // Replaced by the gateway's own request id.
  ['x-request-id', DROP],
  // Headers some frameworks read as the "real" URL (IIS/Symfony/Laravel), bypassing the path we authorized.
  ['x-original-url', DROP],
  ['x-rewrite-url', DROP],
  // CVE-2025-29927: Next.js skips its middleware when this is present.
  ['x-middleware-subrequest', DROP],
  // Method override: the host would run a different method than the one authorized.
  ['x-http-method-override', DROP],
  ['x-http-method', DROP],
  ['x-method-override', DROP],
  ['authorization', AUTHORIZATION],
  ['cookie', COOKIE],
  ['x-forwarded-for', FORWARDED_FOR],
  ['x-forwarded-proto', FORWARDED_PROTO],
  ['x-forwarded-host', FORWARDED_HOST],
  ['forwarded', FORWARDING],
  ['x-real-ip', FORWARDING],
  // Client-address and original-host headers that CDNs, load balancers and frameworks read as the truth
  // (rate limits, allow-lists, audit, absolute URLs): only a trusted proxy may state them.
  ...CLIENT_ADDRESS_HEADERS.map((name) => [name, FORWARDING] as [string, number]),
]);

/**
 * Names a client's `Connection` header can never remove: framing fields and every field the gateway
 * decides (the `Connection: x-iam-user-id` trick). Prefixes `x-iam-` and `x-forwarded-` are checked too.
 */
const CONNECTION_PROTECTED: ReadonlySet<string> = new Set(['content-length', 'content-type', 'host', 'forwarded', 'x-real-ip', 'x-request-id', ...CLIENT_ADDRESS_HEADERS]);

/**
 * Adds the tokens of a Connection header value (RFC 9110 §7.6.1: `#connection-option`), lower case, that
 * still need removing; allocates only when there is one (`Connection: keep-alive` needs none).
 */
function addConnectionTokens(value: string, into: string[] | null): string[] | null {
  let start = 0;
  while (start <= value.length) {
    let end = value.indexOf(',', start);
    if (end < 0) end = value.length;
    const token = value.slice(start, end).trim().toLowerCase();
    start = end + 1;
    if (token === '' || CONNECTION_PROTECTED.has(token)) continue;
    if (token.startsWith('x-iam-') || token.startsWith('x-forwarded-')) continue;
    // `upgrade` is kept for a WebSocket handshake and dropped otherwise; `keep-alive`, `te`... are always
    // dropped; `close` names no field. None of them needs the filtering pass.
    const known = HEADER_CLASS.get(token);
    if (known === DROP || known === UPGRADE || known === CONNECTION || token === 'close') continue;
    (into ??= []).push(token);
  }
  return into;
}

/** `::ffff:10.1.2.3` → `10.1.2.3` (IPv4-mapped IPv6, RFC 4291 §2.5.5.2), anything else unchanged. */
export function unmapIpv4(address: string): string {
  return address.length > 7 && address.slice(0, 7).toLowerCase() === '::ffff:' && address.includes('.', 7) ? address.slice(7) : address;
}

/**
 * Builds the flat `[name, value, ...]` header list sent to the host (undici accepts it as is).
 * Client header names keep their case; added headers use canonical case.
 */
export function buildUpstreamHeaders(input: UpstreamHeaderInput, options?: UpstreamHeaderOptions): string[] {
  const raw = input.rawHeaders;
  const trusted = input.trustedProxy;
  const keepUpgrade = options?.keepUpgrade === true;
  const out: string[] = [];
  let connectionTokens: string[] | null = null;
  let forwardedFor: string | null = null;
  let sawProto = false;
  let sawHost = false;
  let keptUpgrade = false;

  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    const lower = name.toLowerCase();
    let kind = HEADER_CLASS.get(lower);
    if (kind === undefined) {
      // Names containing '_' alias '-' in CGI-style hosts (nginx, PHP, WSGI): X_IAM_User_Id would become X-IAM-User-Id.
      if (lower.startsWith('x-iam-') || lower.includes('_')) continue;
      kind = lower.startsWith('x-forwarded-') ? FORWARDING : PASS;
    }
    switch (kind) {
      case PASS:
        break;
      case DROP:
        continue;
      case CONNECTION:
        connectionTokens = addConnectionTokens(value, connectionTokens);
        continue;
      case UPGRADE:
        if (!keepUpgrade) continue;
        keptUpgrade = true;
        break;
      case AUTHORIZATION:
        if (input.stripAuthorization) continue;
        break;
      case COOKIE: {
        // The gateway's own cookies (session, OpenID Connect state) never reach the host.
        const kept = hostCookie(value);
        if (kept === '') continue;
        out.push(name, kept);
        continue;
      }
      case FORWARDED_FOR:
        // RFC 9110 §5.3: several field lines are one comma-separated list.
        if (trusted) forwardedFor = forwardedFor === null ? value : `${forwardedFor}, ${value}`;
        continue;
      case FORWARDED_PROTO:
        if (!trusted) continue;
        sawProto = true;
        break;
      case FORWARDED_HOST:
        if (!trusted) continue;
        sawHost = true;
        break;
      case FORWARDING:
        if (!trusted) continue;
        break;
      default:
        continue;
    }
    out.push(name, value);
  }

  if (connectionTokens !== null) removeConnectionNamed(out, connectionTokens);

  const client = unmapIpv4(input.remoteAddress);
  out.push('X-Forwarded-For', forwardedFor === null ? client : `${forwardedFor}, ${client}`);
  if (!sawProto) out.push('X-Forwarded-Proto', input.protocol);
  if (!sawHost && input.host !== undefined) out.push('X-Forwarded-Host', input.host);
  out.push('X-Request-Id', input.requestId);
  if (keptUpgrade) out.push('Connection', 'upgrade');
  if (input.identity !== null) {
    for (const [name, value] of input.identity) out.push(name, value);
  }
  return out;
}

/** Removes, in place, the passed-through client headers a `Connection` header named (RFC 9110 §7.6.1). */
function removeConnectionNamed(headers: string[], tokens: readonly string[]): void {
  let write = 0;
  for (let read = 0; read + 1 < headers.length; read += 2) {
    const name = headers[read] as string;
    if (tokens.includes(name.toLowerCase())) continue;
    headers[write] = name;
    headers[write + 1] = headers[read + 1] as string;
    write += 2;
  }
  headers.length = write;
}
