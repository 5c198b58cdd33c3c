import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import { valueAt, type Data } from './config-data';
import { keyOf, type Problem, type Segment } from './config-error';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { authenticatorProblems } from './authenticator-schema';
import { CONFIG_FORMATS, configSchemaFor } from './config-schema';
import { tryParseDuration } from './durations';
import { pointerSegments } from '../domain/schema-errors';

const validators = new WeakMap<AuthenticatorRegistry, ValidateFunction>();

/**
 * Compiled once per registry of login methods (a pure function, not a connection): ajv compilation is the costly
 * part. Strict: a login method's key naming an unknown format fails here.
 */
export function compiledValidator(authenticators: AuthenticatorRegistry = AUTHENTICATORS): ValidateFunction {
  let validator = validators.get(authenticators);
  if (validator === undefined) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
    for (const [name, format] of Object.entries(CONFIG_FORMATS)) {
      ajv.addFormat(name, { type: 'string', validate: format.validate });
    }
    validator = ajv.compile(configSchemaFor(authenticators));
    validators.set(authenticators, validator);
  }
  return validator;
}

/** Turns one ajv error into a sentence naming the dotted key. */
export function describeAjvError(error: ErrorObject, data: Data): Problem {
  const base = pointerToPath(error.instancePath, data);
  const schema = (error.parentSchema ?? {}) as { format?: string; nullable?: boolean; properties?: object };
  const format = schema.format === undefined ? undefined : CONFIG_FORMATS[schema.format];
  const params = error.params as Record<string, unknown>;
  const value = error.data;
  const shown = format?.echo === false ? 'the value' : show(value);
  const problem = (text: string): Problem => ({ path: base, message: `${keyOf(base) || 'the file'}: ${text}` });
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      const unknown: Problem = { path: [...base, name], message: `unknown key "${keyOf([...base, name])}"` };
      const hint = closest(name, Object.keys(schema.properties ?? {}));
      return hint === undefined ? unknown : { ...unknown, hint: `did you mean "${keyOf([...base, hint])}"?` };
    }
    case 'required': {
      const path = [...base, String(params.missingProperty)];
      return { path, message: `${keyOf(path)} is missing` };
    }
    case 'format':
    case 'minimum':
    case 'maximum':
      // Durations and sizes may be numbers: a number below their minimum is "not a duration" too.
      if (format !== undefined) return problem(`${format.echo ? `${shown} is not` : 'is not'} ${format.expected}`);
      return problem(`${shown} must be ${String(params.comparison)} ${String(params.limit)}`);
    case 'type': {
      const expected = format?.expected ?? typeWords(String(params.type), schema.nullable === true);
      return problem(`expected ${expected}, got ${format?.echo === false ? typeof value : shown}`);
    }
    case 'enum':
      return problem(`${shown} is not one of ${(params.allowedValues as unknown[]).join(', ')}`);
    case 'minLength':
      return problem('must not be empty');
    case 'minItems':
      return problem(`must list at least ${String(params.limit)} value(s)`);
    case 'uniqueItems':
      return problem(`lists ${show((value as unknown[])[Number(params.i)])} twice`);
    default:
      return problem(error.message ?? 'is invalid');
  }
}

/**
 * Rules that span several keys. Written defensively: they run even when other keys are invalid. `authenticators`:
 * the login methods whose required keys are checked (default: the built-in ones).
 */
