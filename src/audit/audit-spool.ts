import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { AuditEventRecord } from '../domain/records';

/** Why a spool write stored nothing: the budget (`iam.audit.spool-max-bytes`) would be exceeded. */
export class SpoolFullError extends Error {
  constructor(readonly bytes: number, readonly held: number, readonly maxBytes: number) {
    super(`the audit spool holds ${held} bytes; ${bytes} more would exceed iam.audit.spool-max-bytes (${maxBytes})`);
    this.name = 'SpoolFullError';
  }
}

/**
 * Audit events the database could not take yet, kept in a local directory (`iam.audit.spool-dir`): those still
 * unwritten at a stop (written at the next start), and, while the database is away, the oldest part of a full
 * memory buffer (written when it returns). JSON lines, one file per write (a chunk of events, never one per event),
 * fsynced before the write returns. A starting instance claims a file by renaming it, so two instances sharing the
 * directory never replay the same file; a claim whose process is gone (it crashed while replaying) is taken over.
 * Files a running instance wrote while the buffer was full are written as its claims. Events carry their own id
 * and the database skips an id it has (adapters/postgres), so a file replayed twice stores its events once.
 */
export class AuditSpool {
  /** Names this process's claims (a pid alone repeats: a container's gateway is always pid 1). */
  private readonly instance = `${process.pid}-${randomBytes(4).toString('hex')}`;
  /** Orders the files this process writes within one millisecond (names sort oldest first). */
  private sequence = 0;
  /** Bytes of the files this process holds (written or claimed, not yet removed). */
  private held = 0;
  private readonly sizes = new Map<string, number>();

  /** @param maxBytes what {@link write} with `bounded` may fill the directory up to (`iam.audit.spool-max-bytes`). */
  constructor(
    readonly dir: string,
    readonly maxBytes = Number.POSITIVE_INFINITY,
  ) {}

  /** Bytes of the spool files this process holds, waiting to be written (`iam_audit_spool_bytes`). */
  get bytes(): number {
    return this.held;
  }

  /**
   * Writes the events to a new spool file and fsyncs it; throws when it cannot (the caller decides what is lost).
   * `claimed`: the file is this process's own claim (replayed by it while it runs, by the next start otherwise).
   * `bounded`: refused with {@link SpoolFullError}, nothing written, when it would exceed `maxBytes`.
   */
  write(events: readonly AuditEventRecord[], options: { claimed?: boolean; bounded?: boolean } = {}): string {
    const text = events.map((event) => JSON.stringify(event)).join('\n') + '\n';
    const bytes = Buffer.byteLength(text);
    if (options.bounded && this.held + bytes > this.maxBytes) throw new SpoolFullError(bytes, this.held, this.maxBytes);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const sequence = (this.sequence++ % 0x1_0000_0000).toString(16).padStart(8, '0');
    const name = `audit-${Date.now()}-${process.pid}-${sequence}${randomBytes(4).toString('hex')}`;
    const temporary = join(this.dir, `${name}.tmp`);
    const fd = openSync(temporary, 'wx', 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const path = join(this.dir, options.claimed ? `${name}.claimed-${this.instance}` : `${name}.jsonl`);
    renameSync(temporary, path);
    if (options.claimed) this.hold(path, bytes);
    return path;
  }

  /** Claims every spooled file (and abandoned claims); returns the claimed paths, oldest first. */
  claim(): string[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const claimed: string[] = [];
    for (const name of names.sort()) {
      const match = /^(audit-[0-9]+-[0-9]+-[0-9a-f]+)\.(jsonl|claimed-(([0-9]+)-[0-9a-f]+))$/.exec(name);
      if (!match) continue;
      if (match[3] === this.instance) continue;
      const owner = match[4] === undefined ? null : Number(match[4]);
      if (owner !== null && owner !== process.pid && isAlive(owner)) continue;
      const target = join(this.dir, `${match[1]}.claimed-${this.instance}`);
      try {
        renameSync(join(this.dir, name), target);
        claimed.push(target);
        this.hold(target, statSync(target).size);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error; // another instance took it
      }
    }
    return claimed;
  }

  /** The events of a claimed file (lines that do not parse are returned as `unreadable`). */
  read(path: string): { events: AuditEventRecord[]; unreadable: number } {
    const events: AuditEventRecord[] = [];
    let unreadable = 0;
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (line.length === 0) continue;
      try {
        const event = JSON.parse(line) as AuditEventRecord & { occurredAt: string };
        events.push({ ...event, occurredAt: new Date(event.occurredAt) });
      } catch {
        unreadable++;
      }
    }
    return { events, unreadable };
  }

  remove(path: string): void {
    unlinkSync(path);
    this.held -= this.sizes.get(path) ?? 0;
    this.sizes.delete(path);
  }

  private hold(path: string, bytes: number): void {
    this.sizes.set(path, bytes);
    this.held += bytes;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
