import { EntitySchema, PrimaryKeyProp } from '@mikro-orm/core';
import { PermissionTemplateEntity } from './permission-template-entity';

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
