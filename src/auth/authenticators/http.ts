import { HttpAuthenticator } from '../http-authenticator';
import { defineAuthenticator } from './authenticator-registration';
import { TIMEOUT_KEY } from './timeout-key';

/** `iam.authenticator.type: http`: the login is POSTed to the host's own credential check at `iam.authenticator.url`. */
export const HTTP = defineAuthenticator({
  type: 'http',
  keys: {
    url: {
      schema: { type: 'string', nullable: true, minLength: 1, format: 'http-url', default: null, description: 'login endpoint of the host (type http)' },
      required: true,
      form: 'text',
    },
    timeout: TIMEOUT_KEY,
  },
  keyForLoadErrors: 'url',
  create: ({ url, timeoutMs }) => new HttpAuthenticator(url, timeoutMs),
});
