import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Why a bounded spool write stored nothing: the budget (`iam.audit.spool-max-bytes`) would be exceeded. */
export class SpoolFullError extends Error {
  constructor(
    readonly bytes: number,
    readonly held: number,
    readonly maxBytes: number,
  ) {
    super(`the spool holds ${held} bytes; ${bytes} more would exceed iam.audit.spool-max-bytes (${maxBytes})`);
    this.name = 'SpoolFullError';
  }
}

/** How a spool file is written. */
export interface SpoolWriteOptions {
  /** The file is born claimed by this instance: its own unfinished work, which no other running instance takes. */
  claimed?: boolean;
  /** Refused with {@link SpoolFullError}, nothing written, when it would take the files held past `maxBytes`. */
  bounded?: boolean;
}

/**
 * What the database could not take before a stop, kept in a local directory and written by the next start,
 * so nothing answered is lost across a stop: audit events (`audit-…`, written at stop) and ended sessions
 * (`endings-…`, written before the ending is answered). Both kinds share one directory and this one
 * mechanism; each file holds one kind, told apart by its name.
 *
 * A file is JSON lines, written to a temporary name, fsynced, renamed into place, and the directory fsynced,
 * so it is either whole or absent after a crash. A starting instance claims a file by renaming it
 * (`<name>.claimed-<pid>-<random>`), so two instances sharing the directory never replay the same file; a
 * claim whose process is gone (it stopped or crashed before the file was written) is taken over. Delivery is
 * at least once: a file whose write was in flight at a stop may be replayed although it took effect, so what
 * is spooled must be safe to apply twice (or be deduplicated by whoever applies it).
 */
export class DiskSpool<T> {
  /** Names this process's claims (a pid alone repeats: a container's gateway is always pid 1). */
  private readonly instance = `${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly pattern: RegExp;
  /** Orders the files this process writes within one millisecond (names sort oldest first). */
  private sequence = 0;
  /** Bytes of the files this process holds (written claimed, or claimed; not yet removed). */
  private held = 0;
  private readonly sizes = new Map<string, number>();

  constructor(
    readonly dir: string,
    /** The file name prefix of this kind (`audit`, `endings`); `[a-z]+`. */
    private readonly kind: string,
    /** Turns a parsed line back into an item (dates are strings in JSON); throws when it is not one. */
    private readonly revive: (parsed: unknown) => T,
    /** What a `bounded` write may fill the held files up to (`iam.audit.spool-max-bytes`). */
    readonly maxBytes = Number.POSITIVE_INFINITY,
  ) {
    if (!/^[a-z]+$/.test(kind)) throw new TypeError(`spool kind must be lowercase letters: ${kind}`);
    this.pattern = new RegExp(`^(${kind}-[0-9]+-[0-9]+-[0-9a-f]+)\\.(jsonl|claimed-(([0-9]+)-[0-9a-f]+))$`);
  }

  /** Bytes of the spool files this process holds, waiting to be applied (`iam_audit_spool_bytes`). */
  get bytes(): number {
    return this.held;
  }

  /**
   * Writes `items` to a new file, durably, and resolves its path; rejects when it cannot (the caller decides
   * how loudly to fail). With `claimed` the file is born claimed by this instance: it is this process's own
   * record of unfinished work, which no other running instance takes until this one is gone or releases it.
   */
  async write(items: readonly T[], options: SpoolWriteOptions = {}): Promise<string> {
    const { name, text, bytes } = this.prepare(await jsonLines(items), options);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const temporary = join(this.dir, `${name}.tmp`);
    const file = await open(temporary, 'wx', 0o600);
    try {
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    const path = this.pathOf(name, options);
    await rename(temporary, path);
    await this.syncDirectory();
    if (options.claimed) this.hold(path, bytes);
    return path;
  }

  private prepare(text: string, options: SpoolWriteOptions): { name: string; text: string; bytes: number } {
    const bytes = Buffer.byteLength(text);
    if (options.bounded && this.held + bytes > this.maxBytes) throw new SpoolFullError(bytes, this.held, this.maxBytes);
    const sequence = (this.sequence++ % 0x1_0000_0000).toString(16).padStart(8, '0');
    return { name: `${this.kind}-${Date.now()}-${process.pid}-${sequence}${randomBytes(4).toString('hex')}`, text, bytes };
  }

  private pathOf(name: string, options: SpoolWriteOptions): string {
    return join(this.dir, options.claimed ? `${name}.claimed-${this.instance}` : `${name}.jsonl`);
  }

  private hold(path: string, bytes: number): void {
    this.sizes.set(path, bytes);
    this.held += bytes;
  }

  /** Claims every spooled file of this kind (and abandoned claims); resolves the claimed paths, oldest first. */
  async claim(): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const claimed: string[] = [];
    for (const name of names.sort()) {
      const match = this.pattern.exec(name);
      if (!match) continue;
      if (match[3] === this.instance) continue;
      const owner = match[4] === undefined ? null : Number(match[4]);
      if (owner !== null && owner !== process.pid && isAlive(owner)) continue;
      const target = join(this.dir, `${match[1]}.claimed-${this.instance}`);
      try {
        await rename(join(this.dir, name), target);
        claimed.push(target);
        this.hold(target, (await stat(target)).size);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error; // another instance took it
      }
    }
    return claimed;
  }

  /** Hands a file this instance claimed back to the directory, for whichever instance starts next. */
  async release(path: string): Promise<void> {
    const match = /^(.*)\.claimed-[0-9]+-[0-9a-f]+$/.exec(path);
    if (!match) return;
    await rename(path, `${match[1]}.jsonl`);
  }

  /** Keeps a file the database refused for its content out of every replay (`<name>.refused`), for an operator. */
  async setAside(path: string): Promise<string> {
    const target = `${path.replace(/\.(jsonl|claimed-[0-9]+-[0-9a-f]+)$/, '')}.refused`;
    await rename(path, target);
    return target;
  }

  /** The items of a claimed file; lines that do not parse are counted as `unreadable`. */
  async read(path: string): Promise<{ items: T[]; unreadable: number }> {
    const items: T[] = [];
    let unreadable = 0;
    for (const line of (await readFile(path, 'utf8')).split('\n')) {
      if (line.length === 0) continue;
      try {
        items.push(this.revive(JSON.parse(line)));
      } catch {
        unreadable++;
      }
    }
    return { items, unreadable };
  }

  /** Removes a file whose items took effect (already gone is fine). */
  async remove(path: string): Promise<void> {
    try {
      await unlink(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    this.held -= this.sizes.get(path) ?? 0;
    this.sizes.delete(path);
  }

  /** A rename is durable once the directory is (POSIX); where directories cannot be opened, skipped. */
  private async syncDirectory(): Promise<void> {
    let directory;
    try {
      directory = await open(this.dir, 'r');
    } catch {
      return;
    }
    try {
      await directory.sync().catch(() => undefined);
    } finally {
      await directory.close();
    }
  }
}

/** Characters serialized between two turns of the event loop. */
const SERIALIZE_SLICE = 64 * 1024;

/**
 * The items as JSON lines, serialized a slice at a time with a turn of the event loop between slices: a spill of
 * thousands of events (a check call's row holds up to 100 decisions) never holds the loop for the whole batch.
 */
async function jsonLines(items: readonly unknown[]): Promise<string> {
  const lines: string[] = [];
  let slice = 0;
  for (const item of items) {
    const line = JSON.stringify(item);
    lines.push(line);
    slice += line.length;
    if (slice >= SERIALIZE_SLICE) {
      slice = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  return lines.join('\n') + '\n';
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
