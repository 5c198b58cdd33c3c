import { isIP } from 'node:net';
import * as path from 'node:path';
import type { JSONSchemaType } from 'ajv';
import { DURATION_EXAMPLES, SIZE_EXAMPLES, tryParseByteSize, tryParseDuration } from './durations';
import { DATABASES, declaredUrlForms, isDeclaredUrl, TOKEN_STORES } from '../adapters/registry';
import { isLogoutTokenType } from '../auth/oidc/token-types';
import { RULE_NAME_PATTERN, type ClaimCondition, type ProfileRule } from '../auth/oidc/claim-rules';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { authenticatorSchema, toAuthenticatorConfig, type RawAuthenticatorSection } from './authenticator-schema';
import { converted, form, key, typedAs, TYPED, type RawOf, type TypedForm, type TypedOf } from './key-forms';

/** `iam.oidc.allowed` and a profile rule's `when`: a claim that must hold one of `values` (none: be present). */
export interface RawClaimCondition {
  claim: string;
  values: string[];
}

/** One rule of `iam.oidc.profiles` (docs/oidc.md). */
export interface RawProfileRule {
  name: string;
  when: RawClaimCondition[];
  'profile-name'?: string | null;
  'template-version': string;
  'client-types': string[];
  scopes: Array<{ type: string; id?: string | null; claim?: string | null; access: 'READ' | 'WRITE' }>;
  unscoped?: boolean | null;
}

type Duration = string | number;
type ByteSize = string | number;

/** A string format of the schema: how to check it and how to say what was expected. */
export interface ConfigFormat {
  validate: (value: string) => boolean;
  /** Completes "expected …" / "is not …" in error messages. */
  expected: string;
  /** False for values that may carry credentials (database and Redis URLs): never echoed in errors. */
  echo: boolean;
}

const urlWithProtocol =
  (...protocols: string[]) =>
  (value: string): boolean => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return protocols.includes(url.protocol) && url.host !== '';
  };

