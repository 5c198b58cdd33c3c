import type { Authenticator } from '../authenticator';
import type { AnyAuthenticatorRegistration, AuthenticatorKey, ConfigOf } from './authenticator-registration';
import { HTTP } from './http';
import { MODULE } from './module';
import { NONE } from './none';
import { OIDC } from './oidc';
import { USERS_FILE } from './users-file';

/**
 * Every login method `iam.authenticator.type` may choose, one line each (a new one: a file beside this one and a line
 * here). The configuration's schema and checks, its typed form, the key reference and the start's preflight are
 * derived from this list; the functions that read it take it as a parameter (default: this one), so a test can pass
 * another.
 */
export const AUTHENTICATORS = [
  NONE,
  USERS_FILE,
  HTTP,
  MODULE,
  OIDC,
] as const;

/** A list of login methods: `AUTHENTICATORS`, or a test's `[...AUTHENTICATORS, fake]`. */
export type AuthenticatorRegistry = readonly AnyAuthenticatorRegistration[];

type Registered = (typeof AUTHENTICATORS)[number];

/** `iam.authenticator.type`: `'none' | 'users-file' | 'http' | 'module' | 'oidc'`. */
export type AuthenticatorType = Registered['type'];

/** An authenticator of a registered type (the public seam: `require('iam-gateway')`). */
export type IdentityAuthenticator = Authenticator<AuthenticatorType>;

type UnionToIntersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;
type KeysConfig<R> = R extends { keys: infer Keys extends Record<string, AuthenticatorKey> } ? ConfigOf<Keys> : never;

/**
 * The typed form of `iam.authenticator` (`GatewayConfig['iam']['authenticator']`): the type and every registered key,
 * whichever type is chosen: `{ type, path, url, module, timeoutMs }`.
 */
export type AuthenticatorConfig = { type: AuthenticatorType } & UnionToIntersection<KeysConfig<Registered>>;
