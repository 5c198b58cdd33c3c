/**
 * A real OpenID Provider for tests: oidc-provider 9 in its own `node` process (it is ESM-only; see
 * oidc-op/server.mjs for what it serves), on 127.0.0.1 with a fresh RSA signing key, plus browserless drivers
 * for its login and logout pages (Node fetch with a small cookie jar) and a signer for forged tokens.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK, type JWTHeaderParameters } from 'jose';

const ROOT = join(__dirname, '..', '..');
const SERVER_SCRIPT = join(ROOT, 'examples', 'oidc-provider', 'server.mjs');
const START_TIMEOUT_MS = 20_000;
const MAX_HOPS = 20;

/** Client metadata as oidc-provider takes it (RFC 7591 / OIDC registration names). */
export interface ClientMetadata {
  client_id: string;
  client_secret?: string;
  redirect_uris?: string[];
  post_logout_redirect_uris?: string[];
  backchannel_logout_uri?: string;
  backchannel_logout_session_required?: boolean;
  grant_types?: string[];
  response_types?: string[];
  token_endpoint_auth_method?: string;
  /** Space-separated scopes the client may request (client_credentials: which it may get). */
  scope?: string;
  [other: string]: unknown;
}

/** An end-user of the OP, keyed by login name in `accounts`; `claims` are filtered by the granted scopes. */
export interface Account {
  sub: string;
  password: string;
  claims?: Record<string, unknown>;
}

export const DEFAULT_ACCOUNTS: Record<string, Account> = {
  alice: { sub: 'alice', password: 'alice-password', claims: { email: 'alice@example.test', name: 'Alice', groups: ['editors'] } },
  bob: { sub: 'bob', password: 'bob-password', claims: { email: 'bob@example.test', name: 'Bob', groups: ['viewers'] } },
};

export interface TestOpOptions {
  clients: ClientMetadata[];
  /** Default: DEFAULT_ACCOUNTS (alice/alice-password, bob/bob-password). */
  accounts?: Record<string, Account>;
  /** Default 300. */
  idTokenTtlSeconds?: number;
  /**
   * A resource indicator (e.g. `https://api.example.test`) for which the OP issues JWT access tokens
   * (`aud` = it, RS256 with the OP's key, 300 s): an authorization (and client_credentials) with
   * `resource=` it. Its scopes are `resourceScope`. Unset: resource indicators are off, access tokens opaque.
   */
  resourceAudience?: string;
  /** The resource's scopes (space-separated); default `api:read api:write`. */
  resourceScope?: string;
}

export interface TestOp {
  /** `http://127.0.0.1:PORT` (the discovery document is at `${issuer}/.well-known/openid-configuration`). */
  issuer: string;
  /** The OP's signing keys, private parts included (one RS256 key). */
  jwks: { keys: JWK[] };
  /** The OP process id. */
  pid: number;
  /** What the OP process wrote to stderr so far (oidc-provider warnings, back-channel failures). */
  output(): string;
  /** Ends the OP process and waits for its exit. */
  close(): Promise<void>;
  /**
   * Drives a browserless login: GETs `authorizationUrl` (an OP authorization URL the gateway produced),
   * follows redirects to the interaction, posts the login form with `username`/`password`, and follows
   * redirects until one goes to a URL starting with `stopAt` (the RP's callback), which it returns (with
   * code and state, or an OAuth error) without requesting it. The OP's cookies live in `jar` (a new one when
   * not given; pass the same jar again for SSO or for `logoutThrough`). Throws when the OP shows the login
   * form again (wrong password), an error page, or anything else.
   */
  loginThrough(authorizationUrl: string, username: string, password: string, stopAt: string, jar?: CookieJar): Promise<string>;
  /**
   * Follows an RP-initiated logout URL (end_session, e.g. with id_token_hint and post_logout_redirect_uri)
   * through the OP's confirm form ("Yes, sign me out"), so the OP sends its back-channel logout tokens
   * (it awaits them before answering); returns the confirm's redirect URL (the post_logout_redirect_uri with
   * state, or the OP's own success page) without requesting it.
   */
  logoutThrough(endSessionUrl: string, jar: CookieJar): Promise<string>;
  /**
   * Signs exactly `claims` (nothing added) as a JWS. The header defaults to `{ alg: 'RS256', kid }` of the
   * OP's key; `header` is merged over it (e.g. `{ typ: 'logout+jwt' }`); `key` (a private JWK) signs instead
   * of the OP's key — for forged or expired logout tokens and JWT access tokens.
   */
  sign(claims: Record<string, unknown>, header?: Partial<JWTHeaderParameters>, key?: JWK): Promise<string>;
  /** A client_credentials access token for `resource` (a JWT with `aud` = resource when it is `resourceAudience`). */
  clientCredentialsToken(clientId: string, clientSecret: string, resource: string, scope?: string): Promise<string>;
}

