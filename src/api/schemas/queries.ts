/**
 * The query parameters of the `/iam` lists, each an object schema a route declares as its `query`: the document's
 * `parameters` and the router's check come from it (src/api/validate-query.ts).
 */
import { Type } from '@sinclair/typebox';

/** The page size of the admin lists when `limit` is absent. */
export const DEFAULT_LIMIT = 50;
/** The largest page served: a larger `limit` is capped, not refused (and a session list's page size when absent). */
export const MAX_LIMIT = 200;
const MAX_TEXT = 200;

const Limit = (fallback: number) =>
  Type.Optional(Type.Integer({ minimum: 1, default: fallback, description: `Page size; default ${fallback}, larger values are capped at ${MAX_LIMIT}.` }));
const Text = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TEXT, description }));

export const UserListQuery = Type.Object(
  {
    limit: Limit(DEFAULT_LIMIT),
    cursor: Text('The `nextCursor` of the previous page (opaque); another value is a 400.'),
    q: Text('Matches userId or displayName.'),
    domain: Text('Only users with an identity in this domain.'),
  },
  { additionalProperties: false },
);

export const AuditListQuery = Type.Object(
  {
    userId: Text('Acting user.'),
    action: Text('e.g. authz.deny.'),
    since: Type.Optional(Type.String({ format: 'date-time', description: 'ISO 8601 timestamp with a zone.' })),
    limit: Limit(DEFAULT_LIMIT),
    cursor: Text('The `nextCursor` of the previous page (opaque); another value is a 400.'),
  },
  { additionalProperties: false },
);

/** A session list (the caller's own, or a user's for an administrator): the next page is linked, never in the body. */
export const SessionListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, default: MAX_LIMIT, description: `Page size; default and cap ${MAX_LIMIT}.` })),
    cursor: Type.Optional(Type.String({ description: 'From the previous page\'s `Link: <…>; rel="next"` header.' })),
  },
  { additionalProperties: false },
);

/**
 * A browser page's way back after a login: open (an unknown parameter is ignored), and never refused: a value that is
 * not a same-origin relative path, or is given twice, becomes `/`.
 */
export const ReturnToQuery = Type.Object({
  returnTo: Type.Optional(Type.String({ description: 'A same-origin relative path to go back to after the login; anything else becomes `/`.' })),
});
