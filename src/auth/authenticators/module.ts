import { ModuleAuthenticator } from '../module-authenticator';
import { defineAuthenticator } from './authenticator-registration';
import { TIMEOUT_KEY } from './timeout-key';

/** `iam.authenticator.type: module`: a JavaScript module (a file or an installed package) exporting `authenticate()`. */
export const MODULE = defineAuthenticator({
  type: 'module',
  keys: {
    module: {
      schema: { type: 'string', nullable: true, minLength: 1, default: null, description: 'JavaScript module exporting authenticate() (type module)' },
      required: true,
      form: 'module',
    },
    timeout: TIMEOUT_KEY,
  },
  keyForLoadErrors: 'module',
  create: ({ module, timeoutMs }) => new ModuleAuthenticator(module, timeoutMs),
});
