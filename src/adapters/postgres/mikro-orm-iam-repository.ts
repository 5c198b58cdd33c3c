import { LockMode, type QueryResult } from '@mikro-orm/core';
import { withOrmContext } from './async-context-gate';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { applyProvisioningDocument } from './apply-provisioning';
import type { ProvisioningOptions } from '../../domain/provisioning';
import { claimChanges, endSessionsInTx, listChanges, loadRevocationState, markChangesDelivered } from './change-log';
import { type ChangeRow, type EndSessionsRequest, type EndSessionsResult, type RevocationState } from '../../domain/changes';
import { toRepositoryError } from './connection-failure';
import { AuditEventEntity } from './entities/audit-event-entity';
import { IdentityEntity } from './entities/identity-entity';
import { PermissionTemplateEntity } from './entities/permission-template-entity';
import { ProfileEntity } from './entities/profile-entity';
import { SessionEntity } from './entities/session-entity';
import { UserEntity } from './entities/user-entity';
import { IdentityLinkError, type IamRepository, type IdentityAttach } from '../../domain/iam-repository';
import {
  toAuditEventRecord,
  toIdentityRecord,
  toProfileRecord,
  toSessionRecord,
  toTemplateRecord,
  toUserRecord,
} from './record-mappers';
import { callDecisionIds } from '../../domain/recorded-decisions';
import type {
  AuditEventRecord,
  IdentityRecord,
  ProfileRecord,
  ProvisioningDocument,
  ProvisioningSummary,
  SessionRecord,
  TemplateRecord,
  UserRecord,
} from '../../domain/records';

type SessionPatch = Partial<Pick<SessionRecord, 'lastSeenAt' | 'revokedAt' | 'logoutAt' | 'revokeReason'>>;
const SESSION_PATCH_KEYS = ['lastSeenAt', 'revokedAt', 'logoutAt', 'revokeReason'] as const;

/**
 * `IamRepository` over MikroORM and PostgreSQL (or the embedded PGlite). Every call works in its own
 * forked entity manager, so no state leaks between callers; multi-row writes run in one transaction.
 * Connection failures reject with `DatabaseUnavailableError`.
 */
export class MikroOrmIamRepository implements IamRepository {
  constructor(private readonly orm: MikroORM) {}

