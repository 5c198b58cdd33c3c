import { ArrayType, BigIntType, EntitySchema, OptionalProps } from '@mikro-orm/core';
import type { AuditEventRecord } from '../../../domain/records';

/** Row of `iam_audit_events`: append-only trail (who, what, target, outcome, request and decision ids). */
export class AuditEventEntity {
  [OptionalProps]?: 'id' | 'eventId' | 'decisionIds';
  /** bigserial, read as a string so no precision is lost past 2^53. */
  id!: string;
  /** The event's own id (a UUID: the gateway's, or the column default); unique, so a retried write stores it once. */
  eventId?: string | null;
  occurredAt!: Date;
  actorUserId!: string | null;
  action!: string;
  targetType!: string | null;
  targetId!: string | null;
  outcome!: AuditEventRecord['outcome'];
  requestId!: string | null;
  decisionId!: string | null;
  /** The ids of a check call's decisions (`details.decisions`), indexed: each resolves to this row. */
  decisionIds?: string[] | null;
  clientAddress!: string | null;
  details!: Record<string, unknown> | null;
}

const text = { type: 'string', columnType: 'text' } as const;
const optionalText = { ...text, nullable: true } as const;

export const AuditEventSchema = new EntitySchema<AuditEventEntity>({
  class: AuditEventEntity,
  tableName: 'iam_audit_events',
  properties: {
    id: { type: new BigIntType('string'), columnType: 'bigint', primary: true, autoincrement: true },
    eventId: { type: 'uuid', columnType: 'uuid', nullable: true, unique: 'iam_audit_events_event_id_unique' },
    occurredAt: { type: 'datetime', columnType: 'timestamptz', index: true },
    actorUserId: { ...optionalText, index: true },
    action: { ...text, index: true },
    targetType: optionalText,
    targetId: optionalText,
    outcome: text,
    requestId: optionalText,
    decisionId: { ...optionalText, index: true },
    decisionIds: { type: ArrayType, columnType: 'text[]', nullable: true },
    clientAddress: optionalText,
    details: { type: 'json', columnType: 'jsonb', nullable: true },
  },
});
