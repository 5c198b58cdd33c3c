import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Logger } from '../observability/logger';
import type { GatewayMetrics } from '../observability/metrics';
import type { CompiledPolicy, PolicyIssue } from './compiled-policy';
import { compilePolicyFiles, hashPolicyFiles, readPolicyDirectory, type PolicyFileText } from './load-policy-directory';
import type { PolicyHolder } from './policy-holder';
import { waitUntilSettled } from './policy-settle';
import { shrunkFiles } from './policy-shrinkage';

/** What a reload swaps into: the live {@link PolicyHolder}, or the candidate's holder (which may hold nothing yet). */
export interface ReloadTarget {
  readonly current: CompiledPolicy | null;
  readonly lastError: PolicyHolder['lastError'];
  swap(next: CompiledPolicy): void;
  reject(issues: PolicyIssue[]): void;
}

/** How the log names what is reloaded, and what happens to the last good one when a reload fails. */
const WORDING = {
  live: { name: 'policy', kept: 'the last good policy keeps serving', directory: 'the policies directory' },
  candidate: { name: 'candidate policy', kept: 'the last good candidate is kept (a candidate is never enforced)', directory: 'the candidate directory' },
} as const;

/** What {@link PolicyReloader} needs; wired by the composition root (src/app/start-gateway.ts). */
export interface PolicyReloaderOptions {
  /** The policies directory (`iam.policy.dir`), absolute. */
  dir: string;
  holder: ReloadTarget;
  /** `candidate` for `iam.policy.candidate-dir`: only the log's wording differs (default `live`). */
  role?: keyof typeof WORDING;
  /**
   * Quiet time after the last file event before reloading, and the settle window: a changed file is read only
   * once its size and mtime have held for this long (`iam.policy.debounce`).
   */
  debounceMs: number;
  /** Periodic checksum check (`iam.policy.poll-interval`); 0 = off. */
  pollIntervalMs: number;
  /** `iam.authz.resolver-timeout`, for resolvers that set none. */
  defaultResolverTimeoutMs: number;
  /** `upstream.url`, the base of resolver URLs written as paths. */
  upstreamUrl?: string | null;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  metrics: Pick<GatewayMetrics, 'policyReloads' | 'policyRoutes' | 'policyLoadedTimestamp'>;
}

/** The outcome of one reload. */
export interface ReloadOutcome {
  /** False when the directory holds a broken policy (the last good one keeps serving). */
  ok: boolean;
  /** True when a new policy was swapped in. */
  changed: boolean;
  /** Hash of the serving policy after the reload. */
  hash: string;
  /** Every issue found (errors and warnings) in the directory as read. */
  issues: PolicyIssue[];
}

/** One consistent read of the directory. */
interface DirectorySnapshot {
  files: PolicyFileText[];
  issues: PolicyIssue[];
  /** Identifies the contents, read problems included (so an unchanged broken state is recognized). */
  fingerprint: string;
}

/** Reads that saw files missing (a swap in progress) are retried this many times before being reported. */
const READ_ATTEMPTS = 5;

/**
 * Hot reload of the policies directory (docs/policy-format.md):
 * file events are debounced; once a change is seen (by any trigger), the files must settle — the same size
 * and modification time for `debounceMs`, none modified more recently ({@link waitUntilSettled}), so a file
 * written in several steps is never read half-written — then the directory is read (twice, until two reads agree, so a swap in
 * progress is never compiled half-old, half-new), parsed, validated and compiled off the request path and
 * swapped into the {@link PolicyHolder} atomically. Requests that already took their snapshot finish on it.
 * A broken directory changes nothing that serves: its errors are logged with file:line, kept for
 * readiness and counted in `iam_policy_reloads_total{result="failure"}`.
 *
 * Sources of a reload: `fs.watch` on the directory (re-armed when the directory itself is replaced; a
 * second watch on the parent notices the replacement), a periodic checksum check (for file systems where
 * events are unreliable, and changes behind symlinks that point outside the directory), Kubernetes
 * ConfigMap `..data` symlink swaps (seen as events on the directory), and {@link reload} (SIGHUP).
 * Reloads run one at a time.
 */
