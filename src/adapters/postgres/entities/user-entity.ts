import { EntitySchema, OptionalProps, PrimaryKeyProp } from '@mikro-orm/core';

/** Row of `iam_users`: a principal of the host (created by the first login or by provisioning). */
export class UserEntity {
  [PrimaryKeyProp]?: 'userId';
  [OptionalProps]?: 'displayName' | 'enabled' | 'authorizationVersion' | 'sessionEpoch' | 'sessionsRevokedAt' | 'createdAt' | 'updatedAt' | 'version';
  userId!: string;
  displayName: string | null = null;
  enabled = true;
  /** Raised whenever the user's effective permissions change, so cached abilities of live sessions go stale. */
  authorizationVersion = 0;
  /** Raised when every session of the user ends: tokens issued under an older epoch are refused. */
  sessionEpoch = 0;
  /** When the epoch was last raised (the gateway's clock): a provider access token issued before is refused. */
  sessionsRevokedAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  /** Optimistic lock (MikroORM `version: true`). */
  version!: number;
}

export const UserSchema = new EntitySchema<UserEntity>({
  class: UserEntity,
  tableName: 'iam_users',
  properties: {
    userId: { type: 'string', columnType: 'text', primary: true },
    displayName: { type: 'string', columnType: 'text', nullable: true },
    enabled: { type: 'boolean' },
    authorizationVersion: { type: 'integer' },
    sessionEpoch: { type: 'integer' },
    sessionsRevokedAt: { type: 'datetime', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'datetime', columnType: 'timestamptz' },
    updatedAt: { type: 'datetime', columnType: 'timestamptz', onUpdate: () => new Date() },
    version: { type: 'integer', version: true },
  },
});
