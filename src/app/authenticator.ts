import type { GatewayConfig } from '../config';
import { ProblemError } from '../domain/problem';
import type { IdentityAuthenticator } from '../auth/authenticator';
import { HttpAuthenticator } from '../auth/http-authenticator';
import { ModuleAuthenticator } from '../auth/module-authenticator';
import { PasswordVerifierPool } from '../auth/password-verifier-pool';
import { UsersFileAuthenticator } from '../auth/users-file-authenticator';

/**
 * `iam.authenticator.type: none` (the shipped default): the gateway starts and authorizes, but nobody can log in
 * until an authenticator is configured; a login answers 501 IAM_LOGIN_NOT_CONFIGURED, never a session.
 */
const NO_AUTHENTICATOR: IdentityAuthenticator = {
  type: 'none',
  authenticate: () =>
    Promise.reject(new ProblemError('IAM_LOGIN_NOT_CONFIGURED', 'No authenticator is configured (iam.authenticator.type is none); logins are off.')),
};

/**
 * `iam.authenticator.type: oidc`: users sign in at the OpenID Provider (`/iam/auth/oidc/login`); the gateway checks
 * no password, so the password login answers 501 and says where to go.
 */
const OIDC_ONLY: IdentityAuthenticator = {
  type: 'oidc',
  authenticate: () =>
    Promise.reject(new ProblemError('IAM_LOGIN_NOT_CONFIGURED', 'This gateway signs users in with OpenID Connect: open /iam/auth/oidc/login (or /iam/login) in a browser.')),
};

/** The authenticator chosen by `iam.authenticator.type`. */
export function createAuthenticator(config: GatewayConfig['iam']['authenticator'], options: { maxPendingVerifications?: number } = {}): IdentityAuthenticator {
  switch (config.type) {
    case 'none':
      return NO_AUTHENTICATOR;
    case 'users-file':
      if (!config.path) throw new Error('config: iam.authenticator.path is required for type users-file');
      return new UsersFileAuthenticator(config.path, new PasswordVerifierPool({ maxPending: options.maxPendingVerifications }));
    case 'http':
      if (!config.url) throw new Error('config: iam.authenticator.url is required for type http');
      return new HttpAuthenticator(config.url, config.timeoutMs);
    case 'oidc':
      return OIDC_ONLY;
    case 'module':
      if (!config.module) throw new Error('config: iam.authenticator.module is required for type module');
      return new ModuleAuthenticator(config.module, config.timeoutMs);
  }
}
