import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { yamlErrorReports } from '../policy/yaml-errors';
import { schemaErrorText } from '../domain/schema-errors';
import type { AuthenticationOutcome, Authenticator, LoginContext, LoginRequest } from './authenticator';
import { HEADER_SAFE_PATTERN, IDENTIFIER_PATTERN } from './identity-validation';
import { dummyPasswordHash } from './password-hash';
import { PasswordVerifierPool } from './password-verifier-pool';

interface UsersFileEntry {
  username: string;
  passwordHash: string;
  userId: string;
  identityId: string;
  identityDomain: string;
  displayName?: string;
  enabled?: boolean;
}

const usersFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['users'],
  properties: {
    users: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['username', 'passwordHash', 'userId', 'identityId', 'identityDomain'],
        properties: {
          username: { type: 'string', minLength: 1, maxLength: 200 },
          passwordHash: { type: 'string', pattern: '^\\$argon2id\\$' },
          userId: { type: 'string', pattern: IDENTIFIER_PATTERN },
          identityId: { type: 'string', pattern: IDENTIFIER_PATTERN },
          identityDomain: { type: 'string', pattern: HEADER_SAFE_PATTERN },
          displayName: { type: 'string', maxLength: 200 },
          enabled: { type: 'boolean' },
        },
      },
    },
  },
} as const;

/** Reads and validates a users file; throws an Error naming the file and the problem. */
export function readUsersFile(path: string): Map<string, UsersFileEntry> {
  let document: unknown;
  try {
    const text = readFileSync(path, 'utf8');
    const parsed = parseDocument(text, { prettyErrors: true });
    // The first error and a few after it, one per line: one slip makes the library report every line below it.
    if (parsed.errors.length > 0) throw new Error(yamlErrorReports(text, parsed.errors).map((error) => error.message).join('\n  '));
    document = parsed.toJS();
  } catch (error) {
    throw new Error(`users file ${path}: ${(error as Error).message}`);
  }
  const validate = new Ajv({ allErrors: true }).compile(usersFileSchema);
  if (!validate(document)) {
    const problems = (validate.errors ?? []).map(schemaErrorText).join('; ');
    throw new Error(`users file ${path}: ${problems}`);
  }
  const users = new Map<string, UsersFileEntry>();
  for (const entry of (document as { users: UsersFileEntry[] }).users) {
    const key = entry.username.toLowerCase();
    if (users.has(key)) throw new Error(`users file ${path}: username "${entry.username}" appears twice`);
    users.set(key, entry);
  }
  return users;
}

/**
 * `users-file` authenticator: YAML users with argon2id hashes, for demos and small setups.
 * Every path verifies one argon2id hash, so unknown, disabled and wrong-password logins take the same time.
 */
export class UsersFileAuthenticator implements Authenticator<'users-file'> {
  readonly type = 'users-file' as const;
  private readonly users: Map<string, UsersFileEntry>;
  private readonly passwords: PasswordVerifierPool;

  /** `passwords`: where hashes are verified (default: a pool of low-priority threads, closed with this). */
  constructor(path: string, passwords: PasswordVerifierPool = new PasswordVerifierPool()) {
    this.users = readUsersFile(path);
    this.passwords = passwords;
  }

  async authenticate(request: LoginRequest, context?: LoginContext): Promise<AuthenticationOutcome> {
    const entry = this.users.get(request.username.toLowerCase());
    const passwordMatches = await this.passwords.verify(entry?.passwordHash ?? (await dummyPasswordHash()), request.password, context?.clientAddress ?? '');
    if (!entry || !passwordMatches) return { kind: 'rejected', reason: 'invalid-credentials' };
    if (entry.enabled === false) return { kind: 'rejected', reason: 'disabled' };
    return {
      kind: 'accepted',
      identity: {
        userId: entry.userId,
        identityId: entry.identityId,
        identityDomain: entry.identityDomain,
        ...(entry.displayName !== undefined ? { displayName: entry.displayName } : {}),
      },
    };
  }

  starvedVerifications(): number {
    return this.passwords.starvations;
  }

  async close(): Promise<void> {
    await this.passwords.close();
  }
}
