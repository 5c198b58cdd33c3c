import type { AuditEventRecord } from './records';

/**
 * Where an audit row keeps the decisions it records. A proxied request's decision is the row's own: its
 * `decisionId` and `details.decision`. A check call (`POST /iam/authorization/check`, up to 100 checks) keeps all
 * its decisions in one row, `details.decisions`, each with its own `decisionId`: one call is one durable write, not
 * one per check, and every `decisionId` it answered stays findable (the database indexes the ids of
 * `details.decisions`, see adapters/postgres). Every reader and writer of that layout goes through here.
 */
export interface RecordedDecision {
  decisionId: string;
  [key: string]: unknown;
}

/** The decisions a check call's row holds (`details.decisions`); empty for any other row. */
export function callDecisions(details: AuditEventRecord['details']): RecordedDecision[] {
  const decisions = details?.decisions;
  if (!Array.isArray(decisions)) return [];
  return decisions.filter((decision): decision is RecordedDecision => typeof (decision as { decisionId?: unknown } | null)?.decisionId === 'string');
}

/** The ids the database indexes for a row beside its own `decisionId`: those of its call's decisions, or null. */
export function callDecisionIds(details: AuditEventRecord['details']): string[] | null {
  const decisions = callDecisions(details);
  return decisions.length === 0 ? null : decisions.map((decision) => decision.decisionId);
}

/** The decision `decisionId` names in `event`: the row's own, or one of its call's; null when it holds none by that id. */
export function findRecordedDecision(event: Pick<AuditEventRecord, 'decisionId' | 'details'>, decisionId: string): Record<string, unknown> | null {
  const own = event.details?.decision;
  if (event.decisionId === decisionId && typeof own === 'object' && own !== null) return own as Record<string, unknown>;
  return callDecisions(event.details).find((decision) => decision.decisionId === decisionId) ?? null;
}

/** How many decisions an event holds, at least 1: what it weighs against the audit trail's memory bound. */
export function recordedWeight(event: Pick<AuditEventRecord, 'details'>): number {
  // Read on every record(), scanner probes' included: no copy of the list.
  const decisions = event.details?.decisions;
  return Array.isArray(decisions) ? Math.max(1, decisions.length) : 1;
}
