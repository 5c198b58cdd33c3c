import pino from 'pino';

/**
 * The one redaction layer between the gateway and everything it writes for operators: the application log, the access
 * log, span names, attributes and recorded exceptions, and the CLI's last-resort error line. Call sites do not have
 * to take care: whatever reaches a log or a span goes through here (docs/threat-model.md, "Secrets in logs").
 *
 * Two rules:
 * - by name: a property whose name says it holds a credential (`password`, `secret`, `token`, `authorization`,
 *   `cookie`, `set-cookie`, a command's `args` — ioredis puts `AUTH user password` there) is replaced whole;
 * - by shape: in any string, URL userinfo (`redis://user:pass@`, RFC 3986 §3.2.1), the value after an
 *   `Authorization`/`Cookie`/`Set-Cookie` header name, secret-named parameters (`password=`, `client_secret=`,
 *   `?code=`...), gateway tokens (`iamt_…`, also percent-encoded) and compact JWS/JWE (RFC 7515 §7.1: `eyJ….….…`).
 *
 * Cost: a string without `@`, `:`, `=`, `iamt` or `eyJ` is returned at once; otherwise a pattern scans it only when
 * its guard (a literal it needs) is in it. An object whose values need no change is returned as it is (no copy). The
 * access log, written per request, applies {@link scrubText} to its one field a client chooses (the path) instead of
 * walking its line (bench/redaction.js measures both).
 */

/** What replaces a secret. */
export const REDACTED = '[redacted]';

/** Every pattern needs one of these: most strings (ids, numbers, most paths) skip the rest. */
const PRE_CHECK = /[@:=]|iamt|eyJ/;

/**
 * Each pattern with a guard: a literal the pattern cannot match without. The guards are plain substring tests, so
 * a string without any (an id, a path, a route pattern) costs a few scans, and a pattern runs only where it may match.
 */
