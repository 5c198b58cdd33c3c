import type { Authenticator } from '../authenticator';
import { typedNameOf, type AnyAuthenticatorRegistration, type AuthenticatorDeps, type AuthenticatorKey } from './authenticator-registration';
import { AUTHENTICATORS, type AuthenticatorRegistry } from './registry';

/** The typed `iam.authenticator` section of a registry: its type and the keys' typed values (`timeoutMs`, …). */
export interface AuthenticatorSection {
  readonly type: string;
}

/** The registration of `type`; throws when the registry has none. */
export function registrationOf(type: string, registry: AuthenticatorRegistry = AUTHENTICATORS): AnyAuthenticatorRegistration {
  const registration = registry.find((candidate) => candidate.type === type);
  if (registration === undefined) throw new Error(`config: iam.authenticator.type: no login method "${type}" (one of ${registry.map((r) => r.type).join(', ')})`);
  return registration;
}

/** The key a start names when the chosen login method cannot be created (its file or module): `iam.authenticator.path`. */
export function keyForLoadErrors(type: string, registry: AuthenticatorRegistry = AUTHENTICATORS): string {
  const registration = registry.find((candidate) => candidate.type === type);
  const name = registration?.keyForLoadErrors ?? null;
  return name === null ? 'iam.authenticator.type' : `iam.authenticator.${name}`;
}

/**
 * The authenticator chosen by `iam.authenticator.type`, created by its registration with its own keys. Throws when a
 * key it requires is unset (the configuration check refuses that first) or when it cannot be created.
 */
export function createAuthenticator<R extends AuthenticatorRegistry = typeof AUTHENTICATORS>(
  config: AuthenticatorSection,
  deps: AuthenticatorDeps = {},
  registry: R = AUTHENTICATORS as unknown as R,
): Authenticator<R[number]['type']> {
  const registration = registrationOf(config.type, registry);
  const values = config as unknown as Record<string, unknown>;
  const settings: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(registration.keys as Record<string, AuthenticatorKey>)) {
    const typed = typedNameOf(name, key);
    const value = values[typed] ?? null;
    if (key.required && value === null) throw new Error(`config: iam.authenticator.${name} is required for type ${config.type}`);
    settings[typed] = value;
  }
  return registration.create(settings as never, deps) as Authenticator<R[number]['type']>;
}
