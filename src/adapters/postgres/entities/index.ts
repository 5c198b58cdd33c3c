/** The MikroORM entities of the `iam_` tables; handed to MikroORM explicitly (no file-system discovery). */
import { AuditEventSchema } from './audit-event-entity';
import { IdentitySchema } from './identity-entity';
import { PermissionTemplateSchema, TemplatePermissionSchema } from './permission-template-entity';
import { ProfileSchema, ResourceScopeSchema } from './profile-entity';
import { SessionSchema } from './session-entity';
import { UserSchema } from './user-entity';

export { AuditEventEntity } from './audit-event-entity';
export { IdentityEntity } from './identity-entity';
export { PermissionTemplateEntity, TemplatePermissionEntity } from './permission-template-entity';
export { ProfileEntity, ResourceScopeEntity } from './profile-entity';
export { SessionEntity } from './session-entity';
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
