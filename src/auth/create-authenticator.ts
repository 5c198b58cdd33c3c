import type { GatewayConfig } from '../config/gateway-config';
import type { IdentityAuthenticator } from './authenticator';
import { HttpAuthenticator } from './http-authenticator';
import { ModuleAuthenticator } from './module-authenticator';
import { PasswordVerifierPool } from './password-verifier-pool';
import { UsersFileAuthenticator } from './users-file-authenticator';

/** The authenticator chosen by `iam.authenticator.type`. */
export function createAuthenticator(config: GatewayConfig['iam']['authenticator'], options: { maxPendingVerifications?: number } = {}): IdentityAuthenticator {
  switch (config.type) {
    case 'users-file':
      if (!config.path) throw new Error('config: iam.authenticator.path is required for type users-file');
      return new UsersFileAuthenticator(config.path, new PasswordVerifierPool({ maxPending: options.maxPendingVerifications }));
    case 'http':
      if (!config.url) throw new Error('config: iam.authenticator.url is required for type http');
      return new HttpAuthenticator(config.url, config.timeoutMs);
    case 'module':
      if (!config.module) throw new Error('config: iam.authenticator.module is required for type module');
      return new ModuleAuthenticator(config.module, config.timeoutMs);
  }
}
