import type { AuthenticatorKey } from './authenticator-registration';
import { AUTHENTICATORS, type AuthenticatorRegistry } from './registry';

/** One key of `iam.authenticator` and the login methods that read it. */
export interface RegisteredKey {
  name: string;
  key: AuthenticatorKey;
  types: string[];
}

/**
 * The keys of `iam.authenticator` besides `type`, each once: the keys of one login method first (in registry
 * order), then the keys several share (`timeout`). Throws when the registry is inconsistent: a type registered twice,
 * a key named `type`, a key declared differently by two methods, a `keyForLoadErrors` that is not one of its keys.
 */
export function authenticatorKeys(registry: AuthenticatorRegistry = AUTHENTICATORS): RegisteredKey[] {
  const byName = new Map<string, RegisteredKey>();
  const types = new Set<string>();
  for (const registration of registry) {
    if (types.has(registration.type)) throw new Error(`authenticator registry: type "${registration.type}" is registered twice`);
    types.add(registration.type);
    const keys = registration.keys as Record<string, AuthenticatorKey>;
    if (registration.keyForLoadErrors !== null && !(registration.keyForLoadErrors in keys)) {
      throw new Error(`authenticator registry: "${registration.type}" names iam.authenticator.${registration.keyForLoadErrors} for load errors but has no such key`);
    }
    for (const [name, key] of Object.entries(keys)) {
      if (name === 'type') throw new Error(`authenticator registry: "${registration.type}" declares iam.authenticator.type, which chooses the login method`);
      const known = byName.get(name);
      if (known === undefined) byName.set(name, { name, key, types: [registration.type] });
      else if (JSON.stringify([known.key.schema, known.key.form]) !== JSON.stringify([key.schema, key.form])) {
        throw new Error(`authenticator registry: "${known.types[0]}" and "${registration.type}" declare iam.authenticator.${name} differently`);
      } else known.types.push(registration.type);
    }
  }
  const keys = [...byName.values()];
  return [...keys.filter((entry) => entry.types.length === 1), ...keys.filter((entry) => entry.types.length > 1)];
}
