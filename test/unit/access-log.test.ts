/**
 * The access log's flush (src/observability/access-log.ts): lines are batched, and a batch never waits longer than
 * ACCESS_LOG_FLUSH_INTERVAL_MS for more traffic (nginx's `flush=`): one line on an idle gateway reaches the
 * destination after the interval, through one timer however many lines are written, and none once idle.
 * Time is jest's fake timers; the real destination (sonic-boom, as on stdout) is checked writing to a file.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type DestinationStream } from 'pino';
import { ACCESS_LOG_FLUSH_INTERVAL_MS, AccessLog, type AccessEntry } from '../../src/observability/access-log';

const entry = (requestId: string): AccessEntry => ({
  requestId,
  traceId: null,
  clientAddress: '127.0.0.1',
  method: 'GET',
  path: '/api/admin/stats',
  route: '/api/admin/**',
  status: 403,
  decision: 'deny',
  step: 'PERMISSION_DENIED',
  userId: 'u-alice',
  profileId: null,
  clientType: null,
  decisionId: null,
  durationMs: 0.3,
  upstreamMs: null,
  bytes: null,
});

/** A destination that buffers like sonic-boom does below its batch size: nothing leaves before a flush. */
function bufferingDestination(): DestinationStream & { flush(): void; flushSync(): void; received: () => string; flushes: () => number } {
  let buffered = '';
  let received = '';
  let flushes = 0;
  const drain = (): void => {
    received += buffered;
    buffered = '';
  };
  return {
    write: (chunk: string) => void (buffered += chunk),
    flush: () => {
      flushes++;
      drain();
    },
    flushSync: drain,
    received: () => received,
    flushes: () => flushes,
  };
}

afterEach(() => {
  jest.useRealTimers();
});

describe('the access log flush', () => {
  it('writes one buffered line of an idle gateway once the interval has passed, not before', () => {
    jest.useFakeTimers();
    const destination = bufferingDestination();
    const log = new AccessLog('denied', 1, destination);
    log.write(entry('r-idle'));
    jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS - 1);
    expect(destination.received()).toBe('');
    jest.advanceTimersByTime(1);
    expect(destination.received()).toContain('"requestId":"r-idle"');
    expect(ACCESS_LOG_FLUSH_INTERVAL_MS).toBeLessThanOrEqual(1000);
    log.close();
  });

  it('keeps one timer however many lines are written, flushes every interval while lines come, and stops once idle', () => {
    jest.useFakeTimers();
    const destination = bufferingDestination();
    const log = new AccessLog('all', 1, destination);
    expect(jest.getTimerCount()).toBe(0);
    for (let i = 0; i < 100; i++) log.write(entry(`r-${i}`));
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS);
    expect(destination.received()).toContain('"requestId":"r-99"');
    // Traffic continues: each interval's lines are written by the end of the next interval.
    log.write(entry('r-second'));
    jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS);
    expect(destination.received()).toContain('"requestId":"r-second"');
    // Quiet: one more flush (for a write that was in progress), then no timer at all.
    jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS);
    expect(jest.getTimerCount()).toBe(0);
    const flushes = destination.flushes();
    jest.advanceTimersByTime(10 * ACCESS_LOG_FLUSH_INTERVAL_MS);
    expect(destination.flushes()).toBe(flushes);
    // The next line arms it again.
    log.write(entry('r-later'));
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS);
    expect(destination.received()).toContain('"requestId":"r-later"');
    log.close();
  });

  it('close() (shutdown) writes what is buffered at once and leaves no timer behind', () => {
    jest.useFakeTimers();
    const destination = bufferingDestination();
    const log = new AccessLog('denied', 1, destination);
    log.write(entry('r-stop'));
    log.close();
    expect(destination.received()).toContain('"requestId":"r-stop"');
    expect(jest.getTimerCount()).toBe(0);
  });

  it('the timer never keeps the process alive (unref)', () => {
    const destination = bufferingDestination();
    const log = new AccessLog('denied', 1, destination);
    const refTimers = (): number => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
    const before = refTimers();
    log.write(entry('r-unref'));
    expect(refTimers()).toBe(before);
    log.close();
  });

  it('with the real destination (sonic-boom, batching 4 KiB as on stdout) the line reaches the file after the interval', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'access-log-'));
    const file = join(dir, 'access.log');
    try {
      const destination = pino.destination({ dest: file, sync: false, minLength: 4096 });
      await once(destination, 'ready');
      // Only the timers are fake: the file system's callbacks stay real.
      jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'clearImmediate', 'queueMicrotask', 'Date', 'hrtime', 'performance', 'setInterval', 'clearInterval'] });
      const log = new AccessLog('denied', 1, destination);
      log.write(entry('r-file'));
      expect(readFileSync(file, 'utf8')).toBe('');
      const written = once(destination, 'write');
      jest.advanceTimersByTime(ACCESS_LOG_FLUSH_INTERVAL_MS);
      await written;
      expect(readFileSync(file, 'utf8')).toContain('"requestId":"r-file"');
      log.close();
      destination.end();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 10_000);
});
