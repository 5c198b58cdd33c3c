import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { AuditEventRecord } from '../domain/records';

/**
 * Audit events that could not be written before a stop (database down), kept in a local directory
 * (`iam.audit.spool-dir`) and written at the next start, so no event is lost across a stop. One file per
 * stop, JSON lines, fsynced before the process exits. A starting instance claims a file by renaming it, so
 * two instances sharing the directory never replay the same file; a claim whose process is gone (it
 * crashed while replaying) is taken over. Delivery is at least once: a batch whose write was in flight at
 * the stop may be stored twice.
 */
export class AuditSpool {
  /** Names this process's claims (a pid alone repeats: a container's gateway is always pid 1). */
  private readonly instance = `${process.pid}-${randomBytes(4).toString('hex')}`;

  constructor(readonly dir: string) {}

  /** Writes the events to a new spool file and fsyncs it; throws when it cannot (the caller fails loudly). */
  write(events: readonly AuditEventRecord[]): string {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const name = `audit-${Date.now()}-${process.pid}-${randomBytes(4).toString('hex')}`;
    const temporary = join(this.dir, `${name}.tmp`);
    const fd = openSync(temporary, 'wx', 0o600);
    try {
      writeSync(fd, events.map((event) => JSON.stringify(event)).join('\n') + '\n');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const path = join(this.dir, `${name}.jsonl`);
    renameSync(temporary, path);
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