/** A single address or a CIDR range: what `net.BlockList` accepts (`10.0.0.0/8`, `::1`, `fd00::/8`). */
function isAddressOrRange(value: string): boolean {
  const slash = value.indexOf('/');
  if (slash === -1) return isIP(value) !== 0;
  const family = isIP(value.slice(0, slash));
  const prefix = value.slice(slash + 1);
  if (family === 0 || !/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

/** A C0 control character or DEL. */
const hasControlCharacter = (value: string): boolean => [...value].some((char) => char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f);

/**
 * `iam.ui.logo-url`: an https URL without credentials, or a path on the gateway's own origin (`/` not followed by `/`; no
 * backslash, space or quote anywhere). Never `http:`, `data:` or `javascript:`: the pages' CSP allows images from that origin only.
 */
function isLogoUrl(value: string): boolean {
  if (hasControlCharacter(value) || /[\s"'<>\\]/.test(value)) return false;
  if (value.startsWith('/')) return !value.startsWith('//');
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return url.protocol === 'https:' && url.host !== '' && url.username === '' && url.password === '';
}

/** Every custom `format` the schema uses; `validate-config.ts` registers them with ajv. */
export const CONFIG_FORMATS: Readonly<Record<string, ConfigFormat>> = {
  duration: { validate: (v) => tryParseDuration(v) !== undefined, expected: `a duration (${DURATION_EXAMPLES})`, echo: true },
  'positive-duration': {
    validate: (v) => (tryParseDuration(v) ?? 0) > 0,
    expected: `a duration above zero (${DURATION_EXAMPLES})`,
    echo: true,
  },
  'byte-size': { validate: (v) => (tryParseByteSize(v) ?? 0) > 0, expected: `a size above zero (${SIZE_EXAMPLES})`, echo: true },
  'http-url': { validate: urlWithProtocol('http:', 'https:'), expected: 'an http:// or https:// URL', echo: true },
  // A URL some backend of adapters/registry.ts declares (its scheme, then its own check).
  'postgres-url': { validate: (v) => isDeclaredUrl(v, DATABASES), expected: declaredUrlForms(DATABASES), echo: false },
  'redis-url': { validate: (v) => isDeclaredUrl(v, TOKEN_STORES), expected: declaredUrlForms(TOKEN_STORES), echo: false },
  // `auto` (the numbers are integers: the schema's minimum and maximum bound them).
  'worker-count': { validate: (v) => v === 'auto', expected: 'auto or a whole number of worker processes from 1 to 1024', echo: true },
  'ip-or-cidr': { validate: isAddressOrRange, expected: 'an IP address or CIDR range (10.0.0.0/8, ::1)', echo: true },
  // No glob characters: `tokens purge` deletes `<prefix>:*` with SCAN MATCH, so `*`, `?`, `[` would widen it.
  'store-prefix': {
    validate: (v) => /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(v),
    expected: 'a key prefix of letters, digits, `_`, `.`, `-` (at most 64, no glob characters)',
    echo: true,
  },
  // Unquoted PostgreSQL identifier, at most NAMEDATALEN - 1 = 63 bytes.
  'sql-identifier': {
    validate: (v) => /^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(v),
    expected: 'an SQL identifier (letters, digits, `_`, at most 63)',
    echo: true,
  },
  'client-type': { validate: (v) => /^[A-Z][A-Z0-9_]{0,31}$/.test(v), expected: 'an upper-case identifier such as WEB or API', echo: true },
  'cors-origin': {
    validate: (v) => v === '*' || (URL.canParse(v) && new URL(v).origin === v),
    expected: 'an origin such as https://app.example.com (scheme, host, optional port; no path) or *',
    echo: true,
  },
  origin: {
    validate: (v) => URL.canParse(v) && new URL(v).origin === v,
    expected: 'an origin such as https://app.example.com (scheme, host, optional port; no path)',
    echo: true,
  },
  // Shown on every page the gateway writes for a browser (escaped there): one line of text.
  'page-title': { validate: (v) => v.length <= 100 && !hasControlCharacter(v) && v.trim() !== '', expected: 'one line of text, at most 100 characters', echo: true },
  'logo-url': { validate: isLogoUrl, expected: 'an https:// URL (no credentials) or a path on the gateway such as /static/logo.svg', echo: true },
  secret: { validate: (v) => v.length > 0, expected: 'a non-empty secret', echo: false },
  // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
  'oauth-scope': { validate: (v) => /^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/.test(v), expected: 'an OAuth scope token (no spaces or quotes)', echo: true },
  'claim-name': { validate: (v) => /^[A-Za-z0-9_:./-]{1,200}$/.test(v), expected: 'a claim name such as sub, email or groups', echo: true },
  // RFC 7515 §4.1.9: a media type, `application/` optional. A logout token's type is never an access token's.
  'jwt-typ': {
    validate: (v) => /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,99}(\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,99})?$/.test(v) && !isLogoutTokenType(v),
    expected: 'a JWT type (media type) such as at+jwt or application/at+jwt, never logout+jwt',
    echo: true,
  },
  // Asymmetric JWS algorithms only: HS* with a public key as the secret, and `none`, are never accepted.
  'jws-alg': {
    validate: (v) => ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'].includes(v),
    expected: 'an asymmetric JWS algorithm (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)',
    echo: true,
  },
  // RFC 9110 §9.1: method names are case-sensitive tokens; the standard ones are upper-case.
  'http-method': { validate: (v) => /^[A-Z]{1,20}$/.test(v), expected: 'an upper-case HTTP method', echo: true },
  // RFC 9110 §5.1: a field name is a token.
  'header-name': {
    validate: (v) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/.test(v),
    expected: 'an HTTP header name',
    echo: true,
  },
};

const duration = (fallback: Duration, description: string, positive = false) =>
  key(
    {
      type: ['string', 'integer'] as Array<'string' | 'integer'>,
      format: positive ? 'positive-duration' : 'duration',
      minimum: positive ? 1 : 0,
      default: fallback,
      description,
    },
    form<Duration, number, 'Ms'>('milliseconds', 'Ms'),
  );
const byteSize = (fallback: ByteSize, description: string) =>
  key(
    {
      type: ['string', 'integer'] as Array<'string' | 'integer'>,
      format: 'byte-size',
      minimum: 1,
      default: fallback,
      description,
    },
    form<ByteSize, number>('bytes'),
  );
const integer = (fallback: number, minimum: number, maximum: number, description: string) =>
  key({ type: 'integer' as const, minimum, maximum, default: fallback, description }, form<number, number>('as-written'));
const port = (fallback: number, description: string) => integer(fallback, 0, 65535, description);
const flag = (fallback: boolean, description: string) =>
  key({ type: 'boolean' as const, default: fallback, description }, form<boolean, boolean>('as-written'));
const textSchema = (fallback: string, description: string, format?: string) => ({
  type: 'string' as const,
  minLength: 1,
  ...(format === undefined ? {} : { format }),
  default: fallback,
  description,
});
const text = (fallback: string, description: string, format?: string) =>
  key(textSchema(fallback, description, format), form<string, string>('as-written'));
/** A file or directory: absolute in the typed form, relative ones from the working directory. */
const pathText = (fallback: string, description: string) => key(textSchema(fallback, description), form<string, string>('path'));
const nullableSchema = (description: string, format?: string, fallback: string | null = null) => ({
  type: 'string' as const,
  nullable: true as const,
  minLength: 1,
  ...(format === undefined ? {} : { format }),
  default: fallback,
  description,
});
const nullableText = (description: string, format?: string, fallback: string | null = null) =>
  key(nullableSchema(description, format, fallback), form<string | null, string | null>('as-written'));
const nullablePath = (description: string) => key(nullableSchema(description), form<string | null, string | null>('path'));
const list = (fallback: string[], format: string, description: string) =>
  key(
    {
      type: 'array' as const,
      items: { type: 'string' as const, format },
      uniqueItems: true as const,
      default: fallback,
      description,
    },
    form<string[], string[]>('as-written'),
  );
const oneOf = <const Value extends string>(values: readonly Value[], fallback: NoInfer<Value>, description: string) =>
  key({ type: 'string' as const, enum: [...values] as Value[], default: fallback, description }, form<Value, Value>('as-written'));
/** The members of a section that are not nullable (ajv's `JSONSchemaType` wants exactly those as `required`). */
type RequiredMember<P> = { [K in keyof P]: P[K] extends { nullable: true } ? never : K }[keyof P] & string;

/** A section: every non-nullable member is required once defaults are in, and nothing else is allowed. */
const section = <P extends Record<string, unknown>>(properties: P) => ({
  type: 'object' as const,
  additionalProperties: false as const,
  required: Object.keys(properties).filter(
    (name) => (properties[name] as { nullable?: boolean }).nullable !== true,
  ) as Array<RequiredMember<P>>,
  properties,
});

const MAX = Number.MAX_SAFE_INTEGER;

const claimCondition = {
  type: 'object' as const,
  additionalProperties: false as const,
  required: ['claim'] as Array<'claim' | 'values'>,
  properties: {
    claim: { type: 'string' as const, format: 'claim-name' },
    values: { type: 'array' as const, items: { type: 'string' as const, minLength: 1, maxLength: 200 }, uniqueItems: true as const, maxItems: 100, default: [] as string[] },
  },
};

const profileRule = {
  type: 'object' as const,
  additionalProperties: false as const,
  required: ['name', 'template-version', 'client-types'] as Array<'name' | 'when' | 'template-version' | 'client-types' | 'scopes'>,
  properties: {
    name: { type: 'string' as const, pattern: RULE_NAME_PATTERN, description: 'lower-case letters, digits and "-", up to 40: part of the projected profile id' },
    when: { type: 'array' as const, items: claimCondition, maxItems: 20, default: [] as RawClaimCondition[] },
    'profile-name': { type: 'string' as const, nullable: true as const, minLength: 1, maxLength: 200 },
    'template-version': { type: 'string' as const, minLength: 1, maxLength: 200 },
    'client-types': { type: 'array' as const, items: { type: 'string' as const, minLength: 1 }, uniqueItems: true as const, minItems: 1 },
    scopes: {
      type: 'array' as const,
      maxItems: 20,
      default: [] as RawProfileRule['scopes'],
      items: {
        type: 'object' as const,
        additionalProperties: false as const,
        required: ['type', 'access'] as Array<'type' | 'access'>,
        properties: {
          type: { type: 'string' as const, minLength: 1, maxLength: 200 },
          id: { type: 'string' as const, nullable: true as const, minLength: 1, maxLength: 200 },
          claim: { type: 'string' as const, nullable: true as const, format: 'claim-name' },
          access: { type: 'string' as const, enum: ['READ', 'WRITE'] as Array<'READ' | 'WRITE'> },
        },
      },
    },
    unscoped: { type: 'boolean' as const, nullable: true as const },
  },
};

const toClaimCondition = (condition: RawClaimCondition): ClaimCondition => ({ claim: condition.claim, values: [...(condition.values ?? [])] });

/** A rule's typed form: its profile name defaults to its own name; a scope takes its id from `id` or from `claim`. */
const toProfileRule = (rule: RawProfileRule): ProfileRule => ({
  name: rule.name,
  when: (rule.when ?? []).map(toClaimCondition),
  profileName: rule['profile-name'] ?? rule.name,
  templateVersionId: rule['template-version'],
  clientTypes: [...rule['client-types']],
  scopes: (rule.scopes ?? []).map((scope) => (scope.claim != null ? { type: scope.type, claim: scope.claim, access: scope.access } : { type: scope.type, id: scope.id!, access: scope.access })),
  unscoped: rule.unscoped ?? null,
});

/**
 * JSON Schema (draft-07, ajv 8) of the configuration file. The `default`s here are the only defaults;
 * config/default.yaml repeats them as documentation (a test checks the two agree). Each `description` is the key's
 * "meaning" in the table of docs/configuration.md, generated from here (`npm run docs:config`): Markdown, links
 * relative to docs/. Each key is declared once, by a helper that also declares its typed form (key-forms.ts): its
 * written type (`RawConfig`), its name and type in `GatewayConfig`, and the conversion between them.
 */
const schema = section({
  server: section({
    port: port(8080, 'proxy and /iam listen port (0 = any free port)'),
    'management-port': port(9090, 'health, readiness and metrics listen port'),
    host: text('0.0.0.0', 'listen address of the proxy port'),
    'management-host': text('127.0.0.1', 'listen address of the management port (no authentication: keep it on loopback or a private network)'),
    'request-timeout': duration('30s', 'a client must send its whole request within this (slowloris guard); 0 = off'),
    'headers-timeout': duration('10s', 'a client must send its request headers within this'),
    'keep-alive-timeout': duration('5s', 'idle client connections are closed after this (also while stopping: a stop does not close them earlier)'),
    'max-header-size': byteSize('16kb', 'bytes of request headers, 431 above'),
    'max-url-length': byteSize('8kb', 'bytes of request target, 414 above'),
    'iam-body-limit': byteSize('64kb', 'bytes of a JSON body sent to /iam, 413 above'),
    'shutdown-timeout': duration('10s', 'in-flight requests (and idle keep-alive connections) get this long after SIGTERM; keep it above `server.keep-alive-timeout`, or idle connections are cut at this deadline instead of at their announced keep-alive timeout'),
    workers: key(
      {
        type: ['string', 'integer'] as Array<'string' | 'integer'>,
        format: 'worker-count',
        minimum: 1,
        maximum: 1024,
        default: 1,
        description: 'processes serving the proxy port (`node:cluster`; `serve --workers` wins); `auto` = one per available core; above 1 needs `redis.url` and `database.url` (see [Workers](#workers))',
      },
      // `auto` is resolved by `serve` (workers/), which knows the cores.
      converted((value: number | string): number | 'auto' => (value === 'auto' ? 'auto' : Number(value))),
    ),
  }),
  upstream: section({
    url: text('http://127.0.0.1:3000', 'the host application behind the gateway', 'http-url'),
    'connect-timeout': duration('5s', 'time to open a connection to the host, 502 above'),
    'response-timeout': duration('30s', "time to the host's response headers, 504 above"),
    'body-timeout': duration('30s', 'longest silence while streaming a body either way'),
    connections: integer(128, 1, 65536, 'keep-alive connection pool size to the host'),
    'websocket-idle-timeout': duration('5m', 'a WebSocket tunnel with no bytes either way for this long is closed', true),
    'websocket-recheck-interval': duration('30s', "an open WebSocket tunnel's session and permission are checked again at least this often", true),
    'filter-max-bytes': byteSize('8mb', "the largest host answer a route with a `filter` reads to filter it; a larger one is 502 `IAM_FILTER_FAILED`, never sent unfiltered"),
  }),
  database: section({
    url: nullableText('PostgreSQL URL; null = embedded PGlite', 'postgres-url'),
    'embedded-dir': key(
      textSchema('.data/pglite', 'PGlite data directory (relative to the working directory); memory:// keeps nothing'),
      converted((value: string, _key, { cwd }) => (value.startsWith('memory://') ? value : path.resolve(cwd, value))),
    ),
    'pool-size': integer(10, 1, 1000, 'PostgreSQL connection pool size'),
    'connect-timeout': duration('3s', 'opening a database connection (or waiting for a pooled one), 503 above', true),
    'query-timeout': duration('5s', 'a database statement without an answer after this fails, 503', true),
    'idle-timeout': duration('30s', 'pooled database connections unused this long are closed', true),
  }),
  redis: section({
    url: nullableText('Redis URL for the token store; null = in-process store (single instance only)', 'redis-url'),
    'wait-replicas': integer(1, 0, 16, 'revocations wait until this many replicas have them (WAIT), when the primary has replicas; 0 = do not wait'),
    'wait-timeout': duration('500ms', 'the longest a revocation waits for the replicas', true),
  }),
  log: section({
    level: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'log level (pino)'),
  }),
  iam: section({
    enabled: flag(true, 'false = transparent proxy, no authorization (takes effect on restart)'),
    token: section({
      'store-prefix': text('iam', 'prefix of every token-store key', 'store-prefix'),
      ttl: duration('8h', 'absolute session lifetime', true),
      'idle-timeout': duration(0, 'sliding idle timeout; 0 = off'),
      'max-sessions-per-user': integer(50, 1, 100000, 'live sessions per user; a new one revokes the oldest beyond it (audited)'),
      cache: section({
        enabled: flag(true, 'cache token lookups in process (bounded by max-entries)'),
        'max-entries': integer(10000, 1, MAX, 'bound of the token lookup cache'),
        'revalidate-interval': typedAs('revalidateMs', duration('2s', 'a cached session is read from the store again after this long (bound for deletions outside the gateway)', true)),
      }),
    }),
    schema: section({
      'history-table': text('iam_mikro_orm_schema_history', 'migration history table', 'sql-identifier'),
    }),
    'client-types': {
      ...list(['WEB', 'MOBILE', 'DESKTOP', 'API'], 'client-type', 'allowed clientType values; others get 400'),
      minItems: 1,
    },
    login: section({
      'rate-limit': section({
        'max-failures': integer(10, 1, MAX, 'login attempts per username+IP within the window that may fail, then 429'),
        'max-failures-per-address': integer(100, 1, MAX, 'failed logins per client IP (any username, unknown ones too; OpenID Connect callbacks that fail) within the window, then 429'),
        window: duration('15m', 'window of the login rate limit', true),
      }),
      'max-pending-verifications': integer(64, 1, MAX, 'password verifications queued or running at once; beyond it 503 IAM_BUSY'),
    }),
    // `type` and each login method's keys, declared by the method (auth/authenticators/).
    authenticator: key(
      authenticatorSchema(AUTHENTICATORS) as unknown as JSONSchemaType<RawAuthenticatorSection>,
      converted((value: RawAuthenticatorSection, _key, { cwd, authenticators }) => toAuthenticatorConfig(value, cwd, authenticators)),
    ),
    provision: section({
      file: nullablePath('provisioning file applied at start, create-missing only (existing objects are never changed); null = none'),
    }),
    policy: section({
      dir: pathText('policies', 'policy directory, relative to the working directory'),
      'candidate-dir': nullablePath("a candidate policy directory (relative to the working directory), decided beside the live policy on every proxied and forward-auth request and never enforced; divergences are counted, logged and shown on the console's Policy page ([policy-changes.md](policy-changes.md)); null = none"),
      'poll-interval': duration('5s', 'periodic checksum check of the policy files; 0 = off'),
      debounce: duration('200ms', 'quiet time after a file event before reloading; a changed policy file is read only once its size and mtime have held this long'),
    }),
    changes: section({
      'poll-interval': duration('5s', 'how often each instance reads the change feed and retries undelivered changes: the bound on stale revocation and authorization state when an event is lost', true),
    }),
    authz: section({
      'ability-cache-size': integer(10000, 1, MAX, 'bound of the in-process ability cache (LRU)'),
      'ability-cache-memory': typedAs('abilityCacheBytes', byteSize('64mb', 'memory bound of the in-process ability cache, approximate bytes of compiled grants (LRU)')),
      'resolver-timeout': duration('2s', 'default timeout of resource resolvers without their own'),
      // What a caller's own questions may cost the hosts' resolvers; the proxy's resolutions never count against it.
      'caller-resolutions': section({
        'per-call': integer(20, 1, 100, 'distinct resources one `POST /iam/authorization/check` may have resolved; the checks beyond them answer 429 `RESOLUTION_BUDGET_EXCEEDED` without a resolver request ([host-integration.md](host-integration.md#limits-and-errors))'),
        'in-flight-per-caller': integer(32, 1, MAX, 'resolutions one caller (the user behind the credential) may have waiting at once, over all their concurrent check and diagnostics calls, per instance; beyond it 429 `RESOLUTION_BUDGET_EXCEEDED` without a resolver request'),
        connections: integer(64, 1, 65536, "connections per resolver origin for the check and diagnostics resolutions: a pool of their own, so they never queue the proxy's resolutions (which keep 32 of their own); keep it above `in-flight-per-caller`, or one caller's resolutions fill it and the other callers' wait behind them"),
      }),
    }),
    gateway: section({
      'allow-path-parameters': flag(false, 'accept `;` path parameters (refused by default)'),
    }),
    forward: section({
      'trusted-proxies': list([], 'ip-or-cidr', 'addresses or CIDRs whose X-Forwarded-*/Forwarded headers and `X-Request-Id` are kept, and whose `traceparent` trace id is recorded (audit rows, decisions, access log; [observability.md](observability.md))'),
      assertion: section({
        enabled: flag(false, 'send a signed JWT in X-IAM-Assertion'),
        ttl: duration('60s', 'lifetime of the assertion JWT', true),
        issuer: text('iam-gateway', '`iss` of the assertion JWT'),
        audience: nullableText('`aud` of the assertion JWT, for routes whose policy sets no `audience`; null = none'),
        'key-file': nullablePath('PEM Ed25519 private key that signs the assertion (share it across instances); null = a key generated at start'),
      }),
    }),
    'session-cookie': section({
      secure: flag(true, 'the browser session cookie is `__Host-iam-session` with `Secure`; `false`: `iam-session` without `Secure` (plain-http development only)'),
      'trusted-origins': list([], 'origin', "origins besides the gateway's own whose unsafe cookie-authenticated requests are accepted (CSRF)"),
    }),
    ui: section({
      title: text('iam-gateway', "the product name in the header and window title of the gateway's own browser pages (sign-in, 401, 403, 404); one line, at most 100 characters, always escaped", 'page-title'),
      'templates-dir': nullablePath(
        'a directory with `layout.html`, the whole page around the content of those pages: placeholders `{{title}}`, `{{heading}}`, `{{logo-url}}`, `{{stylesheet}}` (escaped) and `{{body}}` (once); an unknown or unclosed placeholder, a missing `{{body}}`, a script or an inline style stops the start with the file:line; relative to the working directory; `null` = the built-in layout',
      ),
      'logo-url': nullableText("a logo beside the title on those pages: an `https://` URL without credentials, or a path on the gateway's origin (`/static/logo.svg`); the pages' CSP allows images from that origin only; `null` = none", 'logo-url'),
    }),
    'access-log': typedAs(
      'accessLog.mode',
      oneOf(['all', 'denied', 'off'], 'denied', 'one JSON line per request on stdout (`msg: "access"`): all | denied (denials and failures) | off'),
    ),
    'access-log-sample': typedAs(
      'accessLog.sample',
      key(
        {
          type: 'number' as const,
          minimum: 0,
          maximum: 1,
          default: 1,
          description: 'with `all`: the share of allowed requests logged (0..1); denials and failures always',
        },
        form<number, number>('as-written'),
      ),
    ),
    oidc: section({
      issuer: nullableText("the OpenID Provider's issuer URL (discovery at `<issuer>/.well-known/openid-configuration`); https, plain http only on loopback", 'http-url'),
      'client-id': nullableText("this client's id at the provider"),
      'client-secret': nullableText("this client's secret: set it in the environment, not in a file", 'secret'),
      'redirect-uri': nullableText("the gateway's callback as registered at the provider: `https://<gateway>/iam/auth/oidc/callback`", 'http-url'),
      'post-logout-redirect-uri': nullableText('where the provider sends the browser after logout (registered at the provider); null = its default', 'http-url'),
      scopes: list(['openid', 'profile', 'email'], 'oauth-scope', 'scopes requested at login (`openid` always)'),
      claims: section({
        'user-id': text('sub', 'claim that becomes the userId', 'claim-name'),
        'identity-domain': nullableText('claim that becomes the identityDomain; null = the issuer URL', 'claim-name'),
        profile: nullableText("claim naming the profile to activate at login (one of the user's profiles); null = the usual choice", 'claim-name'),
      }),
      users: oneOf(['jit', 'existing'], 'jit', 'jit: users are created at first login (without profiles); existing: only known users may log in'),
      'link-by': oneOf(
        ['none', 'verified-email'],
        'none',
        "a provider account not seen before joins an existing user only when an admin linked it (`none`), or also when the userId is its `email` and `email_verified` is `true`, as the user's first account there (`verified-email`)",
      ),
      allowed: key(
        {
          type: 'array' as const,
          items: claimCondition,
          default: [] as RawClaimCondition[],
          description:
          'claims a provider account must have to sign in, e.g. `[{claim: groups, values: [engineering, ops]}]`: every condition must hold (a string claim equal to one of the values, a list claim containing one; no values: the claim is present); otherwise the login is refused and audited; from the environment as a JSON array',
        },
        converted((conditions: RawClaimCondition[]): ClaimCondition[] => conditions.map(toClaimCondition)),
      ),
      profiles: key(
        {
        type: 'array' as const,
          items: profileRule,
          default: [] as RawProfileRule[],
        description:
          "rules from the provider's claims to profiles, applied at every login: a user whose claims meet a rule's `when` has its profile (id `oidc:<name>:<userId>`, the rule's template version, client types and scopes, which may take their ids from a claim); when the claims stop meeting it, the profile is revoked; each change audited ([oidc.md](oidc.md#profiles-from-the-providers-groups-and-claims-iamoidcprofiles)); from the environment as a JSON array",
        },
        converted((rules: RawProfileRule[]): ProfileRule[] => rules.map(toProfileRule)),
      ),
      'accept-access-tokens': flag(false, "accept the provider's JWT access tokens as bearers (resource-server mode; needs `iam.oidc.audience`)"),
      audience: nullableText('`aud` a JWT access token must carry; required with `accept-access-tokens` and never the client id (the `aud` of its ID tokens: the gateway refuses to start otherwise)'),
      'access-token-types': {
        ...list(['at+jwt', 'application/at+jwt'], 'jwt-typ', '`typ` header values a JWT access token may carry (RFC 9068: `at+jwt`); never `logout+jwt`'),
        minItems: 1,
      },
      algorithms: list(['RS256', 'PS256', 'ES256', 'EdDSA'], 'jws-alg', 'signature algorithms accepted on ID tokens, logout tokens and access tokens (asymmetric only; never `none` or HMAC)'),
      'clock-tolerance': duration('30s', 'clock skew allowed on `exp`, `nbf`, `iat` (at most 5m)'),
      'revocation-margin': duration('0s', "an access token issued less than this after its user's sessions were all revoked is refused too: how far the provider's clock may run ahead of the gateway's (at most 5m)"),
      timeout: duration('5s', 'each call to the provider (discovery, token, JWKS); 504 `IAM_IDP_TIMEOUT` above, 502 `IAM_IDP_UNAVAILABLE` when unreachable', true),
    }),
    cors: section({
      enabled: flag(false, 'answer CORS preflights and add CORS headers'),
      origins: list([], 'cors-origin', 'allowed origins'),
      methods: list(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], 'http-method', 'allowed methods'),
      headers: list(['Authorization', 'Content-Type'], 'header-name', 'allowed request headers'),
      'max-age': typedAs('maxAgeSeconds', integer(600, 0, 86400, 'seconds a browser may cache a preflight answer')),
      credentials: flag(false, 'Access-Control-Allow-Credentials: true'),
    }),
    audit: section({
      'flush-interval': duration('1s', 'audit events are written in batches this often', true),
      'spool-dir': pathText(
        '.data/audit-spool',
        'where audit events the database cannot take yet (a full buffer while it is away, what is unwritten at stop: `audit-…` files) and session endings it could not record yet (`endings-…`, written before the ending is answered) are kept, replayed when it answers and at the next start, before it serves (relative to the working directory; keep it on a persistent volume, one per host or shared)',
      ),
      'spool-max-bytes': byteSize('1gb', 'bytes the spool may hold for a full buffer; beyond it the oldest events of the buffer are dropped (spool_full)'),
      retention: duration(0, 'audit events older than this are deleted (hourly, and by `audit purge`); 0 = kept forever'),
      'anonymous-denials-per-minute': integer(60, 0, MAX, 'audit rows per minute and kind for events of unauthenticated requests (anonymous denials and shadow denials, failed OpenID Connect callbacks); the rest are counted in one summary row'),
    }),
  }),
});

