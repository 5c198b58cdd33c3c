import * as path from 'node:path';
import { AUTHENTICATORS, authenticatorKeys, typedNameOf, type AuthenticatorConfig, type AuthenticatorKeySchema, type AuthenticatorRegistry } from '../auth/authenticators';
import { valueAt, type Data } from './config-data';
import type { Problem } from './config-error';
import { parseDuration } from './durations';

/**
 * The `iam.authenticator` section as written (after defaults): `type` and the keys the registered login methods read
 * (auth/authenticators/registry.ts), durations as written (`5s` or a number), unset strings null.
 */
export interface RawAuthenticatorSection {
  type: string;
  [key: string]: string | number | null | undefined;
}

/** The schema of `iam.authenticator.type`, from the registry: one of its types, the first by default. */
interface TypeSchema {
  type: 'string';
  enum: string[];
  default: string;
  description: string;
}

/** The JSON schema of the `iam.authenticator` section, from the registry (the rest of the schema: config-schema.ts). */
export function authenticatorSchema(registry: AuthenticatorRegistry = AUTHENTICATORS): {
  type: 'object';
  additionalProperties: false;
  required: string[];
  properties: Record<string, TypeSchema | AuthenticatorKeySchema>;
} {
  const keys = authenticatorKeys(registry);
  const types = registry.map((registration) => (registration.summary === undefined ? registration.type : `${registration.type} (${registration.summary})`));
  const type: TypeSchema = {
    type: 'string',
    enum: registry.map((registration) => registration.type),
    default: registry[0]?.type ?? 'none',
    description: `who signs users in: ${types.join(' | ')}`,
  };
  return {
    type: 'object',
    additionalProperties: false,
    // As every section: the non-nullable members (defaults always set them); a method's own keys are checked below.
    required: ['type', ...keys.filter(({ key }) => key.schema.nullable !== true).map(({ name }) => name)],
    properties: { type, ...Object.fromEntries(keys.map(({ name, key }) => [name, { ...key.schema }])) },
  };
}

/**
 * "iam.authenticator.path is required when iam.authenticator.type is "users-file"": the keys the chosen login method
 * requires (its own, and those of other sections it names, such as `iam.oidc.issuer`) that are unset.
 */
export function authenticatorProblems(data: Data, registry: AuthenticatorRegistry = AUTHENTICATORS): Problem[] {
  const type = valueAt(data, ['iam', 'authenticator', 'type']);
  const registration = registry.find((candidate) => candidate.type === type);
  if (registration === undefined) return []; // not a type: the schema's enum reports it
  const own = Object.entries(registration.keys as Record<string, { required: boolean }>)
    .filter(([, key]) => key.required)
    .map(([name]) => ({ segments: ['iam', 'authenticator', name], at: ['iam', 'authenticator', 'type'] }));
  const other = (registration.requires ?? []).map((key) => ({ segments: key.split('.'), at: undefined }));
  const problems: Problem[] = [];
  for (const { segments, at } of [...own, ...other]) {
    if ((valueAt(data, segments) ?? null) !== null) continue;
    const message = `${segments.join('.')} is required when iam.authenticator.type is "${registration.type}"`;
    problems.push(at === undefined ? { path: segments, message } : { path: segments, message, at });
  }
  return problems;
}

/**
 * The validated section → its typed form: `type`, then every registered key under its typed name (`timeoutMs`),
 * paths absolute from `cwd`, a module path absolute unless it names an installed package, unset values null.
 */
export function toAuthenticatorConfig(raw: RawAuthenticatorSection, cwd: string, registry: AuthenticatorRegistry = AUTHENTICATORS): AuthenticatorConfig {
  const typed: Record<string, unknown> = { type: raw.type };
  for (const { name, key } of authenticatorKeys(registry)) {
    const value = raw[name] ?? null;
    const dotted = `iam.authenticator.${name}`;
    if (value === null) typed[typedNameOf(name, key)] = null;
    else if (key.form === 'duration') typed[typedNameOf(name, key)] = parseDuration(value, dotted);
    else if (key.form === 'path') typed[typedNameOf(name, key)] = path.resolve(cwd, String(value));
    else if (key.form === 'module') typed[typedNameOf(name, key)] = isPackageSpecifier(String(value)) ? String(value) : path.resolve(cwd, String(value));
    else typed[typedNameOf(name, key)] = value;
  }
  return typed as AuthenticatorConfig;
}

/**
 * `iam.authenticator.module` may name an installed package (`@acme/iam-login`) rather than a file:
 * Node resolves bare specifiers from node_modules, so only path-like values (`./x.js`, `/opt/x.js`,
 * `lib/x.js`) are made absolute.
 */
function isPackageSpecifier(value: string): boolean {
  return !value.startsWith('.') && !path.isAbsolute(value) && !/\.(c|m)?js$/.test(value);
}
