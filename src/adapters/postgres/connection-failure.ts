import { ConnectionException } from '@mikro-orm/core';
import { DatabaseUnavailableError } from '../../domain/iam-repository';
import { databasePlace } from './database-place';

/** Socket-level error codes of Node and DNS that mean "the server cannot be reached". */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs that mean the server is there but will not serve us now (PostgreSQL appendix A):
 * 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 53300 too_many_connections.
 * Class 08 (connection_exception) is matched by prefix.
 */
const PROTOCOL_VIOLATION = '08P01';

const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** pg's answer when `query_timeout` (`database.query-timeout`) elapsed without a reply to the statement. */
export const QUERY_TIMEOUT_MESSAGE = 'Query read timeout';

/** Messages of `pg` and knex/tarn that carry no code. */
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Connection ended unexpectedly',
  'connection timeout',
  'Timeout acquiring a connection',
  'Client has encountered a connection error',
  'Client was closed and is not queryable',
  'Unable to acquire a connection',
  // pg: `connectionTimeoutMillis` elapsed while connecting, and `query_timeout` elapsed without a reply.
  'timeout expired',
  QUERY_TIMEOUT_MESSAGE,
  // knex, when the connection dies as a transaction begins (no cause attached).
  'Transaction query already complete',
];

/** True when `error` (or any cause inside it) says the database cannot be reached, not that a query failed. */
export function isConnectionFailure(error: unknown, depth = 0): boolean {
  if (depth > 5 || error === null || typeof error !== 'object') return false;
  if (error instanceof ConnectionException) return true;
  const candidate = error as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof candidate.code === 'string') {
    // 08P01 protocol_violation is how PostgreSQL refuses a value it cannot take (a NUL in a text
    // parameter): the query's fault, not the link's. Read as "unavailable" it was retried forever (#11.3).
    if (candidate.code === PROTOCOL_VIOLATION) return false;
    if (NETWORK_CODES.has(candidate.code) || UNAVAILABLE_SQLSTATES.has(candidate.code)) return true;
    if (candidate.code.length === 5 && candidate.code.startsWith('08')) return true;
  }
  if (candidate.name === 'KnexTimeoutError') return true;
  if (typeof candidate.message === 'string') {
    const message = candidate.message;
    if (UNAVAILABLE_MESSAGES.some((text) => message.includes(text))) return true;
  }
  // Node reports a refused connection to a multi-address host as an AggregateError.
  if (Array.isArray(candidate.errors) && candidate.errors.some((inner) => isConnectionFailure(inner, depth + 1))) return true;
  return isConnectionFailure(candidate.cause, depth + 1);
}

/**
 * True when `error` (or a cause inside it) is a statement that got no answer within `database.query-timeout`:
 * the database may be away, or the statement too big for the bound. Only the caller that sized the statement can
 * tell (audit/audit-trail.ts retries a smaller chunk), so it is reported as `timedOut`, still as unavailable.
 */
export function isQueryTimeout(error: unknown, depth = 0): boolean {
  if (depth > 5 || error === null || typeof error !== 'object') return false;
  const candidate = error as { message?: unknown; cause?: unknown };
  if (typeof candidate.message === 'string' && candidate.message.includes(QUERY_TIMEOUT_MESSAGE)) return true;
  return isQueryTimeout(candidate.cause, depth + 1);
}

/** Connection failures become `DatabaseUnavailableError` (503 upstream); every other error passes through. */
export function toRepositoryError(error: unknown): unknown {
  if (error instanceof DatabaseUnavailableError) return error;
  if (isConnectionFailure(error)) return new DatabaseUnavailableError('The database cannot be reached.', { cause: error, timedOut: isQueryTimeout(error) });
  return error;
}

/** SQLSTATEs with which the server refuses the connection itself (PostgreSQL appendix A), and how they are named. */
const REFUSED_CONNECTION: Readonly<Record<string, string>> = {
  '28000': 'authorization refused, 28000',
  '28P01': 'password authentication failed, 28P01',
  '3D000': 'no such database, 3D000',
};

/**
 * A failure to reach the database at `url` (or to be let in: a wrong password, a database that does not exist) as an
 * error naming where the database is and why, for an operator starting the gateway or running a command:
 * `cannot connect to the database at 127.0.0.1:5999/iam (ECONNREFUSED)`. The place is host, port and database name
 * only ({@link databasePlace}): never the URL's userinfo or query. Any other error is returned as it is.
 */
export function namingTheDatabase(error: unknown, url: string): unknown {
  if (error instanceof DatabaseUnavailableError && error.message.startsWith(CANNOT_CONNECT)) return error;
  const refused = findCode(error, (code) => code in REFUSED_CONNECTION);
  if (refused === undefined && !isConnectionFailure(error)) return error;
  const reason = refused !== undefined ? REFUSED_CONNECTION[refused] : (findCode(error, (code) => NETWORK_CODES.has(code) || /^[0-9A-Z]{5}$/.test(code)) ?? (isTimeout(error) ? 'timed out' : 'no connection'));
  return new DatabaseUnavailableError(`${CANNOT_CONNECT}${databasePlace(url)} (${reason})`, { cause: error });
}

const CANNOT_CONNECT = 'cannot connect to the database at ';

/** The first `code` of `error` or of an error inside it (causes, an AggregateError's errors) that `wanted` accepts. */
function findCode(error: unknown, wanted: (code: string) => boolean, depth = 0): string | undefined {
  if (depth > 5 || error === null || typeof error !== 'object') return undefined;
  const candidate = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof candidate.code === 'string' && wanted(candidate.code)) return candidate.code;
  for (const inner of Array.isArray(candidate.errors) ? candidate.errors : []) {
    const found = findCode(inner, wanted, depth + 1);
    if (found !== undefined) return found;
  }
  return findCode(candidate.cause, wanted, depth + 1);
}

/** True when `error` or a cause inside it is a connect or acquire timeout (pg, knex/tarn). */
function isTimeout(error: unknown, depth = 0): boolean {
  if (depth > 5 || error === null || typeof error !== 'object') return false;
  const candidate = error as { name?: unknown; message?: unknown; cause?: unknown };
  if (candidate.name === 'KnexTimeoutError') return true;
  if (typeof candidate.message === 'string' && /timeout|timed out/i.test(candidate.message)) return true;
  return isTimeout(candidate.cause, depth + 1);
}
