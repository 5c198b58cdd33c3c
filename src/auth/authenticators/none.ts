import { ProblemError } from '../../domain/problem';
import { defineAuthenticator } from './authenticator-registration';

/**
 * `iam.authenticator.type: none` (the shipped default): the gateway starts and authorizes, but nobody can log in
 * until an authenticator is configured; a login answers 501 IAM_LOGIN_NOT_CONFIGURED, never a session.
 */
export const NONE = defineAuthenticator({
  type: 'none',
  summary: 'no logins: 501 IAM_LOGIN_NOT_CONFIGURED',
  keys: {},
  keyForLoadErrors: null,
  create: () => ({
    type: 'none',
    authenticate: () =>
      Promise.reject(new ProblemError('IAM_LOGIN_NOT_CONFIGURED', 'No authenticator is configured (iam.authenticator.type is none); logins are off.')),
  }),
});