export function crossChecks(data: Data, authenticators: AuthenticatorRegistry = AUTHENTICATORS): Problem[] {
  const get = (key: string): unknown => valueAt(data, key.split('.'));

  // The keys the chosen login method requires (an OpenID Connect login: the provider and this client).
  const problems: Problem[] = authenticatorProblems(data, authenticators);
  // Resource-server mode needs the provider (said once when the login method needs it too).
  const issuerMissing = (get('iam.oidc.issuer') ?? null) === null && !problems.some((problem) => problem.path.join('.') === 'iam.oidc.issuer');
  if (get('iam.oidc.accept-access-tokens') === true && issuerMissing) {
    problems.push({ path: ['iam', 'oidc', 'issuer'], message: 'iam.oidc.issuer is required when iam.oidc.accept-access-tokens is true' });
  }
  // Resource-server mode: the provider signs ID tokens (and logout tokens) with the same keys as access tokens, and
  // an ID token's `aud` is the client id. An audience of its own keeps them apart even where a provider does not
  // type its access tokens (RFC 8725 §3.9, §3.11; RFC 9068 §4): refused, not warned about, because a warning in a
  // log does not stop a replayed ID token.
  const audience = get('iam.oidc.audience') ?? null;
  if (get('iam.oidc.accept-access-tokens') === true && (audience === null || audience === get('iam.oidc.client-id'))) {
    problems.push({
      path: ['iam', 'oidc', 'audience'],
      message:
        audience === null
          ? 'iam.oidc.audience is required when iam.oidc.accept-access-tokens is true (the API\'s own audience, not iam.oidc.client-id: the provider\'s ID tokens carry the client id as their aud)'
          : 'iam.oidc.audience: must differ from iam.oidc.client-id when iam.oidc.accept-access-tokens is true (the provider\'s ID tokens carry the client id as their aud, and would pass as access tokens)',
    });
  }
  // Profile rules: names are part of the projected profile ids (one rule, one id); a scope names its id one way.
  const rules = get('iam.oidc.profiles');
  if (Array.isArray(rules)) {
    const seen = new Set<string>();
    rules.forEach((rule: { name?: unknown; scopes?: Array<{ id?: unknown; claim?: unknown }>; unscoped?: unknown }, index) => {
      const at = ['iam', 'oidc', 'profiles', String(index)];
      if (typeof rule.name === 'string') {
        if (seen.has(rule.name)) problems.push({ path: [...at, 'name'], message: `iam.oidc.profiles[${index}].name: "${rule.name}" names two rules (the name is part of the projected profile id)` });
        seen.add(rule.name);
      }
      (rule.scopes ?? []).forEach((scope, scopeIndex) => {
        if ((scope.id ?? null) === null === ((scope.claim ?? null) === null)) {
          problems.push({ path: [...at, 'scopes', String(scopeIndex)], message: `iam.oidc.profiles[${index}].scopes[${scopeIndex}]: give either id (a fixed scope id) or claim (one scope per value of that claim), not both or neither` });
        }
      });
      if (rule.unscoped === true && (rule.scopes ?? []).length > 0) problems.push({ path: [...at, 'unscoped'], message: `iam.oidc.profiles[${index}]: unscoped: true means every resource, so it takes no scopes` });
    });
  }
  const issuer = get('iam.oidc.issuer');
  if (typeof issuer === 'string' && URL.canParse(issuer) && new URL(issuer).protocol === 'http:' && !isLoopbackHost(new URL(issuer).hostname)) {
    problems.push({ path: ['iam', 'oidc', 'issuer'], message: 'iam.oidc.issuer: must be https:// (plain http only on loopback, for development)' });
  }
  for (const key of ['clock-tolerance', 'revocation-margin']) {
    const value = get(`iam.oidc.${key}`);
    if ((typeof value === 'string' || typeof value === 'number') && (tryParseDuration(value) ?? 0) > 5 * 60_000) {
      problems.push({ path: ['iam', 'oidc', key], message: `iam.oidc.${key}: at most 5m` });
    }
  }
  const port = get('server.port');
  if (typeof port === 'number' && port !== 0 && get('server.management-port') === port) {
    const message = `server.management-port: must differ from server.port (${port})`;
    problems.push({ path: ['server', 'management-port'], message });
  }
  // Fetch standard, CORS protocol: `Access-Control-Allow-Origin: *` is refused with credentials; allowing
  // "any origin with credentials" would mean reflecting every origin, which lets any site act as the user.
  const origins = get('iam.cors.origins');
  if (get('iam.cors.credentials') === true && Array.isArray(origins) && origins.includes('*')) {
    const message = 'iam.cors.origins: "*" cannot be combined with iam.cors.credentials: true';
    problems.push({ path: ['iam', 'cors', 'origins'], message });
  }
  return problems;
}

/** `/iam/client-types/1` → `['iam', 'client-types', 1]` (numbers only where the data is a list). */
function pointerToPath(pointer: string, data: Data): Segment[] {
  const segments: Segment[] = [];
  let node: unknown = data;
  for (const segment of pointerSegments(pointer)) {
    const step: Segment = Array.isArray(node) ? Number(segment) : segment;
    segments.push(step);
    node = (node as Record<Segment, unknown> | undefined)?.[step];
  }
  return segments;
}

/** A known sibling the unknown key was probably meant to be: same letters (`storePrefix`) or a typo. */
function closest(name: string, known: string[]): string | undefined {
  const squash = (value: string): string => value.toLowerCase().replace(/[-_]/g, '');
  const same = known.find((candidate) => squash(candidate) === squash(name));
  if (same !== undefined) return same;
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    const plausible = distance <= 2 && distance < name.length / 2;
    if (plausible && (best === undefined || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

const TYPE_WORDS = new Map([
  ['object', 'a mapping of keys'],
  ['array', 'a list'],
  ['string', 'a string'],
  ['integer', 'an integer'],
  ['boolean', 'true or false'],
]);

function typeWords(types: string, nullable: boolean): string {
  const expected = types
    .split(',')
    .map((type) => TYPE_WORDS.get(type) ?? type)
    .join(' or ');
  return nullable ? `${expected} or null` : expected;
}

function show(value: unknown): string {
  const shown = JSON.stringify(value) ?? String(value);
  return shown.length > 80 ? `${shown.slice(0, 77)}...` : shown;
}

/** `localhost`, `127.0.0.0/8` and `::1`: where a plain-http identity provider is acceptable (development, tests). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}
