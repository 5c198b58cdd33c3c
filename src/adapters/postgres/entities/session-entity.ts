import { EntitySchema, PrimaryKeyProp } from '@mikro-orm/core';

/**
 * Row of `iam_sessions`: the durable side of a login session (the token store holds the hot copy).
 * Ids are plain columns: sessions are written one row at a time, so no unit-of-work ordering is needed.
 */
export class SessionEntity {
  [PrimaryKeyProp]?: 'sessionId';
  sessionId!: string;
  userId!: string;
  identityId!: string;
  clientType!: string;
  activeProfileId!: string | null;
  /** sha256 of the token (hex); the raw token is never stored (docs/threat-model.md). */
  tokenHash!: string;
  createdAt!: Date;
  expiresAt!: Date;
  lastSeenAt!: Date | null;
  revokedAt!: Date | null;
  logoutAt!: Date | null;
  revokeReason!: string | null;
  clientAddress!: string | null;
  userAgent!: string | null;
  /** The session a profile switch derived this one from (ending it ends this one); null for a login. */
  originSessionId!: string | null;
  /** The OpenID Provider's `sid` of the login (back-channel logout ends its sessions); null otherwise. */
  idpSessionId!: string | null;
  /** The OpenID Connect login's ID token, for `id_token_hint` at sign-out; never read into a SessionRecord. */
  idpIdToken!: string | null;
}

const text = { type: 'string', columnType: 'text' } as const;
const optionalText = { ...text, nullable: true } as const;
const timestamp = { type: 'datetime', columnType: 'timestamptz' } as const;
const optionalTimestamp = { ...timestamp, nullable: true } as const;

export const SessionSchema = new EntitySchema<SessionEntity>({
  class: SessionEntity,
  tableName: 'iam_sessions',
  properties: {
    sessionId: { ...text, primary: true },
    userId: { ...text, index: true },
    identityId: text,
    clientType: text,
    activeProfileId: optionalText,
    tokenHash: { ...text, unique: true },
    createdAt: timestamp,
    expiresAt: timestamp,
    lastSeenAt: optionalTimestamp,
    revokedAt: optionalTimestamp,
    logoutAt: optionalTimestamp,
    revokeReason: optionalText,
    clientAddress: optionalText,
    userAgent: optionalText,
    originSessionId: { ...optionalText, index: 'iam_sessions_origin_session_id_index' },
    idpSessionId: { ...optionalText, index: 'iam_sessions_idp_session_id_index' },
    idpIdToken: { ...optionalText, lazy: true },
  },
});
