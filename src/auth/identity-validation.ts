import Ajv from 'ajv';
import { MAX_PROFILE_SCOPES } from '../domain/grant-limits';
import { schemaErrorText } from '../domain/schema-errors';
import type { AuthenticatedIdentity } from './authenticator';

/**
 * Values that travel to the host in headers (docs/http-contract.md): visible ASCII, so that no authenticator answer
 * can inject a header line or a control character. Identity domains (an OpenID Provider's issuer URL by default) and
 * scope types and ids are such values.
 */
export const HEADER_SAFE_PATTERN = '^[\\x21-\\x7E]{1,200}$';

/**
 * The ids the admin API names in its paths (users, identities, profiles, template versions): header-safe, and one
 * path segment that reaches the router unchanged, so every id the gateway accepts can be managed. Refused: `/` and
 * `\\` (segment separators; encoded, the front door refuses them), `%` (an encoded `%25` is refused as a
 * double-encoding), `;` (path parameters), and the dot segments `.` and `..` (removed by normalization).
 */
export const IDENTIFIER_PATTERN = '^(?!\\.{1,2}$)[\\x21-\\x24\\x26-\\x2E\\x30-\\x3A\\x3C-\\x5B\\x5D-\\x7E]{1,200}$';

const scopeSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopeType', 'scopeRefId', 'accessMode'],
  properties: {
    scopeType: { type: 'string', pattern: HEADER_SAFE_PATTERN },
    scopeRefId: { type: 'string', pattern: HEADER_SAFE_PATTERN },
    accessMode: { enum: ['READ', 'WRITE'] },
  },
} as const;

export const projectedProfileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['profileId', 'profileName', 'templateVersionId', 'clientTypes'],
  properties: {
    profileId: { type: 'string', pattern: IDENTIFIER_PATTERN },
    profileName: { type: 'string', minLength: 1, maxLength: 200 },
    templateVersionId: { type: 'string', pattern: IDENTIFIER_PATTERN },
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    // True: every resource (#11.31), so no scopes beside it. Omitted: true for a new profile without scopes.
    unscoped: { type: 'boolean' },
    scopes: { type: 'array', items: scopeSchema, maxItems: MAX_PROFILE_SCOPES },
  },
  if: { type: 'object', required: ['unscoped'], properties: { unscoped: { const: true } } },
  then: { type: 'object', properties: { scopes: { type: 'array', maxItems: 0 } } },
} as const;

export const authenticatedIdentitySchema = {
  type: 'object',
  additionalProperties: true,
  required: ['userId', 'identityId', 'identityDomain'],
  properties: {
    userId: { type: 'string', pattern: IDENTIFIER_PATTERN },
    identityId: { type: 'string', pattern: IDENTIFIER_PATTERN },
    identityDomain: { type: 'string', pattern: HEADER_SAFE_PATTERN },
    displayName: { type: 'string', maxLength: 200 },
    profiles: { type: 'array', items: projectedProfileSchema },
  },
} as const;

const ajv = new Ajv({ allErrors: true });
const validateIdentity = ajv.compile(authenticatedIdentitySchema);

/** The identity an authenticator returned, checked; null when it is not usable. */
export function checkAuthenticatedIdentity(value: unknown): { identity: AuthenticatedIdentity } | { error: string } {
  if (!validateIdentity(value)) {
    return { error: `authenticator answer ${schemaErrorText(validateIdentity.errors?.[0])}` };
  }
  const v = value as unknown as AuthenticatedIdentity;
  return {
    identity: {
      userId: v.userId,
      identityId: v.identityId,
      identityDomain: v.identityDomain,
      ...(v.displayName !== undefined ? { displayName: v.displayName } : {}),
      ...(v.profiles !== undefined ? { profiles: v.profiles } : {}),
    },
  };
}
