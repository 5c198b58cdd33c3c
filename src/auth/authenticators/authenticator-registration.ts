import type { Authenticator } from '../authenticator';

/**
 * The JSON-schema fragment (ajv, draft-07) of one `iam.authenticator.*` key as written in the configuration file or
 * the environment. `format` names one of the configuration's string formats (`http-url`, `duration`, …); ajv refuses
 * an unknown one when it compiles the schema.
 */
export interface AuthenticatorKeySchema {
  type: 'string' | Array<'string' | 'integer'>;
  format?: string;
  nullable?: true;
  minLength?: number;
  minimum?: number;
  default: string | number | null;
  /** One line for the configuration reference (`listConfigKeys()`, docs/configuration.md). */
  description: string;
}

/**
 * How the typed configuration (`GatewayConfig['iam']['authenticator']`) holds a key: `text` as written, `path`
 * absolute (relative to the working directory), `module` a path made absolute or an installed package's name,
 * `duration` in milliseconds under the name `<key>Ms`.
 */
export type AuthenticatorKeyForm = 'text' | 'path' | 'module' | 'duration';

/** One key of the flat `iam.authenticator` section that a login method reads. */
export interface AuthenticatorKey {
  schema: AuthenticatorKeySchema;
  /** Must be set (not null) when `iam.authenticator.type` names this login method. */
  required: boolean;
  form: AuthenticatorKeyForm;
}

/** What `create` may use besides its own keys. */
export interface AuthenticatorDeps {
  /** `iam.login.max-pending-verifications`: password verifications queued or running at once. */
  maxPendingVerifications?: number;
}

type CamelCase<S extends string> = S extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;

/** The typed configuration's name of a key: `timeout` (a duration) → `timeoutMs`, `key-file` → `keyFile`. */
export type TypedName<Name extends string, Key extends AuthenticatorKey> = Key['form'] extends 'duration' ? `${CamelCase<Name>}Ms` : CamelCase<Name>;

/** The typed value of a key in the configuration: milliseconds, or the (absolute) string, or null when unset. */
type ConfigValue<Key extends AuthenticatorKey> = Key['form'] extends 'duration' ? number : Key['schema'] extends { nullable: true } ? string | null : string;

/** The typed form of a set of keys as the configuration holds them (any login method chosen). */
export type ConfigOf<Keys extends Record<string, AuthenticatorKey>> = {
  [Name in keyof Keys & string as TypedName<Name, Keys[Name]>]: ConfigValue<Keys[Name]>;
};

/** What `create` receives: its own keys, typed, the required ones set (checked before `create` runs). */
export type SettingsOf<Keys extends Record<string, AuthenticatorKey>> = {
  [Name in keyof Keys & string as TypedName<Name, Keys[Name]>]: Keys[Name]['required'] extends true ? NonNullable<ConfigValue<Keys[Name]>> : ConfigValue<Keys[Name]>;
};

/**
 * One login method: the value of `iam.authenticator.type` that chooses it, the keys of `iam.authenticator` it reads
 * (several methods may share a key, declared the same way: `timeout`), and how it is created. Registered by one line
 * in `registry.ts`; the configuration's schema, its checks, its typed form, the key reference and the start's
 * preflight learn it from there.
 */
export interface AuthenticatorRegistration<Type extends string = string, Keys extends Record<string, AuthenticatorKey> = Record<string, AuthenticatorKey>> {
  type: Type;
  /** Said after the type in the description of `iam.authenticator.type`: `none (no logins: …)`. */
  summary?: string;
  keys: Keys;
  /** Keys outside `iam.authenticator` that must be set with this type (`oidc`: `iam.oidc.issuer`, …). */
  requires?: readonly string[];
  /** The key (of `keys`) a start names when `create` fails (the file or module it could not load); null: `type`. */
  keyForLoadErrors: (keyof Keys & string) | null;
  /** Builds it (reading files, loading modules: a failure stops the start, naming `keyForLoadErrors`). */
  create(settings: SettingsOf<Keys>, deps: AuthenticatorDeps): Authenticator<Type>;
}

/** Any registration (a registry is a list of them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- `create`'s settings differ per login method
export type AnyAuthenticatorRegistration = AuthenticatorRegistration<string, any>;

/** Declares a login method (keeps its type and keys literal, so the typed configuration can be derived from them). */
export function defineAuthenticator<const Type extends string, const Keys extends Record<string, AuthenticatorKey>>(
  registration: AuthenticatorRegistration<Type, Keys>,
): AuthenticatorRegistration<Type, Keys> {
  return registration;
}

/** The typed configuration's name of a key (see {@link TypedName}). */
export function typedNameOf(name: string, key: AuthenticatorKey): string {
  const camel = name.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
  return key.form === 'duration' ? `${camel}Ms` : camel;
}
