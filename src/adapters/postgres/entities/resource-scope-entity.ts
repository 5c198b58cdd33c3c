import { EntitySchema, PrimaryKeyProp } from '@mikro-orm/core';
import type { AccessMode } from '../../../domain/records';
import { ProfileEntity } from './profile-entity';

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