export class PolicyReloader {
  private readonly options: PolicyReloaderOptions;
  private watcher: FSWatcher | null = null;
  private parentWatcher: FSWatcher | null = null;
  /** `dev:ino` of the directory the watcher is attached to. */
  private watchedIdentity: string | null = null;
  private debounceTimer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private rearmTimer: NodeJS.Timeout | null = null;
  private arming: Promise<void> | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /** A background check is queued and has not started: further triggers can join it. */
  private checkQueued = false;
  /** Fingerprint of the last rejected directory state: background checks do not report it twice. */
  private rejectedFingerprint: string | null = null;
  private started = false;
  private closed = false;
  private readonly wording: (typeof WORDING)[keyof typeof WORDING];

  constructor(options: PolicyReloaderOptions) {
    this.options = options;
    this.wording = WORDING[options.role ?? 'live'];
  }

  /** Starts watching and polling, then checks once (a change made since the initial load is not missed). */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.arm();
    this.watchParent();
    if (this.options.pollIntervalMs > 0) {
      this.pollTimer = setInterval(() => this.onPoll(), this.options.pollIntervalMs);
      this.pollTimer.unref();
    }
    this.scheduleCheck('start');
  }

  /**
   * Reads and compiles the directory now and swaps the result in when it differs from the serving policy
   * (SIGHUP, tests, an operator). A broken directory is reported even if it was reported before.
   */
  reload(reason: string): Promise<ReloadOutcome> {
    return this.enqueue(() => this.sync(reason, true));
  }

  /** Stops watching and polling; resolves when a reload in progress has finished. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of [this.debounceTimer, this.rearmTimer]) if (timer) clearTimeout(timer);
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.debounceTimer = this.rearmTimer = this.pollTimer = null;
    this.watcher?.close();
    this.parentWatcher?.close();
    this.watcher = this.parentWatcher = null;
    await this.queue.catch(() => undefined);
  }

  // ---------------------------------------------------------------- triggers

  private onFileEvent(): void {
    if (this.closed) return;
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = null;
      void this.arm();
      this.scheduleCheck('file change');
    }, this.options.debounceMs);
    this.debounceTimer.unref();
  }

  private onPoll(): void {
    void this.arm();
    this.scheduleCheck('poll');
  }

  /** Queues a background check unless one is already waiting (it will see the latest state anyway). */
  private scheduleCheck(reason: string): void {
    if (this.closed || this.checkQueued) return;
    this.checkQueued = true;
    void this.enqueue(() => {
      this.checkQueued = false;
      return this.sync(reason, false);
    });
  }

  private enqueue(work: () => Promise<ReloadOutcome>): Promise<ReloadOutcome> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  // ---------------------------------------------------------------- watching

  /**
   * (Re)attaches the directory watcher when the directory is new or was replaced (`dev:ino` changed, e.g.
   * renamed away and recreated, or a symlinked directory re-pointed). While it is missing, retries later.
   */
  private arm(): Promise<void> {
    // One at a time: two concurrent arms could each attach a watcher and leak one.
    this.arming ??= this.armNow().finally(() => {
      this.arming = null;
    });
    return this.arming;
  }

  private async armNow(): Promise<void> {
    if (this.closed) return;
    let identity: string | null;
    try {
      const info = await stat(this.options.dir);
      identity = info.isDirectory() ? `${info.dev}:${info.ino}` : null;
    } catch {
      identity = null;
    }
    if (this.closed || (identity !== null && identity === this.watchedIdentity && this.watcher)) return;
    this.watcher?.close();
    this.watcher = null;
    this.watchedIdentity = null;
    if (identity === null) {
      this.retryArmLater();
      return;
    }
    try {
      const watcher = watch(this.options.dir, { persistent: false }, () => this.onFileEvent());
      watcher.on('error', () => {
        // E.g. the directory was deleted: drop this watcher; the next trigger or the retry re-arms.
        if (this.watcher === watcher) {
          watcher.close();
          this.watcher = null;
          this.watchedIdentity = null;
          this.retryArmLater();
        }
        this.onFileEvent();
      });
      this.watcher = watcher;
      this.watchedIdentity = identity;
    } catch (error) {
      this.options.logger.warn({ err: error, dir: this.options.dir }, `${this.wording.name}: cannot watch ${this.wording.directory}; relying on the periodic check`);
      this.retryArmLater();
    }
  }

  private retryArmLater(): void {
    if (this.closed || this.rearmTimer) return;
    this.rearmTimer = setTimeout(() => {
      this.rearmTimer = null;
      void this.arm().then(() => this.scheduleCheck('directory reappeared'));
    }, Math.max(this.options.debounceMs, 500));
    this.rearmTimer.unref();
  }

  /** Watches the parent for the directory entry itself being replaced (rename, delete, re-pointed symlink). */
  private watchParent(): void {
    const name = basename(this.options.dir);
    try {
      this.parentWatcher = watch(dirname(this.options.dir), { persistent: false }, (_event, filename) => {
        if (filename === null || filename.toString() === name) this.onFileEvent();
      });
      this.parentWatcher.on('error', () => {
        this.parentWatcher?.close();
        this.parentWatcher = null;
      });
    } catch {
      // Best effort: the directory watcher and the periodic check still work without it.
      this.parentWatcher = null;
    }
  }

  // ---------------------------------------------------------------- reloading

  /** Brings the holder in line with the directory. Never rejects. */
  private async sync(reason: string, force: boolean): Promise<ReloadOutcome> {
    const { holder } = this.options;
    const serving = holder.current;
    const servingHash = serving?.hash ?? '';
    if (this.closed) return { ok: holder.lastError === null, changed: false, hash: servingHash, issues: [] };
    try {
      let snapshot = await this.readOnce();
      if (serving !== null && snapshot.issues.length === 0 && snapshot.fingerprint === serving.hash) return this.unchanged(reason, force, serving);
      // Something changed: let writers finish before reading for real (#11.19), whatever triggered this.
      await waitUntilSettled(this.options.dir, this.options.debounceMs, { stopped: () => this.closed });
      snapshot = await this.readStable(await this.readOnce());
      if (serving !== null && snapshot.issues.length === 0 && snapshot.fingerprint === serving.hash) return this.unchanged(reason, force, serving);
      if (!force && snapshot.fingerprint === this.rejectedFingerprint) {
        return { ok: false, changed: false, hash: servingHash, issues: holder.lastError?.issues ?? snapshot.issues };
      }
      const result =
        snapshot.issues.length > 0
          ? { policy: null, issues: snapshot.issues }
          : compilePolicyFiles(snapshot.files, { defaultResolverTimeoutMs: this.options.defaultResolverTimeoutMs, upstreamUrl: this.options.upstreamUrl ?? null });
      if (this.closed) return { ok: holder.lastError === null, changed: false, hash: servingHash, issues: result.issues };
      if (!result.policy) return this.rejected(reason, snapshot.fingerprint, result.issues);
      holder.swap(result.policy);
      this.rejectedFingerprint = null;
      this.options.metrics.policyReloads.inc({ result: 'success' });
      this.options.metrics.policyRoutes.set(result.policy.routes.length);
      this.options.metrics.policyLoadedTimestamp.set(Date.now() / 1000);
      this.logIssues(result.issues);
      this.options.logger.info(
        { reason, hash: result.policy.hash, previousHash: serving?.hash ?? null, routes: result.policy.routes.length, files: result.policy.files },
        `${this.wording.name}: reloaded`,
      );
      const shrunk = serving === null ? [] : shrunkFiles(serving, result.policy);
      if (shrunk.length > 0) {
        // Valid, so serving; but a file that lost routes or half its bytes is often one caught half-written.
        this.options.logger.warn(
          { reason, hash: result.policy.hash, shrunk },
          `${this.wording.name}: RELOADED POLICY LOST ROUTES OR SHRANK: ${shrunk.map((file) => `${file.file} ${file.routesBefore} -> ${file.routesAfter} routes${file.bytesBefore !== null && file.bytesAfter !== null ? `, ${file.bytesBefore} -> ${file.bytesAfter} bytes` : ''}`).join('; ')}. If this was not intended, the file may have been read half-written: write policy files to a temporary name and rename them into place.`,
        );
      }
      return { ok: true, changed: true, hash: result.policy.hash, issues: result.issues };
    } catch (error) {
      // Unexpected (a bug, not a bad file): keep serving, say so.
      const issue: PolicyIssue = { severity: 'error', kind: 'io', message: `reload failed: ${(error as Error).message}`, source: null };
      return this.rejected(reason, `error:${(error as Error).message}`, [issue]);
    }
  }

  private unchanged(reason: string, force: boolean, serving: CompiledPolicy): ReloadOutcome {
    const { holder, logger } = this.options;
    const hash = serving.hash;
    this.rejectedFingerprint = null;
    if (holder.lastError !== null) {
      // The directory is back to what serves (a broken edit was reverted): nothing is wrong any more.
      holder.swap(serving);
      logger.info({ reason, hash }, `${this.wording.name}: the directory matches the serving policy again`);
    } else if (force) {
      logger.info({ reason, hash }, `${this.wording.name}: reload requested; the directory matches the serving policy`);
    }
    return { ok: true, changed: false, hash, issues: [] };
  }

  private rejected(reason: string, fingerprint: string, issues: PolicyIssue[]): ReloadOutcome {
    const { holder, logger, metrics } = this.options;
    this.rejectedFingerprint = fingerprint;
    holder.reject(issues);
    metrics.policyReloads.inc({ result: 'failure' });
    this.logIssues(issues);
    const errors = issues.filter((issue) => issue.severity === 'error').length;
    const servingHash = holder.current?.hash ?? '';
    logger.error({ reason, errors, servingHash: holder.current?.hash ?? null }, `${this.wording.name}: reload failed with ${errors} error(s); ${holder.current === null ? `no ${this.wording.name} is loaded` : this.wording.kept}`);
    return { ok: false, changed: false, hash: servingHash, issues };
  }

  /** One log line per issue, with file:line (docs/policy-format.md). */
  private logIssues(issues: readonly PolicyIssue[]): void {
    for (const issue of issues) {
      const where = issue.source ? `${issue.source.file}:${issue.source.line}: ` : '';
      const fields = { kind: issue.kind, file: issue.source?.file, line: issue.source?.line };
      if (issue.severity === 'error') this.options.logger.error(fields, `${this.wording.name}: ${where}${issue.message}`);
      else this.options.logger.warn(fields, `${this.wording.name}: ${where}${issue.message}`);
    }
  }

  private async readOnce(): Promise<DirectorySnapshot> {
    const { files, issues } = await readPolicyDirectory(this.options.dir);
    const hash = hashPolicyFiles(files);
    const fingerprint = issues.length === 0 ? hash : `${hash}|${issues.map((issue) => issue.message).join('|')}`;
    return { files, issues, fingerprint };
  }

  /**
   * Reads until two consecutive reads agree and no file is missing, waiting a little between attempts: a
   * ConfigMap update removes symlinks of deleted files after re-pointing `..data`, and an editor's save
   * may delete before it writes. After {@link READ_ATTEMPTS} the last read is used as it is.
   */
  private async readStable(first: DirectorySnapshot): Promise<DirectorySnapshot> {
    const pauseMs = Math.min(Math.max(this.options.debounceMs, 20), 250);
    let previous = first;
    for (let attempt = 1; attempt < READ_ATTEMPTS; attempt++) {
      if (previous.issues.length > 0) await pause(pauseMs);
      const current = await this.readOnce();
      if (current.fingerprint === previous.fingerprint && current.issues.length === 0) return current;
      if (current.fingerprint !== previous.fingerprint) await pause(pauseMs);
      previous = current;
      if (this.closed) break;
    }
    return previous;
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
