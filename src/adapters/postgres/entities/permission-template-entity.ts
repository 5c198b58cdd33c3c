import { Collection, EntitySchema, OptionalProps, PrimaryKeyProp } from '@mikro-orm/core';
import { TemplatePermissionEntity } from './template-permission-entity';

/** Row of `iam_permission_templates`: one version of a permission set that profiles aggregate. */
export class PermissionTemplateEntity {
  [PrimaryKeyProp]?: 'versionId';
  [OptionalProps]?: 'description' | 'createdAt' | 'updatedAt' | 'version';
  versionId!: string;
  name!: string;
  description: string | null = null;
  permissions = new Collection<TemplatePermissionEntity>(this);
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  version!: number;
}

export const PermissionTemplateSchema = new EntitySchema<PermissionTemplateEntity>({
  class: PermissionTemplateEntity,
  tableName: 'iam_permission_templates',
  properties: {
    versionId: { type: 'string', columnType: 'text', primary: true },
    name: { type: 'string', columnType: 'text' },
    description: { type: 'string', columnType: 'text', nullable: true },
    // The permission set is owned by the template: a code dropped from the set is deleted on flush.
    permissions: { kind: '1:m', entity: () => TemplatePermissionEntity, mappedBy: 'template', orphanRemoval: true },
    createdAt: { type: 'datetime', columnType: 'timestamptz' },
    updatedAt: { type: 'datetime', columnType: 'timestamptz', onUpdate: () => new Date() },
    version: { type: 'integer', version: true },
  },
});