/**
 * The configuration as written, after defaults: kebab-case keys, durations and sizes as written (`8h`, `16kb` or
 * numbers). Read off the schema's keys; ajv's `JSONSchemaType` checks each key's JSON schema against its declared type.
 */
export type RawConfig = RawOf<typeof schema>;

/** The typed form of the schema's keys (`GatewayConfig` adds where the file came from, and the warnings). */
export type TypedConfig = TypedOf<typeof schema>;

/** The schema of the configuration file (see above). */
export const configSchema: typeof schema = schema satisfies JSONSchemaType<RawConfig>;

/**
 * The schema with the `iam.authenticator` section of `authenticators` (another registry than the built-in one: a
 * test's). The rest is `configSchema`'s.
 */
export function configSchemaFor(authenticators: AuthenticatorRegistry = AUTHENTICATORS): typeof configSchema {
  if (authenticators === AUTHENTICATORS) return configSchema;
  const iam = configSchema.properties.iam;
  const authenticator = authenticatorSchema(authenticators) as unknown as typeof iam.properties.authenticator;
  return { ...configSchema, properties: { ...configSchema.properties, iam: { ...iam, properties: { ...iam.properties, authenticator } } } };
}

/** Conventional environment names (docs/configuration.md). The generic name of the same key wins when both are set. */
export const CONVENTIONAL_ENV: Readonly<Record<string, string>> = {
  'server.port': 'PORT',
  'server.management-port': 'MANAGEMENT_PORT',
  'database.url': 'DATABASE_URL',
  'redis.url': 'REDIS_URL',
  'upstream.url': 'UPSTREAM_URL',
  'iam.policy.dir': 'IAM_POLICIES_DIR',
};

