import { DiskSpool } from '../audit/disk-spool';
import type { EndSessionsRequest } from '../domain/changes';
import { DatabaseUnavailableError, type SessionRepository } from '../domain/iam-repository';
import { describeFailure } from '../audit/audit-limits';
import type { Logger } from '../observability/logger';

/**
 * Endings (logout, revocations) that were answered while the database was down, kept on disk until the
 * database records them (`endings-…` files in `iam.audit.spool-dir`, beside the audit spool): one file per
 * ending, written and fsynced before the answer, removed once recorded. What a stop (or a crash) leaves is
 * recorded by the next start before it serves (replaySpooledEndings). Recording is idempotent (only live
 * sessions are ended, and the audit rows are written with them), so a replayed file never ends or audits
 * a session twice.
 */
export class EndingSpool extends DiskSpool<EndSessionsRequest> {
  constructor(dir: string) {
    super(dir, 'endings', reviveRequest);
  }
}

/**
 * Records every ending spooled by earlier stops (and abandoned by crashed instances), oldest first, and
 * removes each file once recorded; resolves how many endings were replayed. Rejects when the database does
 * not answer (the start fails: it could not serve its revocation record anyway): the files not replayed yet
 * are handed back to the directory for the next start.
 */
export async function replaySpooledEndings(spool: EndingSpool, repository: Pick<SessionRepository, 'endSessions'>, logger: Pick<Logger, 'info' | 'error'>): Promise<number> {
  const files = await spool.claim();
  let replayed = 0;
  for (let i = 0; i < files.length; i++) {
    const path = files[i]!;
    try {
      const { items, unreadable } = await spool.read(path);
      if (unreadable > 0) logger.error({ file: path, unreadable }, 'sessions: spooled endings could not be read, skipped');
      for (const request of items) await repository.endSessions(request);
      await spool.remove(path);
      replayed += items.length;
    } catch (error) {
      if (error instanceof DatabaseUnavailableError) {
        for (const left of files.slice(i)) await spool.release(left).catch(() => undefined);
        throw error;
      }
      // Refused for its content: retrying cannot help, and it must not stop every start. Kept for an operator.
      const kept = await spool.setAside(path);
      logger.error({ file: kept, failure: describeFailure(error) }, 'sessions: the database refused a spooled ending; the file is set aside');
    }
  }
  if (replayed > 0) logger.info({ endings: replayed, dir: spool.dir }, 'sessions: endings spooled by an earlier stop are recorded');
  return replayed;
}

function reviveRequest(parsed: unknown): EndSessionsRequest {
  const request = parsed as EndSessionsRequest & { at: string; createdBefore?: string };
  if (typeof request !== 'object' || request === null || typeof request.at !== 'string' || typeof request.reason !== 'string') throw new TypeError('not an ending');
  if (request.userId === null && !Array.isArray(request.sessionIds)) throw new TypeError('an ending without a user names no sessions');
  return {
    ...request,
    at: new Date(request.at),
    ...(request.createdBefore === undefined ? {} : { createdBefore: new Date(request.createdBefore) }),
  };
}