const PATTERNS: ReadonlyArray<{ guard: RegExp; pattern: RegExp; replacement: string }> = [
  // Userinfo of any URL (greedy to the last `@` before the host: a password may hold an unencoded `@`).
  { guard: /:\/\/[^@]*@/, pattern: /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#"'<>]*@/gi, replacement: `$1${REDACTED}@` },
  // A header's value after its name, in text or in serialized JSON, up to the quote or the line's end.
  { guard: /authorization|cookie/i, pattern: /\b((?:proxy-)?authorization|set-cookie|cookie)(["']?\s*[:=]\s*)(["']?)[^"'\r\n]*/gi, replacement: `$1$2$3${REDACTED}` },
  // Secret-named parameters: libpq conninfo and query strings (`password=`, `?sentinelPassword=`), JSON-ish text
  // (`"client_secret":"…"`), environment-style names (`IAM_OIDC_CLIENT_SECRET=`): any prefix to the name.
  {
    guard: /passw|pwd|secret|_token|code_verifier/i,
    pattern: /\b([\w-]*?(?:password|passwd|pwd|secret|access_token|refresh_token|id_token|code_verifier))(["']?\s*[:=]\s*)(["']?)[^"'&\s,;]*/gi,
    replacement: `$1$2$3${REDACTED}`,
  },
  // OAuth query parameters that are credentials (RFC 6749 §4.1.2 `code`, RFC 6750 §2.3 `access_token` done above).
  { guard: /(?:code|token)=/i, pattern: /([?&;]\s*)(code|token)=[^&\s#"']*/gi, replacement: `$1$2=${REDACTED}` },
  // Gateway tokens (domain/token-hash.ts), also with the `_` percent-encoded.
  { guard: /iamt/, pattern: /iamt(?:_|%5[fF])[A-Za-z0-9_-]+/g, replacement: `iamt_${REDACTED}` },
  // Compact JWS (3 parts) and JWE (5 parts): a base64url JSON header starts with `eyJ` ('{"').
  { guard: /eyJ/, pattern: /\beyJ[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*){2,4}/g, replacement: REDACTED },
];

/** Property names (lowercase, without `-` and `_`) whose value is replaced whole, whatever it is. */
const SECRET_NAMES: ReadonlySet<string> = new Set([
  'password',
  'passwd',
  'pwd',
  'secret',
  'clientsecret',
  'token',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'logouttoken',
  'authorization',
  'proxyauthorization',
  'cookie',
  'setcookie',
  'apikey',
  'codeverifier',
  'privatekey',
  'credentials',
  // A Redis command's arguments (ioredis errors carry `command: { name, args }`): `HELLO 3 AUTH user password`.
  'args',
]);

/** Nesting beyond this is cut (a log line is no place for deep graphs; it also bounds the walk). */
const MAX_DEPTH = 8;

/** Names seen so far and whether they are secret: property names come from code, so this stays small. */
const nameCache = new Map<string, boolean>();

function isSecretName(name: string): boolean {
  let secret = nameCache.get(name);
  if (secret === undefined) {
    secret = SECRET_NAMES.has(name.replace(/[-_]/g, '').toLowerCase());
    if (nameCache.size < 10_000) nameCache.set(name, secret);
  }
  return secret;
}

/** `text` with every secret shape replaced; the same string when there is none. */
export function scrubText(text: string): string {
  if (!PRE_CHECK.test(text)) return text;
  let out = text;
  for (const { guard, pattern, replacement } of PATTERNS) if (guard.test(out)) out = out.replace(pattern, replacement);
  return out;
}

/**
 * `value` with secrets removed, for a log line or a span: strings by shape, properties by name, errors serialized
 * first (pino's error serializer: type, message with its causes, stack, own properties) and then scrubbed. Returns
 * `value` itself when nothing changes.
 */
export function scrubValue(value: unknown): unknown {
  return scrub(value, []);
}

/** `ancestors`: the objects above `value` (a cycle is cut where it closes; their number bounds the depth). */
function scrub(value: unknown, ancestors: object[]): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return scrub(pino.stdSerializers.err(value), ancestors);
  if (value instanceof URL) return scrubText(value.href);
  if (value instanceof Date || ArrayBuffer.isView(value)) return value;
  if (ancestors.length >= MAX_DEPTH) return '[too deep]';
  if (ancestors.includes(value)) return '[circular]';
  ancestors.push(value);
  let out: unknown;
  if (Array.isArray(value)) out = scrubArray(value, ancestors);
  else {
    const json = (value as { toJSON?: unknown }).toJSON;
    out = typeof json === 'function' ? scrub((json as () => unknown).call(value), ancestors) : scrubObject(value as Record<string, unknown>, ancestors);
  }
  ancestors.pop();
  return out;
}

function scrubArray(value: unknown[], ancestors: object[]): unknown[] {
  let out: unknown[] | null = null;
  for (let index = 0; index < value.length; index++) {
    const item = value[index];
    const clean = scrub(item, ancestors);
    if (clean !== item) {
      out ??= value.slice();
      out[index] = clean;
    }
  }
  return out ?? value;
}

function scrubObject(value: Record<string, unknown>, ancestors: object[]): Record<string, unknown> {
  let out: Record<string, unknown> | null = null;
  const keys = Object.keys(value);
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index]!;
    const item = value[key];
    const clean = item === undefined || item === null || item === '' ? item : isSecretName(key) ? REDACTED : scrub(item, ancestors);
    if (clean !== item) {
      out ??= { ...value };
      out[key] = clean;
    }
  }
  return out ?? value;
}

/** An exception as a span records it (`exception.type`, `.message`, `.stacktrace`), scrubbed. */
export function scrubbedException(error: unknown): { name: string; message: string; stack?: string } {
  if (error instanceof Error) {
    const name = error.name || 'Error';
    return { name, message: scrubText(error.message), ...(typeof error.stack === 'string' ? { stack: scrubText(error.stack) } : {}) };
  }
  return { name: 'Error', message: scrubText(String(error)) };
}

/**
 * The pino options every logger of the gateway uses: each line's object goes through {@link scrubValue} (errors
 * included, under any key), and its message through {@link scrubText}.
 */
export const redactingLoggerOptions = {
  formatters: {
    log: (object: Record<string, unknown>): Record<string, unknown> => scrubValue(object) as Record<string, unknown>,
  },
  serializers: {
    // Already serialized and scrubbed by the formatter (which runs first): pino's own error serializer would
    // re-wrap the plain object.
    err: (value: unknown): unknown => value,
    msg: (value: unknown): unknown => (typeof value === 'string' ? scrubText(value) : value),
  },
} satisfies Pick<pino.LoggerOptions, 'formatters' | 'serializers'>;
