/**
 * Messages between the gateway's event loop and its database thread (database-thread.ts), and how errors
 * cross between them: structured cloning keeps an error's message but not its class, and callers branch on
 * the class (`DatabaseUnavailableError` → 503, `AdminWriteError` → 404/409/422, `ProblemError` as is), so
 * the known classes are encoded by name and rebuilt on the other side.
 */
import type { DatabaseKind } from '../registry';
import type { DatabaseProgress } from '../backend-registration';
import { ProblemError, type ProblemCode } from '../../domain/problem';
import { AdminWriteError, type AdminWriteErrorKind } from '../../domain/admin-repository';
import type { AdminRepository } from '../../domain/admin-repository';
import { DatabaseUnavailableError, IdentityLinkError, ProvisioningError, type IamRepository, type IdentityLinkRefusal } from '../../domain/iam-repository';

/** Which repository a call is for. */
export type DatabaseTarget = 'iam' | 'admin';

export type ToDatabaseThread =
  | { type: 'call'; id: number; target: DatabaseTarget; method: string; args: unknown[] }
  | { type: 'close' };

export type FromDatabaseThread =
  | { type: 'ready'; kind: DatabaseKind }
  | { type: 'open-failed'; error: EncodedError }
  | { type: 'progress'; progress: DatabaseProgress }
  | { type: 'result'; id: number; value: unknown }
  | { type: 'error'; id: number; error: EncodedError }
  | { type: 'closed' };

export type EncodedError =
  | { class: 'DatabaseUnavailableError'; message: string; timedOut: boolean }
  | { class: 'ProvisioningError'; message: string; problems: Array<{ pointer: string; message: string }> }
  | { class: 'IdentityLinkError'; message: string; reason: IdentityLinkRefusal }
  | { class: 'AdminWriteError'; message: string; kind: AdminWriteErrorKind; problems: Array<{ pointer: string; message: string }> }
  | { class: 'ProblemError'; message: string; code: ProblemCode; status: number; extensions: ProblemError['extensions']; headers: Record<string, string> }
  | { class: 'Error'; name: string; message: string };

export function encodeError(error: unknown): EncodedError {
  if (error instanceof DatabaseUnavailableError) return { class: 'DatabaseUnavailableError', message: error.message, timedOut: error.timedOut };
  if (error instanceof ProvisioningError) return { class: 'ProvisioningError', message: error.message, problems: error.problems };
  if (error instanceof IdentityLinkError) return { class: 'IdentityLinkError', message: error.message, reason: error.reason };
  if (error instanceof AdminWriteError) return { class: 'AdminWriteError', message: error.message, kind: error.kind, problems: error.problems };
  if (error instanceof ProblemError) {
    return { class: 'ProblemError', message: error.message, code: error.code, status: error.status, extensions: error.extensions, headers: error.headers };
  }
  if (error instanceof Error) return { class: 'Error', name: error.name, message: error.message };
  return { class: 'Error', name: 'Error', message: String(error) };
}

export function decodeError(encoded: EncodedError): Error {
  switch (encoded.class) {
    case 'DatabaseUnavailableError':
      return new DatabaseUnavailableError(encoded.message, { timedOut: encoded.timedOut });
    case 'ProvisioningError':
      return new ProvisioningError(encoded.message, encoded.problems);
    case 'IdentityLinkError':
      return new IdentityLinkError(encoded.reason, encoded.message);
    case 'AdminWriteError':
      return new AdminWriteError(encoded.kind, encoded.message, encoded.problems);
    case 'ProblemError':
      return new ProblemError(encoded.code, encoded.message, { status: encoded.status, extensions: encoded.extensions, headers: encoded.headers });
    default: {
      const error = new Error(encoded.message);
      error.name = encoded.name;
      return error;
    }
  }
}

/** The methods served per target; a compile-time check below keeps each list complete. */
export const DATABASE_METHODS = {
  iam: [
    'ensurePrincipal', 'getUser', 'getIdentity', 'listProfiles', 'getProfile', 'getTemplate', 'listTemplates', 'insertSession',
    'getSession', 'idTokenOfSession', 'getSessionByTokenHash', 'listSessions', 'listSessionsOfIdpSession', 'listSessionsPage', 'updateSession', 'revokeUserSessions', 'insertAudit', 'findAuditByDecisionId', 'purgeAudit', 'applyProvisioning', 'ping',
    'endSessions', 'listChanges', 'claimChanges', 'markChangesDelivered', 'loadRevocationState',
  ],
  admin: [
    'upsertTemplate', 'listUsers', 'upsertUser', 'listIdentities', 'upsertIdentity', 'upsertProfile', 'replaceProfileScopes',
    'raiseAuthorizationVersion', 'listAudit',
  ],
} as const satisfies { iam: ReadonlyArray<keyof IamRepository>; admin: ReadonlyArray<keyof AdminRepository> };

type Unlisted<T, Listed> = Exclude<keyof T, Listed>;
/** Fails to compile when a repository method is missing from DATABASE_METHODS. */
const everyMethodListed: [Unlisted<IamRepository, (typeof DATABASE_METHODS.iam)[number]>, Unlisted<AdminRepository, (typeof DATABASE_METHODS.admin)[number]>] extends [never, never]
  ? true
  : never = true;
void everyMethodListed;
