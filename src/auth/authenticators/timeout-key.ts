import type { AuthenticatorKey } from './authenticator-registration';

/** `iam.authenticator.timeout`: shared by the login methods that call out (`http`, `module`). */
export const TIMEOUT_KEY = {
  schema: { type: ['string', 'integer'], format: 'duration', minimum: 0, default: '5s', description: 'timeout of one authenticator call' },
  required: false,
  form: 'duration',
} as const satisfies AuthenticatorKey;
