/** The keyset of `GET /iam/sessions` pages: the last row of a page (newest first). */
export interface SessionPageKey {
  createdAt: Date;
  sessionId: string;
}

/** Opaque cursor (base64url of `createdAt sessionId`), in the style of the admin API's cursors. */
export function encodeSessionCursor(key: { createdAt: Date; sessionId: string }): string {
  return Buffer.from(`${key.createdAt.toISOString()} ${key.sessionId}`, 'utf8').toString('base64url');
}

/** The key a cursor stands for, or null when it is not a cursor of this list. */
export function decodeSessionCursor(cursor: string): SessionPageKey | null {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const space = text.indexOf(' ');
  if (space < 0) return null;
  const createdAt = new Date(text.slice(0, space));
  const sessionId = text.slice(space + 1);
  if (Number.isNaN(createdAt.getTime()) || sessionId.length === 0) return null;
  const key = { createdAt, sessionId };
  return encodeSessionCursor(key) === cursor ? key : null;
}
