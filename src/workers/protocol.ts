import type { GatewayConfig } from '../config';
import type { PrimaryManagementPort } from '../app/listeners';
import type { ReadinessReport } from '../app/management-server';
import type { MetricFamily } from './cluster-metrics';

/**
 * The messages between the primary and its workers (`serve --workers N`), over the cluster IPC channel
 * (advanced serialization). Every type starts with `iam:` so they never mix with node:cluster's own messages.
 */

/** Primary → a new worker: what to start with (the primary's configuration, read once, so every worker runs the same one). */
export interface StartMessage {
  type: 'iam:start';
  config: GatewayConfig;
  management: PrimaryManagementPort;
}

/** Primary → worker: a question (`readiness` or `metrics`), answered with a {@link ReplyMessage} of the same id. */
export interface AskMessage {
  type: 'iam:ask';
  id: number;
  what: 'readiness' | 'metrics';
}

/** Worker → primary. */
export type WorkerMessage =
  /** Listening on the shared proxy port. */
  | { type: 'iam:listening'; port: number; pid: number }
  /** Stopping on a signal sent to this worker alone or to the group (`signal`); the primary replaces it unless it is stopping too. */
  | { type: 'iam:stopping'; signal: string }
  | ReplyMessage;

export type ReplyMessage =
  | { type: 'iam:reply'; id: number; what: 'readiness'; readiness: ReadinessReport }
  | { type: 'iam:reply'; id: number; what: 'metrics'; metrics: MetricFamily[] }
  | { type: 'iam:reply'; id: number; what: 'failed'; message: string };

export function isMessage<T extends { type: string }>(message: unknown, type: T['type']): message is T {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}
