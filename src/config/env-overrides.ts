import { isSection, valueAt, type Data } from './config-data';
import type { Problem } from './config-error';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { listConfigKeys, type LeafSchema } from './config-schema';

/**
 * Sets every leaf that has an environment variable, coerced to the schema's type (docs/configuration.md); the
 * `iam.authenticator` keys are those of `authenticators`.
 */
export function applyEnvironment(data: Data, env: NodeJS.ProcessEnv, sources: Map<string, string>, authenticators: AuthenticatorRegistry = AUTHENTICATORS): Problem[] {
  const problems: Problem[] = [];
  for (const { key, env: generic, alias, schema } of listConfigKeys(authenticators)) {
    const name = [generic, alias].find((candidate) => candidate !== undefined && env[candidate] !== undefined);
    if (name === undefined) continue;
    const segments = key.split('.');
    const parent = valueAt(data, segments.slice(0, -1));
    if (!isSection(parent)) continue; // the section itself is broken; validation reports it
    const coerced = coerce(env[name] as string, schema);
    if (coerced instanceof Error) {
      problems.push({ path: segments, message: `${key}: ${coerced.message}`, env: name });
      continue;
    }
    parent[segments[segments.length - 1]] = coerced;
    sources.set(key, name);
  }
  return problems;
}

/**
 * Environment values are strings. Values that do not fit the type are passed on unchanged so that
 * validation reports them with the same words as a bad file value.
 */
function coerce(value: string, schema: LeafSchema): unknown {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.includes('array')) {
    if (!value.trimStart().startsWith('[')) {
      return value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== '');
    }
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // reported below
    }
    return new Error(`${JSON.stringify(value)} is not a JSON array (or write a comma-separated list)`);
  }
  if (value === '' && schema.nullable === true) return null;
  if (types.includes('boolean')) {
    if (/^(true|1)$/i.test(value)) return true;
    if (/^(false|0)$/i.test(value)) return false;
    return value;
  }
  if (types.includes('integer') && /^[+-]?\d+$/.test(value.trim())) return Number(value.trim());
  if (types.includes('number') && /^[+-]?(\d+\.?\d*|\.\d+)$/.test(value.trim())) return Number(value.trim());
  return value;
}
