import { ProblemError } from '../../domain/problem';
import { defineAuthenticator } from './authenticator-registration';

/**
 * `iam.authenticator.type: oidc`: users sign in at the OpenID Provider (`/iam/auth/oidc/login`, configured by the
 * `iam.oidc` section); the gateway checks no password, so the password login answers 501 and says where to go.
 */
export const OIDC = defineAuthenticator({
  type: 'oidc',
  summary: 'an OpenID Provider, `iam.oidc.*`, [oidc.md](oidc.md)',
  keys: {},
  requires: ['iam.oidc.issuer', 'iam.oidc.client-id', 'iam.oidc.client-secret', 'iam.oidc.redirect-uri'],
  keyForLoadErrors: null,
  create: () => ({
    type: 'oidc',
    authenticate: () =>
      Promise.reject(new ProblemError('IAM_LOGIN_NOT_CONFIGURED', 'This gateway signs users in with OpenID Connect: open /iam/auth/oidc/login (or /iam/login) in a browser.')),
  }),
});
