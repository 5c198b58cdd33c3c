import { EntitySchema, OptionalProps, PrimaryKeyProp } from '@mikro-orm/core';
import { UserEntity } from './user-entity';

/** Row of `iam_identities`: how a user logs in (an identity in a domain); many per user. */
export class IdentityEntity {
  [PrimaryKeyProp]?: 'identityId';
  [OptionalProps]?: 'enabled' | 'createdAt' | 'updatedAt' | 'version';
  identityId!: string;
  user!: UserEntity;
  identityDomain!: string;
  enabled = true;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
  /** Optimistic lock (MikroORM `version: true`): the admin API's entity tag. */
  version!: number;
}

export const IdentitySchema = new EntitySchema<IdentityEntity>({
  class: IdentityEntity,
  tableName: 'iam_identities',
  properties: {
    identityId: { type: 'string', columnType: 'text', primary: true },
    user: { kind: 'm:1', entity: () => UserEntity, fieldName: 'user_id', index: true },
    identityDomain: { type: 'string', columnType: 'text' },
    enabled: { type: 'boolean' },
    createdAt: { type: 'datetime', columnType: 'timestamptz' },
    updatedAt: { type: 'datetime', columnType: 'timestamptz', onUpdate: () => new Date() },
    version: { type: 'integer', version: true },
  },
});
