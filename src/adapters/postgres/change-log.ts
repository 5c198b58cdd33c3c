import type { EntityManager } from '@mikro-orm/postgresql';
import type { StoreEvent } from '../../domain/token-record';
import type { EndSessionsRequest, EndSessionsResult, ChangeActor, EndingAudit, PrincipalChange, ChangeRow, RevocationState, UserRevocation } from '../../domain/changes';

/**
 * The change feed (`iam_changes`, a transactional outbox): every change other gateway instances must act on
 * is written as a row in the transaction that makes the change, so it exists exactly when the change does.
 * A deliverer applies each row's token-store effects and publishes it until done; every instance also reads
 * the feed on an interval, so a lost publish is seen within that interval (docs/threat-model.md, "How revocation and changes reach every instance").
 */

export async function insertChanges(em: EntityManager, events: StoreEvent[]): Promise<void> {
  if (events.length === 0) return;
  const values = events.map(() => '(cast(? as jsonb))').join(', ');
  await em.execute(`insert into iam_changes (event) values ${values}`, events.map((event) => JSON.stringify(event)));
}

/**
 * Ends live sessions in the caller's transaction and writes their change rows, and with `request.audit` the
 * audit row of each session ended: the ending and its audit rows are stored together or not at all, and a
 * request applied twice (a spooled one replayed) ends nothing the second time and writes no second row.
 */
export async function endSessionsInTx(em: EntityManager, request: EndSessionsRequest): Promise<EndSessionsResult> {
  if (request.userId === null && (request.sessionIds === undefined || request.raiseEpoch)) {
    throw new TypeError('endSessions without a userId needs sessionIds and cannot raise an epoch');
  }
  let sessionEpoch: number | null = null;
  let sessionsRevokedAt: Date | null = null;
  if (request.raiseEpoch) {
    // The instant goes with the epoch, in this transaction: whoever sees the one sees the other. It never moves
    // back (greatest ignores null): a record written late by the retry queue keeps a later revocation's instant.
    const rows = await em.execute<Array<{ session_epoch: number; sessions_revoked_at: Date | string }>>(
      `update iam_users set session_epoch = session_epoch + 1, sessions_revoked_at = greatest(sessions_revoked_at, cast(? as timestamptz)),
       version = version + 1, updated_at = now() where user_id = ? returning session_epoch, sessions_revoked_at`,
      [request.at, request.userId],
    );
    const row = rows[0];
    if (row !== undefined) {
      sessionEpoch = Number(row.session_epoch);
      sessionsRevokedAt = new Date(row.sessions_revoked_at);
    }
  }
  const where = ['revoked_at is null', 'logout_at is null', 'expires_at > ?'];
  const params: unknown[] = [request.at];
  if (request.userId !== null) {
    where.push('user_id = ?');
    params.push(request.userId);
  }
  if (request.sessionIds !== undefined) {
    if (request.sessionIds.length === 0) where.push('false');
    else where.push(`session_id in (${request.sessionIds.map(() => '?').join(', ')})`);
    params.push(...request.sessionIds);
  }
  if (typeof request.allExcept === 'string') {
    where.push('session_id <> ?');
    params.push(request.allExcept);
  }
  if (request.identityId !== undefined) {
    where.push('identity_id = ?');
    params.push(request.identityId);
  }
  if (request.createdBefore !== undefined) {
    where.push('created_at <= ?');
    params.push(request.createdBefore);
  }
  const set = request.logout ? 'logout_at = ?' : 'revoked_at = ?, revoke_reason = ?';
  const setParams = request.logout ? [request.at] : [request.at, request.reason];
  const rows = await em.execute<Array<{ session_id: string; user_id: string; token_hash: string; expires_at: Date | string }>>(
    `update iam_sessions set ${set} where ${where.join(' and ')} returning session_id, user_id, token_hash, expires_at`,
    [...setParams, ...params],
  );
  const ended = rows.map((row) => ({ sessionId: row.session_id, userId: row.user_id, tokenHash: row.token_hash, expiresAt: new Date(row.expires_at) }));
  const reason = request.logout ? 'logout' : request.reason;
  const events: StoreEvent[] = ended.map((session) => ({
    type: 'session-ended',
    sessionId: session.sessionId,
    tokenHash: session.tokenHash,
    userId: session.userId,
    reason,
    expiresAt: session.expiresAt.toISOString(),
  }));
  if (sessionEpoch !== null && request.userId !== null) events.push({ type: 'user-sessions-ended', userId: request.userId, reason, sessionEpoch, revokedAt: sessionsRevokedAt!.toISOString() });
  await insertChanges(em, events);
  const audit = request.audit;
  if (audit) {
    for (const session of ended) {
      const details = audit.details !== null && request.userId === null ? { ...audit.details, userId: session.userId } : audit.details;
      await insertAudit(em, { ...audit, details }, 'session', session.sessionId, request.at);
    }
  }
  return { ended: ended.map(({ sessionId, tokenHash, expiresAt }) => ({ sessionId, tokenHash, expiresAt })), sessionEpoch, sessionsRevokedAt };
}

/** The audit row of one session a principal change ended. */
function revokedBy(actor: ChangeActor, reason: string, userId: string): EndingAudit {
  return { action: 'session.revoke', actorUserId: actor.actorUserId, requestId: actor.requestId, clientAddress: actor.clientAddress, details: { reason, userId } };
}

