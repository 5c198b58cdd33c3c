import type { Static } from '@sinclair/typebox';
import { problems } from '../domain/problem';
import { decodeSessionCursor, type SessionPageKey } from '../sessions/session-cursor';
import { MAX_LIMIT, type SessionListQuery } from './schemas/queries';

/**
 * `GET /iam/sessions?limit=&cursor=` (and an administrator's list of a user's sessions), after the router checked the
 * declared query: `limit` capped at 200, `cursor` from the previous page's `Link: <…>; rel="next"` header, one of this
 * list or 400 IAM_VALIDATION_FAILED. The body is always the plain list of sessions.
 */
export function sessionPageOf(query: Static<typeof SessionListQuery>): { limit: number; after: SessionPageKey | null } {
  const limit = Math.min(query.limit ?? MAX_LIMIT, MAX_LIMIT);
  const cursor = query.cursor;
  const after = cursor === undefined || cursor.length > 200 ? null : decodeSessionCursor(cursor);
  if (cursor !== undefined && after === null) throw problems.validation([{ pointer: '/cursor', message: 'is not a cursor of this list' }], 'The query is not valid.');
  return { limit, after };
}
