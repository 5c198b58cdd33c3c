import type { ParsedUrlQuery } from 'node:querystring';
import { isStorableText } from './validate-body';
import { problems } from '../domain/problem';
import type { AuditListParams, UserListParams } from './admin-service';

/** Page size when `limit` is absent, and the largest page served (a larger `limit` is capped, not refused). */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;
const MAX_TEXT = 200;

type Problem = { pointer: string; message: string };

/** Reads one query parameter; repeated or unknown parameters are errors (reject the unknown, docs/http-contract.md). */
class QueryReader {
  readonly problems: Problem[] = [];

  constructor(
    private readonly query: ParsedUrlQuery,
    allowed: string[],
  ) {
    for (const name of Object.keys(query)) if (!allowed.includes(name)) this.problems.push({ pointer: `/${name}`, message: 'is not an allowed parameter' });
  }

  text(name: string): string | null {
    const value = this.query[name];
    if (value === undefined) return null;
    if (Array.isArray(value)) return this.fail(name, 'must be given once');
    if (value.length === 0 || value.length > MAX_TEXT) return this.fail(name, `must be 1 to ${MAX_TEXT} characters`);
    if (!isStorableText(value)) return this.fail(name, 'must not contain control characters or lone surrogates');
    return value;
  }

  limit(): number {
    const value = this.text('limit');
    if (value === null) return DEFAULT_LIMIT;
    if (!/^[0-9]{1,6}$/.test(value) || Number(value) < 1) return this.fail('limit', 'must be a whole number of at least 1') ?? DEFAULT_LIMIT;
    return Math.min(Number(value), MAX_LIMIT);
  }

  timestamp(name: string): Date | null {
    const value = this.text(name);
    if (value === null) return null;
    // ISO 8601 with a zone (docs/http-contract.md: timestamps are ISO 8601 UTC).
    const parsed = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(value) ? new Date(value) : null;
    if (parsed === null || Number.isNaN(parsed.getTime())) return this.fail(name, 'must be an ISO 8601 timestamp with a zone, e.g. 2026-01-31T12:00:00Z');
    return parsed;
  }

  done(): void {
    if (this.problems.length > 0) throw problems.validation(this.problems, 'The query is not valid.');
  }

  private fail(name: string, message: string): null {
    this.problems.push({ pointer: `/${name}`, message });
    return null;
  }
}

/** `GET /iam/admin/users?limit=&cursor=&q=&domain=`; 400 IAM_VALIDATION_FAILED naming each bad parameter. */
export function parseUserListQuery(query: ParsedUrlQuery): UserListParams {
  const reader = new QueryReader(query, ['limit', 'cursor', 'q', 'domain']);
  const params = { limit: reader.limit(), cursor: reader.text('cursor'), q: reader.text('q'), domain: reader.text('domain') };
  reader.done();
  return params;
}

/** `GET /iam/admin/audit?userId=&action=&since=&limit=&cursor=`. */
export function parseAuditListQuery(query: ParsedUrlQuery): AuditListParams {
  const reader = new QueryReader(query, ['limit', 'cursor', 'userId', 'action', 'since']);
  const params = {
    limit: reader.limit(),
    cursor: reader.text('cursor'),
    userId: reader.text('userId'),
    action: reader.text('action'),
    since: reader.timestamp('since'),
  };
  reader.done();
  return params;
}