  /** Runs `work` in a fresh entity manager and maps connection failures. */
  private async run<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    try {
      return await withOrmContext(() => work(this.orm.em.fork()));
    } catch (error) {
      throw toRepositoryError(error);
    }
  }

  /**
   * A returning user (every login but the first) has both rows and nothing to fill in: two reads answer, without
   * the transaction below (its BEGIN, two `insert … on conflict do nothing`, locking read and COMMIT are a third
   * of a login's statements, each costing database-thread and database CPU while the proxy runs). The same two
   * reads refuse an identity that is another user's, and a new identity for an existing user under
   * `attach: new-user`, without a transaction. Otherwise the transaction decides (and refuses) as before.
   *
   * Two first logins of the same new user can race: both inserts use `on conflict do nothing`, so the
   * loser simply reads the winner's rows instead of failing on the primary key. Whether the user row is new is
   * what this transaction's insert did, and the user row is locked before a new identity is attached, so two
   * identities racing to join one user are decided one after the other.
   */
  async ensurePrincipal(input: { userId: string; identityId: string; identityDomain: string; displayName?: string; attach?: IdentityAttach }): Promise<{
    user: UserRecord;
    identity: IdentityRecord;
  }> {
    const attach = input.attach ?? 'any';
    const existing = await this.run(async (em) => {
      const user = await em.findOne(UserEntity, { userId: input.userId });
      const identity = await em.findOne(IdentityEntity, { identityId: input.identityId });
      if (identity !== null && identity.user.userId !== input.userId) throw anotherUsers(input.identityId, identity.user.userId, input.userId);
      if (user !== null && identity === null && attach === 'new-user') throw notLinked(input.identityId, input.userId);
      if (user === null || identity === null || (user.displayName === null && input.displayName !== undefined)) return null;
      return { user: toUserRecord(user), identity: toIdentityRecord(identity) };
    });
    if (existing) return existing;
    return this.run((em) =>
      em.transactional(async (tx) => {
        const now = new Date();
        const inserted = await tx
          .createQueryBuilder(UserEntity)
          .insert({ userId: input.userId, displayName: input.displayName ?? null, createdAt: now, updatedAt: now })
          .onConflict('userId')
          .ignore()
          .execute<QueryResult<UserEntity>>('run');
        const userIsNew = inserted.affectedRows === 1;
        const user = await tx.findOneOrFail(UserEntity, { userId: input.userId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        const found = await tx.findOne(IdentityEntity, { identityId: input.identityId });
        if (found === null && !userIsNew && attach !== 'any') {
          // A new identity for a user that already existed (the user row is locked: no other identity joins meanwhile).
          const refused = attach === 'new-user' || (await tx.count(IdentityEntity, { user: input.userId, identityDomain: input.identityDomain })) > 0;
          if (refused) throw notLinked(input.identityId, input.userId);
        }
        if (found === null) {
          await tx
            .createQueryBuilder(IdentityEntity)
            .insert({ identityId: input.identityId, user: tx.getReference(UserEntity, input.userId), identityDomain: input.identityDomain, createdAt: now, updatedAt: now })
            .onConflict('identityId')
            .ignore()
            .execute();
        }
        const identity = found ?? (await tx.findOneOrFail(IdentityEntity, { identityId: input.identityId }));
        if (identity.user.userId !== input.userId) {
          // One identity mapped to two users (a host bug, or a provider account naming another user). Refuse
          // rather than log someone in as another user; the transaction writes nothing.
          throw anotherUsers(input.identityId, identity.user.userId, input.userId);
        }
        if (user.displayName === null && input.displayName !== undefined) {
          user.displayName = input.displayName;
          await tx.flush();
        }
        return { user: toUserRecord(user), identity: toIdentityRecord(identity) };
      }),
    );
  }

  getUser(userId: string): Promise<UserRecord | null> {
    return this.run(async (em) => {
      const user = await em.findOne(UserEntity, { userId });
      return user === null ? null : toUserRecord(user);
    });
  }

  getIdentity(identityId: string): Promise<IdentityRecord | null> {
    return this.run(async (em) => {
      const identity = await em.findOne(IdentityEntity, { identityId });
      return identity === null ? null : toIdentityRecord(identity);
    });
  }

  listProfiles(userId: string): Promise<ProfileRecord[]> {
    return this.run(async (em) => {
      const profiles = await em.find(ProfileEntity, { user: userId }, { populate: ['scopes'], orderBy: { profileId: 'asc' } });
      return profiles.map(toProfileRecord);
    });
  }

  getProfile(profileId: string): Promise<ProfileRecord | null> {
    return this.run(async (em) => {
      const profile = await em.findOne(ProfileEntity, { profileId }, { populate: ['scopes'] });
      return profile === null ? null : toProfileRecord(profile);
    });
  }

  getTemplate(versionId: string): Promise<TemplateRecord | null> {
    return this.run(async (em) => {
      const template = await em.findOne(PermissionTemplateEntity, { versionId }, { populate: ['permissions'] });
      return template === null ? null : toTemplateRecord(template);
    });
  }

  listTemplates(): Promise<TemplateRecord[]> {
    return this.run(async (em) => {
      const templates = await em.find(PermissionTemplateEntity, {}, { populate: ['permissions'], orderBy: { versionId: 'asc' } });
      return templates.map(toTemplateRecord);
    });
  }

  insertSession(session: SessionRecord): Promise<void> {
    return this.run(async (em) => {
      await em.insert(SessionEntity, { ...session });
    });
  }

  getSession(sessionId: string): Promise<SessionRecord | null> {
    return this.run(async (em) => {
      const session = await em.findOne(SessionEntity, { sessionId });
      return session === null ? null : toSessionRecord(session);
    });
  }

  idTokenOfSession(sessionId: string): Promise<string | null> {
    return this.run(async (em) => {
      const session = await em.findOne(SessionEntity, { sessionId }, { fields: ['sessionId', 'idpIdToken'] });
      return session?.idpIdToken ?? null;
    });
  }

  getSessionByTokenHash(tokenHash: string): Promise<SessionRecord | null> {
    return this.run(async (em) => {
      const session = await em.findOne(SessionEntity, { tokenHash });
      return session === null ? null : toSessionRecord(session);
    });
  }

  listSessionsOfIdpSession(idpSessionId: string): Promise<SessionRecord[]> {
    return this.run(async (em) => {
      const sessions = await em.find(SessionEntity, { idpSessionId, revokedAt: null, logoutAt: null, expiresAt: { $gt: new Date() } }, { orderBy: { createdAt: 'asc' }, limit: 1000 });
      return sessions.map(toSessionRecord);
    });
  }

  listSessions(userId: string): Promise<SessionRecord[]> {
    return this.run(async (em) => {
      const sessions = await em.find(SessionEntity, { userId }, { orderBy: { createdAt: 'desc', sessionId: 'desc' } });
      return sessions.map(toSessionRecord);
    });
  }

  listSessionsPage(userId: string, limit: number, after: { createdAt: Date; sessionId: string } | null): Promise<SessionRecord[]> {
    return this.run(async (em) => {
      const keyset = after
        ? { $or: [{ createdAt: { $lt: after.createdAt } }, { createdAt: after.createdAt, sessionId: { $lt: after.sessionId } }] }
        : {};
      const sessions = await em.find(SessionEntity, { userId, ...keyset }, { orderBy: { createdAt: 'desc', sessionId: 'desc' }, limit });
      return sessions.map(toSessionRecord);
    });
  }

  updateSession(sessionId: string, patch: SessionPatch): Promise<void> {
    return this.run(async (em) => {
      const changes: SessionPatch = {};
      for (const key of SESSION_PATCH_KEYS) {
        if (patch[key] !== undefined) Object.assign(changes, { [key]: patch[key] });
      }
      if (Object.keys(changes).length === 0) return;
      await em.nativeUpdate(SessionEntity, { sessionId }, changes);
    });
  }

  /** Still active = neither revoked nor logged out, and not expired at `at`. */
  revokeUserSessions(userId: string, reason: string, at: Date, exceptSessionId?: string): Promise<SessionRecord[]> {
    return this.run((em) =>
      em.transactional(async (tx) => {
        const sessions = await tx.find(
          SessionEntity,
          {
            userId,
            revokedAt: null,
            logoutAt: null,
            expiresAt: { $gt: at },
            ...(exceptSessionId === undefined ? {} : { sessionId: { $ne: exceptSessionId } }),
          },
          { orderBy: { createdAt: 'desc', sessionId: 'desc' }, lockMode: LockMode.PESSIMISTIC_WRITE },
        );
        for (const session of sessions) {
          session.revokedAt = at;
          session.revokeReason = reason;
        }
        await tx.flush();
        return sessions.map(toSessionRecord);
      }),
    );
  }

  endSessions(request: EndSessionsRequest): Promise<EndSessionsResult> {
    return this.run((em) => em.transactional((tx) => endSessionsInTx(tx, request)));
  }

  listChanges(afterId: number, alsoIds: number[], limit: number): Promise<ChangeRow[]> {
    return this.run((em) => listChanges(em, afterId, alsoIds, limit));
  }

  claimChanges(limit: number, leaseMs: number): Promise<ChangeRow[]> {
    return this.run((em) => claimChanges(em, limit, leaseMs));
  }

  markChangesDelivered(ids: number[]): Promise<void> {
    return this.run((em) => markChangesDelivered(em, ids));
  }

  loadRevocationState(): Promise<RevocationState> {
    return this.run((em) => loadRevocationState(em));
  }

  insertAudit(events: AuditEventRecord[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    return this.run(async (em) => {
      // The database assigns `id`: a caller-supplied one is ignored so the sequence stays authoritative. `eventId` is
      // the event's own: `on conflict do nothing` makes a retried write of a batch that had committed harmless.
      await em
        .createQueryBuilder(AuditEventEntity)
        .insert(
          events.map(({ id: _ignored, eventId, ...event }) => ({
            ...event,
            ...(eventId === undefined ? {} : { eventId }),
            details: event.details ?? null,
            decisionIds: callDecisionIds(event.details),
          })),
        )
        .onConflict('eventId')
        .ignore()
        .execute();
    });
  }

  findAuditByDecisionId(decisionId: string): Promise<AuditEventRecord | null> {
    return this.run(async (em) => {
      // The row's own decision, or one of a check call's (decision_ids, GIN-indexed): both indexes, one statement.
      const event = await em.findOne(AuditEventEntity, { $or: [{ decisionId }, { decisionIds: { $contains: [decisionId] } }] }, { orderBy: { id: 'asc' } });
      return event === null ? null : toAuditEventRecord(event);
    });
  }

  purgeAudit(before: Date): Promise<number> {
    return this.run(async (em) => {
      let deleted = 0;
      // In batches, so a first purge of a large trail never holds one huge transaction.
      for (;;) {
        const rows = await em.execute<Array<{ count: string | number }>>(
          'with gone as (delete from iam_audit_events where id in (select id from iam_audit_events where occurred_at < ? limit 10000) returning 1) select count(*) as count from gone',
          [before],
        );
        const count = Number(rows[0]?.count ?? 0);
        deleted += count;
        if (count < 10000) return deleted;
      }
    });
  }

  applyProvisioning(document: ProvisioningDocument, options?: ProvisioningOptions): Promise<ProvisioningSummary> {
    return this.run((em) => em.transactional((tx) => applyProvisioningDocument(tx, document, options)));
  }

  ping(): Promise<void> {
    return this.run(async (em) => {
      await em.execute('select 1');
    });
  }
}

function anotherUsers(identityId: string, owner: string, userId: string): IdentityLinkError {
  return new IdentityLinkError('identity-of-another-user', `identity "${identityId}" belongs to user "${owner}", not "${userId}"`);
}

function notLinked(identityId: string, userId: string): IdentityLinkError {
  return new IdentityLinkError('identity-not-linked', `identity "${identityId}" is not linked to the existing user "${userId}"`);
}
