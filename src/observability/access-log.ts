import pino, { type DestinationStream, type Logger } from 'pino';
import { scrubText } from './redaction';

/** `iam.access-log`: every request, only denied and failed ones (the default), or none. */
export type AccessLogMode = 'all' | 'denied' | 'off';

/** One line of the access log (docs/observability.md). Only these fields: never a token, cookie or header value. */
export interface AccessEntry {
  requestId: string;
  /** The trace id when tracing is on, else null. */
  traceId: string | null;
  /** The client's address (the trusted-proxy rule). */
  clientAddress: string | null;
  method: string;
  /** The normalized path (no query string: it may carry values the log must not keep). */
  path: string;
  /** The matched policy route's pattern, or null. */
  route: string | null;
  status: number;
  /** `allow`, `deny`, `shadow_deny`, or `none` (nothing was decided: refused before, or a failure). */
  decision: 'allow' | 'deny' | 'shadow_deny' | 'none';
  step: string | null;
  userId: string | null;
  /** The active profile decided for, and the session's client type: what `policy replay` decides again with. */
  profileId: string | null;
  clientType: string | null;
  decisionId: string | null;
  /** From the request to the response's end (or to the answer for a denial). */
  durationMs: number;
  /** To the host's response headers; null when not forwarded. */
  upstreamMs: number | null;
  /** Response body bytes written to the client, when known. */
  bytes: number | null;
  /** Only on a request whose list the gateway filtered (policy `filter`): the elements kept and removed. */
  filtered?: { kept: number; removed: number };
  /**
   * Only on a request the candidate policy (`iam.policy.candidate-dir`) decided otherwise: its decision (`unknown` when
   * it needed a grant or a resolution the live decision did not load), its failed step and its route pattern.
   */
  candidate?: { decision: 'allow' | 'deny' | 'unknown'; step: string | null; route: string | null };
}

/**
 * The longest a written line waits in the buffer: like nginx's `access_log ... buffer=size flush=time`, a batch is
 * written when it is full or when it has waited this long, so a quiet gateway's last lines do not wait for traffic.
 */
export const ACCESS_LOG_FLUSH_INTERVAL_MS = 1000;

/**
 * The access log: one JSON line per request on stdout (pino, `msg: "access"`), separate from the application log
 * and its level. Writes are buffered (a 4 KiB batch) so logging every request does not become the bottleneck; what
 * is buffered is written at least every {@link ACCESS_LOG_FLUSH_INTERVAL_MS} and at {@link close} (shutdown).
 * `all` logs allowed requests at `sampleRate` (0..1) and every denial or failure.
 */
export class AccessLog {
  private readonly logger: Logger;
  private readonly stream: DestinationStream & { flush?: () => void; flushSync?: () => void; end?: () => void };
  /**
   * The one flush timer: armed by the first line written while none is armed, so a busy gateway has one timer a
   * second, not one per line, and an idle one none at all.
   */
  private flushTimer: NodeJS.Timeout | null = null;
  /** A line was written since the timer last fired. */
  private writtenSinceTick = false;
  private closed = false;

  constructor(
    readonly mode: Exclude<AccessLogMode, 'off'>,
    private readonly sampleRate: number,
    destination?: DestinationStream,
    /**
     * Fields of every line (`{ worker: 2 }` in a worker of `serve --workers N`). Set, the lines share stdout with other
     * processes: each write is then at most 4 KiB of whole lines (PIPE_BUF: one atomic write to a pipe), so lines of
     * two workers never interleave.
     */
    fields?: Record<string, unknown>,
  ) {
    this.stream = destination ?? pino.destination(fields === undefined ? { dest: 1, sync: false, minLength: 4096 } : { dest: 1, sync: false, minLength: 2048, maxWrite: 4096 });
    this.logger = pino({ base: fields, timestamp: pino.stdTimeFunctions.isoTime, messageKey: 'msg' }, this.stream);
  }

  /** True when allowed requests are logged too (the proxy then watches each response to its end). */
  get logsAllowed(): boolean {
    return this.mode === 'all' && this.sampleRate > 0;
  }

  /** Whether an allowed request is in the sample (decided when it starts, so the response is watched only then). */
  sampled(): boolean {
    return this.sampleRate >= 1 || Math.random() < this.sampleRate;
  }

  write(entry: AccessEntry): void {
    // The redaction layer's text rule on the one field a client chooses (a token shape in the path): every other
    // field is an id, an address, a number or a value of the gateway's own, so the line is not walked per request.
    const path = scrubText(entry.path);
    this.logger.info(path === entry.path ? entry : { ...entry, path }, 'access');
    this.writtenSinceTick = true;
    if (this.flushTimer === null && !this.closed) this.armFlushTimer();
  }

  /** Writes what is buffered, synchronously, and stops the flush timer (shutdown, once nothing writes any more). */
  close(): void {
    this.closed = true;
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    try {
      this.stream.flushSync?.();
    } catch {
      // Nothing buffered, or the stream is already closed.
    }
  }

  private armFlushTimer(): void {
    this.flushTimer = setTimeout(() => this.tick(), ACCESS_LOG_FLUSH_INTERVAL_MS);
    // Never what keeps the process alive: at a stop close() writes the rest.
    this.flushTimer.unref();
  }

  /**
   * Hands what is buffered to the destination without blocking the event loop (`flush()`, not `flushSync()`: a
   * stdout pipe nobody reads must not stall the proxy). The timer runs once more after the last interval with a
   * line: a write already in progress when it fired left the lines behind it buffered, and that next run writes them.
   */
  private tick(): void {
    this.flushTimer = null;
    const wrote = this.writtenSinceTick;
    this.writtenSinceTick = false;
    try {
      this.stream.flush?.();
    } catch {
      // The stream is closed (the process is stopping): nothing left to write to.
    }
    if (wrote && !this.closed) this.armFlushTimer();
  }
}
