import { Collection, EntitySchema, OptionalProps, PrimaryKeyProp } from '@mikro-orm/core';

/* A template and its permission codes: one aggregate, one file (the two entities refer to each other). */

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

/** Row of `iam_template_permissions`: one permission code of a template version. */
export class TemplatePermissionEntity {
  [PrimaryKeyProp]?: ['template', 'permissionCode'];
  template!: PermissionTemplateEntity;
  /** `<resource>:<action>`, `<resource>:*` or `*:*`. */
  permissionCode!: string;
}

export const TemplatePermissionSchema = new EntitySchema<TemplatePermissionEntity>({
  class: TemplatePermissionEntity,
  tableName: 'iam_template_permissions',
  properties: {
    template: { kind: 'm:1', entity: () => PermissionTemplateEntity, fieldName: 'version_id', primary: true },
    permissionCode: { type: 'string', columnType: 'text', primary: true },
  },
});
