/** What the rest of the gateway may use from persistence/ (entities stay inside). */
export { openDatabase, type OpenDatabase } from './database';
export { startEmbeddedDatabase, type EmbeddedDatabase } from './embedded-database';
export { DatabaseUnavailableError, ProvisioningError, type IamRepository } from './iam-repository';
export { migrateDown, migrateUp, migrationStatus, type MigrationStatus } from './migrator';
export { MikroOrmIamRepository } from './mikro-orm-iam-repository';
export { createOrm, type OrmOptions } from './orm';
export type * from './records';
export {
  AdminWriteError,
  MikroOrmAdminRepository,
  escapeLike,
  type AdminAuditContext,
  type AdminRepository,
  type AdminWriteErrorKind,
  type AuditListQuery,
  type IdentityWriteResult,
  type ProfileInput,
  type ProfileWriteResult,
  type RaisedAuthorization,
  type TemplateWriteResult,
  type UserListQuery,
  type UserWriteResult,
  type VersionPrecondition,
} from './admin-repository';
