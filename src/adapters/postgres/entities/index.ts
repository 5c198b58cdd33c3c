/** The MikroORM entities of the `iam_` tables; handed to MikroORM explicitly (no file-system discovery). */
import { AuditEventSchema } from './audit-event-entity';
import { IdentitySchema } from './identity-entity';
import { PermissionTemplateSchema } from './permission-template-entity';
import { ProfileSchema } from './profile-entity';
import { ResourceScopeSchema } from './resource-scope-entity';
import { SessionSchema } from './session-entity';
import { TemplatePermissionSchema } from './template-permission-entity';
import { UserSchema } from './user-entity';

export { AuditEventEntity } from './audit-event-entity';
export { IdentityEntity } from './identity-entity';
export { PermissionTemplateEntity } from './permission-template-entity';
export { ProfileEntity } from './profile-entity';
export { ResourceScopeEntity } from './resource-scope-entity';
export { SessionEntity } from './session-entity';
export { TemplatePermissionEntity } from './template-permission-entity';
export { UserEntity } from './user-entity';

/** Every entity schema, for `MikroORM.init({ entities })`. */
export const IAM_ENTITIES = [
  UserSchema,
  IdentitySchema,
  PermissionTemplateSchema,
  TemplatePermissionSchema,
  ProfileSchema,
  ResourceScopeSchema,
  SessionSchema,
  AuditEventSchema,
] as const;
