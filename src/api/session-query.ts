import type { ParsedUrlQuery } from 'node:querystring';
import { MAX_LIMIT } from './admin-query';
import { problems } from '../domain/problem';
import { decodeSessionCursor, type SessionPageKey } from '../sessions/session-cursor';

/**
 * `GET /iam/sessions?limit=&cursor=`: `limit` defaults to (and is capped at) 200, `cursor` comes from the
 * previous page's `Link: <…>; rel="next"` header; anything else is 400 IAM_VALIDATION_FAILED naming each bad
 * parameter. The body is always the plain list of sessions.
 */
export function parseSessionListQuery(query: ParsedUrlQuery): { limit: number; after: SessionPageKey | null } {
  const errors: Array<{ pointer: string; message: string }> = [];
  for (const name of Object.keys(query)) if (name !== 'limit' && name !== 'cursor') errors.push({ pointer: `/${name}`, message: 'is not an allowed parameter' });
  const single = (name: string): string | null => {
    const value = query[name];
    if (value === undefined) return null;
    if (Array.isArray(value)) {
      errors.push({ pointer: `/${name}`, message: 'must be given once' });
      return null;
    }
    return value;
  };
  let limit = MAX_LIMIT;
  const limitText = single('limit');
  if (limitText !== null) {
    if (/^[0-9]{1,6}$/.test(limitText) && Number(limitText) >= 1) limit = Math.min(Number(limitText), MAX_LIMIT);
    else errors.push({ pointer: '/limit', message: 'must be a whole number of at least 1' });
  }
  const cursorText = single('cursor');
  const after = cursorText === null || cursorText.length > 200 ? null : decodeSessionCursor(cursorText);
  if (cursorText !== null && after === null) errors.push({ pointer: '/cursor', message: 'is not a cursor of this list' });
  if (errors.length > 0) throw problems.validation(errors, 'The query is not valid.');
  return { limit, after };
}
