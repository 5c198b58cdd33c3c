import { OptimisticLockError, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AuditEventEntity } from './entities/audit-event-entity';
import type { AuditEventRecord } from '../../domain/records';
import { type AdminAuditContext, AdminWriteError, type RaisedAuthorization, type VersionPrecondition } from '../../domain/admin-repository';

/**
 * Inserts the audit row of an admin change inside the caller's transaction, as its last statement: if the
 * change fails the row is never written, and if the row cannot be written the change is rolled back.
 */
export async function insertAdminAudit(
  em: EntityManager,
  context: AdminAuditContext,
  event: { action: string; targetType: string; targetId: string; details: Record<string, unknown> },
): Promise<void> {
  const row: Omit<AuditEventRecord, 'id'> = {
    occurredAt: new Date(),
    actorUserId: context.actorUserId,
    action: event.action,
    targetType: event.targetType,
    targetId: event.targetId,
    outcome: 'success',
    requestId: context.requestId,
    decisionId: null,
    clientAddress: context.clientAddress,
    details: event.details,
  };
  await em.insert(AuditEventEntity, row);
}

/**
 * Takes the row lock of `table` for `key` (`select … for update`), serializing concurrent admin writes to
 * the same object until commit. Resolves false when there is no such row (yet).
 */
export async function lockRow(em: EntityManager, table: string, keyColumn: string, key: string): Promise<boolean> {
  const rows = await em.execute<Array<{ found: number }>>(`select 1 as found from "${table}" where "${keyColumn}" = ? for update`, [key]);
  return rows.length > 0;
}

/**
 * Raises the authorization version of one user, or of every user with a profile on `templateVersionId`,
 * in SQL (`version + 1` keeps the user's optimistic lock honest). Do not call it for a user entity that is
 * loaded and modified in the same entity manager.
 */
export async function raiseAuthorizationVersions(
  em: EntityManager,
  target: { userId: string } | { templateVersionId: string },
): Promise<RaisedAuthorization[]> {
  const where =
    'userId' in target
      ? { sql: 'user_id = ?', param: target.userId }
      : { sql: 'user_id in (select user_id from iam_profiles where template_version_id = ?)', param: target.templateVersionId };
  const rows = await em.execute<Array<{ user_id: string; authorization_version: number }>>(
    `update iam_users set authorization_version = authorization_version + 1, version = version + 1, updated_at = now()
     where ${where.sql} returning user_id, authorization_version`,
    [where.param],
  );
  return rows.map((row) => ({ userId: row.user_id, authorizationVersion: Number(row.authorization_version) })).sort((a, b) => (a.userId < b.userId ? -1 : 1));
}

/** Two admins creating the same object at once: the loser gets a conflict, never a 500. */
export function toAdminWriteError(error: unknown): unknown {
  if (error instanceof UniqueConstraintViolationException) return new AdminWriteError('conflict', 'The object was created concurrently; retry.');
  if (error instanceof OptimisticLockError) return new AdminWriteError('conflict', 'The object was changed concurrently; retry.');
  return error;
}

/** The fields whose values differ between two summaries (for the audit row's `changed`). */
export function changedFields(before: Record<string, unknown> | null, after: Record<string, unknown>): string[] {
  if (before === null) return Object.keys(after);
  return Object.keys(after).filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
}

/**
 * `If-Match` against the version read under the row lock (RFC 9110 §13.1.1): `*` needs the object to exist, a
 * version must be the current one; otherwise the write changes nothing (409), so an update is never lost silently.
 */
export function checkPrecondition(what: string, stored: { version: number } | null, precondition: VersionPrecondition): void {
  if (precondition === null) return;
  if (precondition === 'absent') {
    if (stored !== null) throw new AdminWriteError('conflict', `If-None-Match *: the ${what} already exists (version ${stored.version}); it was not replaced.`);
    return;
  }
  if (stored === null || (precondition !== '*' && stored.version !== precondition)) {
    throw new AdminWriteError('conflict', `If-Match ${String(precondition)} does not match the ${what}'s current version ${stored?.version ?? '(none)'}.`);
  }
}

/** What an audit row keeps of a written object, and compares for `changed`: not its lock version. */
export function withoutVersion<T extends { version: number }>(record: T): Omit<T, 'version'>;
export function withoutVersion<T extends { version: number }>(record: T | null): Omit<T, 'version'> | null;
export function withoutVersion<T extends { version: number }>(record: T | null): Omit<T, 'version'> | null {
  if (record === null) return null;
  const { version: _version, ...rest } = record;
  return rest;
}
