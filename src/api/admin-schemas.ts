/**
 * JSON Schemas of the admin API bodies: the pieces of the provisioning file,
 * with `additionalProperties: false` so unknown properties are rejected (docs/http-contract.md).
 */
import type { JSONSchemaType } from 'ajv';
import { IDENTIFIER_PATTERN } from '../auth/identity-validation';
import { MAX_PROFILE_SCOPES, MAX_TEMPLATE_PERMISSIONS } from '../domain/grant-limits';
import type { AccessMode, ScopeRecord } from '../domain/records';

export interface TemplateBody {
  name: string;
  permissions: string[];
  description?: string;
}

export interface UserBody {
  displayName?: string;
  enabled: boolean;
}

export interface IdentityBody {
  userId: string;
  identityDomain: string;
  enabled: boolean;
}

export interface ProfileBody {
  userId: string;
  profileName: string;
  templateVersionId: string;
  clientTypes: string[];
  enabled: boolean;
  revoked: boolean;
  /** Every resource (drops the scopes). Omitted: true for a new profile, else unchanged. */
  unscoped?: boolean;
}

export type ScopesBody = ScopeRecord[];

export interface RevokeBody {
  reason?: string;
}

const identifier = { type: 'string', pattern: IDENTIFIER_PATTERN } as const;

export const templateBodySchema: JSONSchemaType<TemplateBody> = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'permissions'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: 'string', maxLength: 2000, nullable: true },
    // Each code is also checked with isValidPermissionCode (the grammar of docs/policy-format.md).
    permissions: { type: 'array', items: { type: 'string', minLength: 3, maxLength: 200 }, uniqueItems: true, maxItems: MAX_TEMPLATE_PERMISSIONS },
  },
};

export const userBodySchema: JSONSchemaType<UserBody> = {
  type: 'object',
  additionalProperties: false,
  required: ['enabled'],
  properties: {
    displayName: { type: 'string', maxLength: 200, nullable: true },
    enabled: { type: 'boolean' },
  },
};

export const identityBodySchema: JSONSchemaType<IdentityBody> = {
  type: 'object',
  additionalProperties: false,
  required: ['userId', 'identityDomain', 'enabled'],
  properties: {
    userId: identifier,
    identityDomain: identifier,
    enabled: { type: 'boolean' },
  },
};

export const profileBodySchema: JSONSchemaType<ProfileBody> = {
  type: 'object',
  additionalProperties: false,
  required: ['userId', 'profileName', 'templateVersionId', 'clientTypes', 'enabled', 'revoked'],
  properties: {
    userId: identifier,
    profileName: { type: 'string', minLength: 1, maxLength: 200 },
    templateVersionId: identifier,
    clientTypes: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, uniqueItems: true, maxItems: 50 },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    unscoped: { type: 'boolean', nullable: true },
  },
};

export const scopesBodySchema: JSONSchemaType<ScopesBody> = {
  type: 'array',
  maxItems: MAX_PROFILE_SCOPES,
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['scopeType', 'scopeRefId', 'accessMode'],
    properties: {
      scopeType: identifier,
      scopeRefId: identifier,
      accessMode: { type: 'string', enum: ['READ', 'WRITE'] as AccessMode[] },
    },
  },
};

export const revokeBodySchema: JSONSchemaType<RevokeBody> = {
  type: 'object',
  additionalProperties: false,
  required: [],
  properties: {
    // Stored as the session's revokeReason; visible ASCII only, like every identifier.
    reason: { type: 'string', pattern: '^[\\x20-\\x7E]{1,200}$', nullable: true },
  },
};

/** A path parameter naming an object: the identifier rule of the bodies. */
export const IDENTIFIER_REGEX = new RegExp(IDENTIFIER_PATTERN);