interface StoredCookie {
  name: string;
  value: string;
  host: string;
  path: string;
  /** Epoch ms; undefined for a session cookie. */
  expires?: number;
}

/**
 * A cookie jar for fetch: keeps what `Set-Cookie` said per host, path and name, and sends back the cookies
 * whose path matches a request (longest path first). Domain, Secure and SameSite are ignored (everything is
 * http://127.0.0.1), which is enough for oidc-provider's `_session`, `_interaction` (path
 * /interaction/<uid>) and `_interaction_resume` (path /auth/<uid>) and their `.sig` companions.
 */
export class CookieJar {
  private readonly cookies = new Map<string, StoredCookie>();

  /** Stores the `Set-Cookie` headers of `response` to a request for `url`. */
  store(url: string, response: Response): void {
    for (const header of response.headers.getSetCookie()) this.storeHeader(url, header);
  }

  /** Stores one `Set-Cookie` header value received from `url`; an expired or emptied cookie is removed. */
  storeHeader(url: string, header: string): void {
    const { hostname, pathname } = new URL(url);
    const [pair, ...attributes] = header.split(';');
    const eq = pair.indexOf('=');
    if (eq <= 0) return;
    const cookie: StoredCookie = { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), host: hostname, path: defaultPath(pathname) };
    for (const attribute of attributes) {
      const [rawName, ...rest] = attribute.split('=');
      const name = rawName.trim().toLowerCase();
      const value = rest.join('=').trim();
      if (name === 'path' && value.startsWith('/')) cookie.path = value;
      else if (name === 'max-age') cookie.expires = Date.now() + Number(value) * 1000;
      else if (name === 'expires' && cookie.expires === undefined) cookie.expires = Date.parse(value);
    }
    const key = `${cookie.host} ${cookie.path} ${cookie.name}`;
    if (cookie.value === '' || (cookie.expires !== undefined && !(cookie.expires > Date.now()))) this.cookies.delete(key);
    else this.cookies.set(key, cookie);
  }

  /** The `Cookie` header for a request to `url` ('' when no cookie applies). */
  header(url: string): string {
    const { hostname, pathname } = new URL(url);
    return this.matching(hostname, pathname)
      .map((cookie) => `${cookie.name}=${cookie.value}`)
      .join('; ');
  }

  /** The value of cookie `name` that a request to `url` would carry (any path when no url is given). */
  get(name: string, url?: string): string | undefined {
    const candidates = url ? this.matching(new URL(url).hostname, new URL(url).pathname) : this.live();
    return candidates.find((cookie) => cookie.name === name)?.value;
  }

  /** Names of all live cookies (for assertions and failure messages). */
  names(): string[] {
    return this.live().map((cookie) => cookie.name);
  }

  clear(): void {
    this.cookies.clear();
  }

  private live(): StoredCookie[] {
    const now = Date.now();
    return [...this.cookies.values()].filter((cookie) => cookie.expires === undefined || cookie.expires > now);
  }

  private matching(hostname: string, pathname: string): StoredCookie[] {
    return this.live()
      .filter((cookie) => cookie.host === hostname && pathMatches(cookie.path, pathname))
      .sort((a, b) => b.path.length - a.path.length);
  }
}

/** RFC 6265 5.1.4: the request path's directory. */
function defaultPath(pathname: string): string {
  const slash = pathname.lastIndexOf('/');
  return slash <= 0 ? '/' : pathname.slice(0, slash);
}

function pathMatches(cookiePath: string, requestPath: string): boolean {
  if (requestPath === cookiePath) return true;
  if (!requestPath.startsWith(cookiePath)) return false;
  return cookiePath.endsWith('/') || requestPath[cookiePath.length] === '/';
}