/** The generic environment name of a dotted key: `iam.token.store-prefix` → `IAM_TOKEN_STORE_PREFIX`. */
export const envNameOf = (key: string): string => key.toUpperCase().replace(/[.-]/g, '_');

/** The schema of one configurable value (anything that is not a section). */
export interface LeafSchema {
  type: string | string[];
  format?: string;
  nullable?: boolean;
  default: unknown;
  description: string;
  items?: { type: string; format?: string };
  /** How the value reaches `GatewayConfig` (the keys of `iam.authenticator`: through their section's). */
  readonly [TYPED]?: TypedForm<unknown, unknown>;
}

/** One configurable value: its dotted key, environment names and schema. */
export interface ConfigKey {
  key: string;
  env: string;
  /** The conventional name (`PORT`), when there is one and it differs from `env`. */
  alias?: string;
  schema: LeafSchema;
}

interface SectionSchema {
  type: 'object';
  properties: Record<string, SectionSchema | LeafSchema>;
}

/**
 * Every configurable value, in schema order (for env overrides, documentation and tests); the `iam.authenticator`
 * keys are those of `authenticators` (default: the built-in login methods).
 */
export function listConfigKeys(authenticators: AuthenticatorRegistry = AUTHENTICATORS): ConfigKey[] {
  const keys: ConfigKey[] = [];
  const walk = (node: SectionSchema, prefix: string): void => {
    for (const [name, child] of Object.entries(node.properties)) {
      const key = prefix === '' ? name : `${prefix}.${name}`;
      if (child.type === 'object') walk(child as SectionSchema, key);
      else {
        const env = envNameOf(key);
        const alias = CONVENTIONAL_ENV[key];
        keys.push({ key, env, ...(alias !== undefined && alias !== env ? { alias } : {}), schema: child as LeafSchema });
      }
    }
  };
  walk(configSchemaFor(authenticators) as unknown as SectionSchema, '');
  return keys;
}
