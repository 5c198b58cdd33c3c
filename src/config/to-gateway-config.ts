import * as path from 'node:path';
import { AUTHENTICATORS, type AuthenticatorRegistry } from '../auth/authenticators';
import { configSchema, type RawConfig, type TypedConfig } from './config-schema';
import type { GatewayConfig } from './gateway-config';
import { toTypedForm } from './key-forms';

/** The validated YAML form → what the code uses, each key as its declaration in the schema says. Nothing here can fail: validation ran first. */
export function toGatewayConfig(
  raw: RawConfig,
  cwd: string,
  source: { file: string; packagedPolicy?: boolean },
  warnings: string[],
  authenticators: AuthenticatorRegistry = AUTHENTICATORS,
): GatewayConfig {
  // The built-in schema's keys: another registry changes only the `iam.authenticator` section, whose conversion takes it.
  const typed = toTypedForm(configSchema, raw as unknown as Record<string, unknown>, { cwd, authenticators }) as unknown as TypedConfig;
  return { ...typed, source: { file: source.file, directory: path.dirname(source.file), packagedPolicy: source.packagedPolicy === true }, warnings };
}