/**
 * Records principal changes in the caller's transaction (call it after the change itself is flushed):
 * a disabled user loses every session (epoch raised), a disabled identity the sessions opened through it,
 * and every change becomes a row of the feed. Resolves the new session epoch (and its instant) of each disabled user.
 */
export async function recordPrincipalChanges(em: EntityManager, changes: PrincipalChange[], actor: ChangeActor): Promise<Map<string, UserRevocation>> {
  const epochs = new Map<string, UserRevocation>();
  const at = new Date();
  for (const change of changes) {
    switch (change.kind) {
      case 'user-disabled': {
        const result = await endSessionsInTx(em, { userId: change.userId, reason: 'user_disabled', allExcept: null, raiseEpoch: true, at, audit: revokedBy(actor, 'user_disabled', change.userId) });
        if (result.sessionEpoch !== null) epochs.set(change.userId, { userId: change.userId, sessionEpoch: result.sessionEpoch, sessionsRevokedAt: result.sessionsRevokedAt });
        break;
      }
      case 'identity-disabled':
        await endSessionsInTx(em, { userId: change.userId, identityId: change.identityId, reason: 'identity_disabled', at, audit: revokedBy(actor, 'identity_disabled', change.userId) });
        break;
      case 'authorization-changed':
        await insertChanges(em, [{ type: 'authorization-changed', userId: change.userId, ...(change.authorizationVersion === undefined ? {} : { authorizationVersion: change.authorizationVersion }) }]);
        break;
      case 'profile-changed':
        await insertChanges(em, [{ type: 'profile-changed', profileId: change.profileId, userId: change.userId }]);
        break;
      case 'template-changed':
        await insertChanges(em, [{ type: 'template-changed', versionId: change.versionId }]);
        break;
    }
  }
  return epochs;
}

/** Rows after `afterId`, plus the listed ids (gaps: rows whose transaction had not committed yet). */
export async function listChanges(em: EntityManager, afterId: number, alsoIds: number[], limit: number): Promise<ChangeRow[]> {
  const also = alsoIds.length > 0 ? ` or id in (${alsoIds.map(() => '?').join(', ')})` : '';
  const rows = await em.execute<Array<{ id: string | number; event: StoreEvent | string }>>(
    `select id, event from iam_changes where id > ?${also} order by id limit ?`,
    [afterId, ...alsoIds, limit],
  );
  return rows.map(toChangeRow);
}

/** Claims undelivered rows for `leaseMs` (another instance skips them meanwhile); oldest first. */
export async function claimChanges(em: EntityManager, limit: number, leaseMs: number): Promise<ChangeRow[]> {
  const rows = await em.execute<Array<{ id: string | number; event: StoreEvent | string }>>(
    `update iam_changes set claimed_until = now() + (? * interval '1 millisecond')
     where id in (select id from iam_changes where delivered_at is null and (claimed_until is null or claimed_until < now())
                  order by id limit ? for update skip locked)
     returning id, event`,
    [leaseMs, limit],
  );
  return rows.map(toChangeRow).sort((a, b) => a.id - b.id);
}

/** Marks rows delivered, and drops delivered rows older than a day (instances read the feed from start time on). */
export async function markChangesDelivered(em: EntityManager, ids: number[]): Promise<void> {
  if (ids.length > 0) await em.execute(`update iam_changes set delivered_at = now() where id in (${ids.map(() => '?').join(', ')})`, ids);
  await em.execute(`delete from iam_changes where id in (select id from iam_changes where delivered_at < now() - interval '1 day' order by id limit 1000)`);
}

export async function loadRevocationState(em: EntityManager): Promise<RevocationState> {
  // The cursor is read first: whatever commits after it is read from the feed.
  const [cursorRow] = await em.execute<Array<{ cursor: string | number }>>(
    `select coalesce(max(id), 0) as cursor from iam_changes where created_at < now() - interval '1 minute'`,
  );
  const sessions = await em.execute<Array<{ session_id: string; expires_at: Date | string }>>(
    'select session_id, expires_at from iam_sessions where (revoked_at is not null or logout_at is not null) and expires_at > now()',
  );
  const epochs = await em.execute<Array<{ user_id: string; session_epoch: number; sessions_revoked_at: Date | string | null }>>(
    'select user_id, session_epoch, sessions_revoked_at from iam_users where session_epoch > 0 or sessions_revoked_at is not null',
  );
  return {
    cursor: Number(cursorRow?.cursor ?? 0),
    sessions: sessions.map((row) => ({ sessionId: row.session_id, expiresAt: new Date(row.expires_at) })),
    epochs: epochs.map((row) => ({
      userId: row.user_id,
      sessionEpoch: Number(row.session_epoch),
      sessionsRevokedAt: row.sessions_revoked_at === null ? null : new Date(row.sessions_revoked_at),
    })),
  };
}

async function insertAudit(em: EntityManager, audit: EndingAudit, targetType: string, targetId: string, at: Date): Promise<void> {
  await em.execute(
    `insert into iam_audit_events (occurred_at, actor_user_id, action, target_type, target_id, outcome, request_id, client_address, details)
     values (?, ?, ?, ?, ?, 'success', ?, ?, cast(? as jsonb))`,
    [at, audit.actorUserId, audit.action, targetType, targetId, audit.requestId, audit.clientAddress, audit.details === null ? null : JSON.stringify(audit.details)],
  );
}

function toChangeRow(row: { id: string | number; event: StoreEvent | string }): ChangeRow {
  return { id: Number(row.id), event: typeof row.event === 'string' ? (JSON.parse(row.event) as StoreEvent) : row.event };
}