/** A form of an HTML page: its action (absolute), method, and the named inputs' values. */
interface ParsedForm {
  action: string;
  method: string;
  fields: Record<string, string>;
}

const decodeEntities = (text: string): string =>
  text.replace(/&(amp|lt|gt|quot|#39|#x27);/g, (_, entity: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'" })[entity]!);

const attribute = (tag: string, name: string): string | undefined => {
  const match = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, 'i').exec(tag);
  return match ? decodeEntities(match[1] ?? match[2] ?? match[3] ?? '') : undefined;
};

/**
 * The first form of `html` (pages here are the OP's own, so a regex reader is enough): action resolved
 * against `pageUrl`, and every `<input name=…>` inside it with its value.
 */
function parseForm(html: string, pageUrl: string): ParsedForm | undefined {
  const match = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(html);
  if (!match) return undefined;
  const fields: Record<string, string> = {};
  for (const input of match[2].match(/<input\b[^>]*>/gi) ?? []) {
    const name = attribute(input, 'name');
    if (name) fields[name] = attribute(input, 'value') ?? '';
  }
  return {
    action: new URL(attribute(match[1], 'action') ?? pageUrl, pageUrl).href,
    method: (attribute(match[1], 'method') ?? 'get').toUpperCase(),
    fields,
  };
}

/** The text of a page for an error message: tags dropped, whitespace collapsed, cut at 500 characters. */
const pageText = (html: string): string =>
  decodeEntities(html.replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ').replace(/<[^>]+>/g, ' '))
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 500);

/** One request without following redirects; the jar sends and keeps the cookies. */
async function send(jar: CookieJar, url: string, form?: Record<string, string>): Promise<Response> {
  const headers: Record<string, string> = { accept: 'text/html' };
  const cookie = jar.header(url);
  if (cookie) headers.cookie = cookie;
  if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const response = await fetch(url, {
    method: form ? 'POST' : 'GET',
    headers,
    body: form ? new URLSearchParams(form).toString() : undefined,
    redirect: 'manual',
    signal: AbortSignal.timeout(10_000),
  });
  jar.store(url, response);
  return response;
}

const isRedirect = (status: number): boolean => status >= 300 && status < 400;

export async function loginThrough(authorizationUrl: string, username: string, password: string, stopAt: string, jar: CookieJar): Promise<string> {
  let url = authorizationUrl;
  let form: Record<string, string> | undefined;
  let posted = false;
  for (let hop = 0; hop < MAX_HOPS; hop++) {
    if (url.startsWith(stopAt)) return url;
    const response = await send(jar, url, form);
    form = undefined;
    const location = response.headers.get('location');
    if (isRedirect(response.status) && location) {
      await response.body?.cancel();
      url = new URL(location, url).href;
      continue;
    }
    const html = await response.text();
    const login = response.status === 200 ? parseForm(html, url) : undefined;
    if (login && 'login' in login.fields && 'password' in login.fields) {
      if (posted) throw new Error(`the OP refused the login of "${username}" (the login form again): ${pageText(html)}`);
      form = { ...login.fields, login: username, password };
      url = login.action;
      posted = true;
      continue;
    }
    throw new Error(`loginThrough: unexpected ${response.status} from ${url}: ${pageText(html)}`);
  }
  throw new Error(`loginThrough: more than ${MAX_HOPS} hops without reaching ${stopAt}`);
}

async function logoutThrough(endSessionUrl: string, jar: CookieJar): Promise<string> {
  let url = endSessionUrl;
  let form: Record<string, string> | undefined;
  let confirmed = false;
  for (let hop = 0; hop < MAX_HOPS; hop++) {
    const response = await send(jar, url, form);
    form = undefined;
    const location = response.headers.get('location');
    if (isRedirect(response.status) && location) {
      await response.body?.cancel();
      const next = new URL(location, url).href;
      // The confirm's redirect is the answer; an earlier one (none today) is followed.
      if (confirmed) return next;
      url = next;
      continue;
    }
    const html = await response.text();
    const confirm = response.status === 200 && !confirmed ? parseForm(html, url) : undefined;
    if (confirm && 'xsrf' in confirm.fields && confirm.method === 'POST') {
      // The confirm page's "Yes, sign me out" is `logout=yes` (the self-submitting form without a
      // session carries it already).
      form = { ...confirm.fields, logout: 'yes' };
      url = confirm.action;
      confirmed = true;
      continue;
    }
    throw new Error(`logoutThrough: unexpected ${response.status} from ${url}: ${pageText(html)}`);
  }
  throw new Error(`logoutThrough: more than ${MAX_HOPS} hops`);
}

/**
 * Starts an OP for `options.clients` and resolves once it listens. Call `close()` in afterAll; an OP whose
 * test process died exits by itself (its stdin ends).
 */
export async function startTestOp(options: TestOpOptions): Promise<TestOp> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const key: JWK = { ...(await exportJWK(privateKey)), kid: `op-${Date.now().toString(36)}`, alg: 'RS256', use: 'sig' };
  const jwks = { keys: [key] };

  // The config holds the private key: a directory of our own, removed as soon as the OP has read it.
  const dir = mkdtempSync(join(tmpdir(), 'iam-oidc-op-'));
  const configFile = join(dir, 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      port: 0,
      jwks,
      clients: options.clients,
      accounts: options.accounts ?? DEFAULT_ACCOUNTS,
      idTokenTtlSeconds: options.idTokenTtlSeconds ?? 300,
      ...(options.resourceAudience ? { resourceIndicators: { audience: options.resourceAudience, scope: options.resourceScope ?? 'api:read api:write' } } : {}),
    }),
    { mode: 0o600 },
  );

  // Jest's NODE_OPTIONS (if any) are not for a plain ESM child.
  const { NODE_OPTIONS: _nodeOptions, ...env } = process.env;
  const child = spawn(process.execPath, [SERVER_SCRIPT, configFile], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-64 * 1024);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  let issuer: string;
  try {
    issuer = await new Promise<string>((resolve, reject) => {
      let stdout = '';
      const timer = setTimeout(() => reject(new Error(`the OIDC test OP did not listen within ${START_TIMEOUT_MS / 1000} s\n--- stderr ---\n${stderr}`)), START_TIMEOUT_MS);
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        const newline = stdout.indexOf('\n');
        if (newline < 0) return;
        clearTimeout(timer);
        try {
          resolve((JSON.parse(stdout.slice(0, newline)) as { issuer: string }).issuer);
        } catch {
          reject(new Error(`the OIDC test OP printed ${stdout.slice(0, newline)}\n--- stderr ---\n${stderr}`));
        }
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`the OIDC test OP exited before listening (code ${String(child.exitCode)}, signal ${String(child.signalCode)})\n--- stderr ---\n${stderr}`));
      });
    });
  } catch (error) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw error;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  let tokenEndpoint: string | undefined;
  const discoveredTokenEndpoint = async (): Promise<string> => {
    if (tokenEndpoint) return tokenEndpoint;
    const response = await fetch(`${issuer}/.well-known/openid-configuration`);
    tokenEndpoint = ((await response.json()) as { token_endpoint: string }).token_endpoint;
    return tokenEndpoint;
  };

  return {
    issuer,
    jwks,
    pid: child.pid ?? -1,
    output: () => stderr,
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
    loginThrough: (authorizationUrl, username, password, stopAt, jar = new CookieJar()) => loginThrough(authorizationUrl, username, password, stopAt, jar),
    logoutThrough,
    sign: async (claims, header = {}, signingKey = key) => {
      const alg = header.alg ?? signingKey.alg ?? 'RS256';
      const protectedHeader: JWTHeaderParameters = { ...(signingKey.kid ? { kid: signingKey.kid } : {}), ...header, alg };
      return new SignJWT(claims).setProtectedHeader(protectedHeader).sign(await importJWK(signingKey, alg));
    },
    clientCredentialsToken: async (clientId, clientSecret, resource, scope) => {
      const body = new URLSearchParams({ grant_type: 'client_credentials', resource });
      if (scope) body.set('scope', scope);
      const response = await fetch(await discoveredTokenEndpoint(), {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body,
      });
      const result = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!response.ok || !result.access_token) {
        throw new Error(`client_credentials for ${clientId} failed: ${response.status} ${result.error ?? ''} ${result.error_description ?? ''}`);
      }
      return result.access_token;
    },
  };
}
