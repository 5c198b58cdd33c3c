/**
 * Create-missing versus overwrite (docs/threat-model.md #11.22). Start-time provisioning (`iam.provision.file`) and a plain
 * `iam-gateway provision FILE` only create what the database does not hold yet, never touching an existing
 * template, user, identity or profile (Keycloak's import default), so a restart never reverts an admin API
 * edit; `provision FILE --overwrite` syncs the database to the file. Either way, with `audit` set, every
 * object created or updated gets an audit row with the given actor (e.g. `provisioning`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { AuditEventEntity } from './entities/audit-event-entity';
import type { AuditEventRecord, ProvisioningDocument } from '../../domain/records';
import type { ProvisioningChange, ProvisioningOptions } from '../../domain/provisioning';

async function storedIds(em: EntityManager, table: string, column: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await em.execute<Array<{ id: string }>>(`select "${column}" as id from "${table}" where "${column}" in (${ids.map(() => '?').join(', ')})`, ids);
  return new Set(rows.map((row) => row.id));
}

const idsOf = <T>(items: T[] | undefined, key: (item: T) => unknown): string[] =>
  (items ?? []).map(key).filter((id): id is string => typeof id === 'string');

/**
 * The part of `document` the database does not hold: missing templates; for each user, the user itself
 * when missing (an existing user is kept as a bare reference, so none of its fields change) with only its
 * missing identities and profiles (a new profile brings its scopes).
 */
export async function missingPart(em: EntityManager, document: ProvisioningDocument): Promise<ProvisioningDocument> {
  const users = document.users ?? [];
  // One after the other: the queries share the transaction's connection.
  const templates = await storedIds(em, 'iam_permission_templates', 'version_id', idsOf(document.templates, (t) => t.versionId));
  const userIds = await storedIds(em, 'iam_users', 'user_id', idsOf(users, (u) => u.userId));
  const identities = await storedIds(em, 'iam_identities', 'identity_id', idsOf(users.flatMap((u) => u.identities ?? []), (i) => i.identityId));
  const profiles = await storedIds(em, 'iam_profiles', 'profile_id', idsOf(users.flatMap((u) => u.profiles ?? []), (p) => p.profileId));
  return {
    templates: (document.templates ?? []).filter((template) => !templates.has(template.versionId)),
    users: users.map((user) => {
      const missing = {
        identities: (user.identities ?? []).filter((identity) => !identities.has(identity.identityId)),
        profiles: (user.profiles ?? []).filter((profile) => !profiles.has(profile.profileId)),
      };
      return userIds.has(user.userId) ? { userId: user.userId, ...missing } : { ...user, ...missing };
    }),
  };
}

/** Inserts one audit row per change, inside the run's transaction (a failed run leaves none). */
export async function auditProvisioningChanges(em: EntityManager, changes: ProvisioningChange[], options: ProvisioningOptions): Promise<void> {
  if (options.audit === null || changes.length === 0) return;
  const occurredAt = new Date();
  const rows: Array<Omit<AuditEventRecord, 'id'>> = changes.map((change) => ({
    occurredAt,
    actorUserId: options.audit!.actorUserId,
    action: `provisioning.${change.kind}.${change.action}`,
    targetType: change.kind,
    targetId: change.id,
    outcome: 'success',
    requestId: null,
    decisionId: null,
    clientAddress: null,
    details: { source: options.audit!.source, overwrite: options.overwrite, changed: change.fields },
  }));
  await em.insertMany(AuditEventEntity, rows);
}
