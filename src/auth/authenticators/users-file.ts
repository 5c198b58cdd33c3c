import { PasswordVerifierPool } from '../password-verifier-pool';
import { UsersFileAuthenticator } from '../users-file-authenticator';
import { defineAuthenticator } from './authenticator-registration';

/** `iam.authenticator.type: users-file`: YAML users with argon2id hashes in `iam.authenticator.path`. */
export const USERS_FILE = defineAuthenticator({
  type: 'users-file',
  keys: {
    path: {
      schema: { type: 'string', nullable: true, minLength: 1, default: null, description: 'users file (type users-file), relative to the working directory' },
      required: true,
      form: 'path',
    },
  },
  keyForLoadErrors: 'path',
  create: ({ path }, { maxPendingVerifications }) => new UsersFileAuthenticator(path, new PasswordVerifierPool({ maxPending: maxPendingVerifications })),
});
