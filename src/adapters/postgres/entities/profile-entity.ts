import { ArrayType, Collection, EntitySchema, OptionalProps, PrimaryKeyProp } from '@mikro-orm/core';
import { PermissionTemplateEntity } from './permission-template-entity';
import { UserEntity } from './user-entity';
import type { AccessMode } from '../../../domain/records';

/* A profile and its resource scopes: one aggregate, one file (the two entities refer to each other). */

/** Row of `iam_profiles`: an authorization profile of a user (template + client types + scopes + flags). */
export class ProfileEntity {
  [PrimaryKeyProp]?: 'profileId';
  [OptionalProps]?: 'enabled' | 'revoked' | 'unscoped' | 'createdAt' | 'updatedAt' | 'version';
  profileId!: string;
  user!: UserEntity;
  profileName!: string;
  template!: PermissionTemplateEntity;
  clientTypes!: string[];
  enabled = true;
  revoked = false;
  /** Applies to every resource; only ever set explicitly (never by removing the last scope). Implies no scopes. */
  unscoped = false;
  scopes = new Collection<ResourceScopeEntity>(this);
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  /** Optimistic lock, raised on every change (also when only the scopes change: `updatedAt` moves then). */
  version!: number;
}

export const ProfileSchema = new EntitySchema<ProfileEntity>({
  class: ProfileEntity,
  tableName: 'iam_profiles',
  properties: {
    profileId: { type: 'string', columnType: 'text', primary: true },
    user: { kind: 'm:1', entity: () => UserEntity, fieldName: 'user_id', index: true },
    profileName: { type: 'string', columnType: 'text' },
    template: { kind: 'm:1', entity: () => PermissionTemplateEntity, fieldName: 'template_version_id', index: true },
    clientTypes: { type: ArrayType, columnType: 'text[]' },
    enabled: { type: 'boolean' },
    revoked: { type: 'boolean' },
    unscoped: { type: 'boolean' },
    // Scopes are replaced as a set: one dropped from the collection is deleted on flush.
    scopes: { kind: '1:m', entity: () => ResourceScopeEntity, mappedBy: 'profile', orphanRemoval: true },
    createdAt: { type: 'datetime', columnType: 'timestamptz' },
    updatedAt: { type: 'datetime', columnType: 'timestamptz', onUpdate: () => new Date() },
    version: { type: 'integer', version: true },
  },
});

/**
 * Row of `iam_resource_scopes`: limits a profile's permissions to one resource. The primary key
 * (profile, scopeType, scopeRefId) is the uniqueness rule: one access mode per resource and profile.
 */
export class ResourceScopeEntity {
  [PrimaryKeyProp]?: ['profile', 'scopeType', 'scopeRefId'];
  profile!: ProfileEntity;
  scopeType!: string;
  scopeRefId!: string;
  accessMode!: AccessMode;
}

export const ResourceScopeSchema = new EntitySchema<ResourceScopeEntity>({
  class: ResourceScopeEntity,
  tableName: 'iam_resource_scopes',
  properties: {
    profile: { kind: 'm:1', entity: () => ProfileEntity, fieldName: 'profile_id', primary: true },
    scopeType: { type: 'string', columnType: 'text', primary: true },
    scopeRefId: { type: 'string', columnType: 'text', primary: true },
    accessMode: { type: 'string', columnType: 'text' },
  },
});
