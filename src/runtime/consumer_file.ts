/**
 * ConsumerFile: the ConsumerStore port (broker/ports.ts) over `DATA_DIR/consumers.log`, whose
 * format is src/store/consumers_codec.ts. Positions are written in batches, never a write per
 * ACK: saves collect in memory and one append carries them all —
 *
 *   fsync always     the next append starts as soon as the one before finished, and is fsynced
 *                    (a group commit: ACKs arriving meanwhile share the next one)
 *   fsync interval   an append every CONSUMERS_WRITE_INTERVAL_MS, fsynced
 *   fsync never      an append every CONSUMERS_WRITE_INTERVAL_MS, not fsynced
 *
 * so after `kill -9` a consumer resumes at the last position written: at most its unacknowledged
 * messages and the last write window are delivered again, never a gap. The file is compacted
 * (every live consumer written to `consumers.log.tmp`, fsynced, renamed over it, the directory
 * fsynced) when it holds more than 4 times its live records. Opening a damaged file (a bad record
 * followed by more bytes) fails with ARIA_ERR_STORE_CORRUPT naming the file and offset; a torn
 * tail (a write cut by a crash) is dropped, and the next write truncates it away.
 *
 * Session states (a door's, e.g. an MQTT session's in-flight packet ids, wills and expiry) ride
 * the same file, batches and compaction: `saveState` takes a function that encodes the state when
 * the batch is written (so a state that changes per PUBLISH costs one map entry until then, and
 * one record per batch); `whenDurable` calls back once what was saved before it is written
 * (fsync always) or at once (the other policies: durable within their interval). A `lazy` save
 * (a change that may be lost in a crash's last window, e.g. a message in flight) waits for the
 * interval even with fsync always: a busy state is encoded at most once per interval.
 * Not here: deciding positions (consumer_registry.ts), the record bytes (consumers_codec.ts).
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { join } from "node:path";
import type { ConsumerRecord, ConsumerStore } from "../broker/ports.ts";
import { CONSUMERS_WRITE_INTERVAL_MS } from "../constants.ts";
import { consumerNameRefusal } from "../protocol/mod.ts";
import {
  CONSUMER_RECORD_BYTES_MAX,
  CONSUMER_RECORD_HEAD_BYTES,
  CONSUMERS_FILE_MAGIC,
  CONSUMER_STATE_BYTES_MAX,
  type ConsumerEntry,
  decodeConsumersFile,
  encodeConsumerEntries,
  salvageConsumersFile,
} from "../store/consumers_codec.ts";
import type { Crc32 } from "../store/crc32.ts";
import { StoreError } from "../store/mod.ts";

/** The consumers file's name in the data directory. */
export const CONSUMERS_FILE = "consumers.log";
/** Compaction waits until the file is this large at least. */
const COMPACT_BYTES_MIN = 64 * 1024;

/** How the file is written. */
export interface ConsumerFileOptions {
  fsync: "always" | "interval" | "never";
  crc32: Crc32;
  /** Milliseconds between appends without fsync always (CONSUMERS_WRITE_INTERVAL_MS). */
  intervalMs?: number;
  /** Called when a write fails (the positions stay in memory and are tried again). */
  onError?: (error: Error) => void;
  /** Called at open when a torn tail (a write a crash cut short) is cut away (the server WARNs). */
  onTornTail?: (cut: TornTail) => void;
}

/** A torn tail cut at open: where, how many bytes, and the consumer it named when readable. */
export interface TornTail {
  file: string;
  offset: number;
  bytesCut: number;
  /** The consumer whose record was cut, when its name survived; absent: unreadable. */
  consumer?: string;
}

/** Encodes a session state when its batch is written; null: the state is gone (removed). */
export type StateEncoder = () => Uint8Array | null;

/** Durable consumers' positions in one file of the data directory. */
export class ConsumerFile implements ConsumerStore {
  private readonly live = new Map<string, ConsumerRecord>();
  private readonly pending = new Map<string, ConsumerEntry>();
  private readonly loaded: ConsumerRecord[];
  /** Session states as last written (what a compaction writes). */
  private readonly liveStates = new Map<string, Uint8Array>();
  /** States to write in the next batch: their encoders (null: remove). */
  private readonly pendingStates = new Map<string, StateEncoder | null>();
  private readonly loadedStates: ReadonlyMap<string, Uint8Array>;
  /** Lazy saves waiting for the interval (then they join `pendingStates`). */
  private readonly lazyStates = new Map<string, StateEncoder>();
  private lazyTimer: ReturnType<typeof setTimeout> | null = null;
  /** Called once the next write is done (whenDurable). */
  private waiters: (() => void)[] = [];
  private handle: FileHandle | null = null;
  private fileBytes: number;
  private writing: Promise<void> | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** The last write failed: the next waits an interval. */
  private failed = false;
  /** A write is queued for after the current event (fsync always). */
  private queued = false;

  private constructor(
    readonly path: string,
    private readonly options: ConsumerFileOptions,
    records: ConsumerRecord[],
    validBytes: number,
    states: ReadonlyMap<string, Uint8Array>,
  ) {
    this.loaded = records;
    this.loadedStates = states;
    for (const [name, state] of states) this.liveStates.set(name, state);
    for (const record of records) this.live.set(record.name, record);
    this.fileBytes = validBytes;
  }

  /** Reads `dataDir`'s consumers file (absent: none); throws ARIA_ERR_STORE_CORRUPT on damage. */
  static async open(dataDir: string, options: ConsumerFileOptions): Promise<ConsumerFile> {
    const path = join(dataDir, CONSUMERS_FILE);
    let bytes: Uint8Array | null;
    try {
      bytes = readFileSync(path);
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
      bytes = null;
    }
    // Absent: no consumer yet (the file is created whole below). Present, it is read whole: one
    // shorter than its header is damage (decodeConsumersFile).
    const decoded =
      bytes === null
        ? { ok: true as const, entries: new Map(), states: new Map(), validBytes: 0, records: 0 }
        : decodeConsumersFile(bytes, options.crc32);
    if (!decoded.ok)
      throw new StoreError(
        "ARIA_ERR_STORE_CORRUPT",
        `Cannot read the durable consumers' file "${path}": ${decoded.reason} at offset ${decoded.offset}`,
      );
    const records = [...decoded.entries.values()].map(({ kind: _, ...record }) => record);
    const file = new ConsumerFile(path, options, records, decoded.validBytes, decoded.states);
    // A torn tail: the next write starts clean. Absent: created whole.
    if (bytes !== null && decoded.validBytes < bytes.length)
      options.onTornTail?.(tornTailOf(path, bytes, decoded.validBytes));
    if (bytes === null || decoded.validBytes < bytes.length) file.rewriteSync();
    return file;
  }

  load(): readonly ConsumerRecord[] {
    return this.loaded;
  }

  save(record: ConsumerRecord): void {
    this.live.set(record.name, record);
    this.pending.set(record.name, { kind: "put", ...record });
    this.schedule();
  }

  remove(name: string): void {
    this.live.delete(name);
    this.pending.set(name, { kind: "remove", name });
    this.schedule();
  }

  /** The session states stored when the server started, by name. */
  loadStates(): ReadonlyMap<string, Uint8Array> {
    return this.loadedStates;
  }

  /**
   * The state `name` changed: `encode` gives its bytes when the next batch is written; `lazy`:
   * in the first batch written once CONSUMERS_WRITE_INTERVAL_MS has passed.
   */
  saveState(name: string, encode: StateEncoder, lazy = false): void {
    if (lazy && !this.pendingStates.has(name)) {
      this.lazyStates.set(name, encode);
      this.lazyTimer ??= setTimeout(() => {
        this.lazyTimer = null;
        this.lazyDue();
      }, this.options.intervalMs ?? CONSUMERS_WRITE_INTERVAL_MS);
      return;
    }
    this.lazyStates.delete(name);
    this.pendingStates.set(name, encode);
    this.schedule();
  }

  /** The lazy saves join the next batch. */
  private lazyDue(): void {
    if (this.lazyStates.size === 0) return;
    for (const [name, encode] of this.lazyStates) this.pendingStates.set(name, encode);
    this.lazyStates.clear();
    this.schedule();
  }

  /** Forgets state `name`. */
  removeState(name: string): void {
    this.lazyStates.delete(name);
    this.pendingStates.set(name, null);
    this.schedule();
  }

  /** Calls `done` once what was saved before is written (fsync always; others: at once). */
  whenDurable(done: () => void): void {
    if (this.options.fsync !== "always" || this.closed) return done();
    if (!this.hasPending() && this.writing === null) return done();
    this.waiters.push(done);
    this.schedule();
  }

  private hasPending(): boolean {
    return this.pending.size > 0 || this.pendingStates.size > 0;
  }

  /** Writes what is pending now (and waits for a write in flight). */
  async flush(): Promise<void> {
    this.lazyDue();
    // A write's end may start the next one (fsync always): wait until none runs and nothing is
    // pending, or a write failed (then the timer retries).
    for (;;) {
      if (this.writing !== null) await this.writing;
      else if (this.hasPending() && !this.failed) await this.write();
      else if (this.hasPending() && this.failed && this.timer !== null) {
        this.stopTimer();
        await this.write();
        if (this.failed) return;
      } else return;
    }
  }

  /** Writes what is pending, fsynced, and closes the file (shutdown). */
  async close(): Promise<void> {
    this.stopTimer();
    if (this.lazyTimer !== null) clearTimeout(this.lazyTimer);
    this.lazyTimer = null;
    await this.flush();
    // A write that ended meanwhile may have set the timer again.
    this.stopTimer();
    this.closed = true;
    for (const done of this.waiters.splice(0)) done();
    await this.handle?.sync();
    await this.handle?.close();
    this.handle = null;
  }

  private stopTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.closed || this.writing !== null || this.timer !== null || this.queued) return;
    // After a failed write, the next try waits an interval (a full disk is not retried hot).
    if (this.options.fsync === "always" && !this.failed) {
      // After the current event: a state's encoder never runs in the middle of its owner's work.
      this.queued = true;
      queueMicrotask(() => {
        this.queued = false;
        if (!this.closed && this.writing === null) void this.write();
      });
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.closed) void this.write();
    }, this.options.intervalMs ?? CONSUMERS_WRITE_INTERVAL_MS);
  }

  /** One append of everything pending (or a compaction); then the next, if more came. */
  private write(): Promise<void> {
    let entries: ConsumerEntry[] = [];
    let states: [string, StateEncoder | null][] = [];
    // Those waiting for what was saved before this write began.
    const waiting = this.waiters.splice(0);
    const run = async () => {
      try {
        // After a failed append the file may end in part of a record, which a later append would
        // turn into damage: the next write rewrites the file whole instead.
        if (this.failed || this.fileBytes > Math.max(COMPACT_BYTES_MIN, 4 * this.liveBytes())) {
          await this.handle?.close();
          this.handle = null;
          const changed = [...this.pending.keys()];
          for (const [name, encode] of this.pendingStates) this.stateEntry(name, encode);
          this.pendingStates.clear();
          this.rewriteSync();
          // Everything live is in the new file (what came meanwhile stays pending).
          for (const name of changed) this.pending.delete(name);
          this.failed = false;
          for (const done of waiting) done();
          return;
        }
        entries = [...this.pending.values()];
        this.pending.clear();
        states = [...this.pendingStates];
        this.pendingStates.clear();
        for (const [name, encode] of states) entries.push(this.stateEntry(name, encode));
        const bytes = encodeConsumerEntries(entries, this.options.crc32);
        this.handle ??= await open(this.path, "a");
        await this.handle.write(bytes);
        this.fileBytes += bytes.length;
        if (this.options.fsync !== "never") await this.handle.sync();
        this.failed = false;
        for (const done of waiting) done();
      } catch (error) {
        this.failed = true;
        await this.handle?.close().catch(() => {});
        this.handle = null;
        // Written in part or not at all: the entries go again (a newer one of a name wins).
        for (const entry of entries)
          if (entry.kind !== "state" && entry.kind !== "unstate" && !this.pending.has(entry.name))
            this.pending.set(entry.name, entry);
        for (const [name, encode] of states)
          if (!this.pendingStates.has(name)) this.pendingStates.set(name, encode);
        this.waiters.unshift(...waiting);
        this.options.onError?.(error as Error);
      }
    };
    this.writing = run().finally(() => {
      this.writing = null;
      if (this.hasPending()) this.schedule();
      else if (!this.failed) for (const done of this.waiters.splice(0)) done();
    });
    return this.writing;
  }

  /** The record of a pending state, encoded now, and the live state updated. */
  private stateEntry(name: string, encode: StateEncoder | null): ConsumerEntry {
    let state = encode === null ? null : encode();
    if (state !== null && state.length > CONSUMER_STATE_BYTES_MAX) {
      // Not written (the encoder bounds what it keeps; this is a bug): the older state stays.
      this.options.onError?.(new Error(`session state "${name}" of ${state.length} bytes`));
      state = this.liveStates.get(name) ?? null;
    }
    if (state === null) this.liveStates.delete(name);
    else this.liveStates.set(name, state);
    return state === null ? { kind: "unstate", name } : { kind: "state", name, state };
  }

  /** Bytes the live records take (an estimate of a compacted file's size). */
  private liveBytes(): number {
    let bytes = CONSUMERS_FILE_MAGIC.length;
    for (const record of this.live.values())
      bytes += 40 + record.name.length + record.filter.reduce((sum, t) => sum + 2 + t.length, 0);
    for (const [name, state] of this.liveStates) bytes += 16 + name.length + state.length;
    return bytes;
  }

  /** Writes every live record to a new file, fsynced, and renames it over the old one. */
  private rewriteSync(): void {
    const entries: ConsumerEntry[] = [...this.live.values()].map((r) => ({ kind: "put", ...r }));
    for (const [name, state] of this.liveStates) entries.push({ kind: "state", name, state });
    const body = replaceConsumersFile(this.path, entries, this.options.crc32);
    this.fileBytes = CONSUMERS_FILE_MAGIC.length + body.length;
  }
}

/**
 * Writes `entries` as a whole consumers file beside `path`, fsynced, renames it over `path` and
 * syncs the directory: the old file or the new one, never a mix. Returns the body written.
 */
function replaceConsumersFile(
  path: string,
  entries: readonly ConsumerEntry[],
  crc32: Crc32,
): Uint8Array {
  const body = encodeConsumerEntries(entries, crc32);
  const temporary = `${path}.tmp`;
  const fd = openSync(temporary, "w");
  try {
    writeSync(fd, CONSUMERS_FILE_MAGIC);
    writeSync(fd, body);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, path);
  syncDirectory(join(path, ".."));
  return body;
}

/** The torn tail of `bytes` from `offset` (a record head, kind, name length, name: when whole). */
function tornTailOf(file: string, bytes: Uint8Array, offset: number): TornTail {
  const cut: TornTail = { file, offset, bytesCut: bytes.length - offset };
  const name = recordNameAt(bytes, offset, bytes.length);
  if (name !== null) cut.consumer = name;
  return cut;
}

/** The consumer name of a record at `offset` that did not check, when it reads as one; or null. */
function recordNameAt(bytes: Uint8Array, offset: number, end: number): string | null {
  const nameAt = offset + CONSUMER_RECORD_HEAD_BYTES + 2;
  const nameBytes = bytes[nameAt - 1];
  if (nameBytes === undefined || nameBytes === 0 || nameAt + nameBytes > end) return null;
  try {
    const name = new TextDecoder("utf-8", { fatal: true }).decode(
      bytes.subarray(nameAt, nameAt + nameBytes),
    );
    return consumerNameRefusal(name) === null ? name : null;
  } catch {
    return null; // not a name: the record is unreadable
  }
}

/**
 * The records of a damaged region, walked by their length fields while those hold: the names
 * that read, and how many records (or the rest, as one) did not give one.
 */
function damagedNames(bytes: Uint8Array, offset: number, length: number) {
  const names: string[] = [];
  const stateNames: string[] = [];
  let unreadable = 0;
  const end = offset + length;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = offset;
  while (at < end) {
    const bodyBytes = at + 4 <= end ? view.getUint32(at, true) : -1;
    const name = recordNameAt(bytes, at, end);
    const kind = bytes[at + CONSUMER_RECORD_HEAD_BYTES];
    if (name === null) unreadable++;
    else if (kind === 3 || kind === 4) stateNames.push(name);
    else names.push(name);
    const next = at + CONSUMER_RECORD_HEAD_BYTES + bodyBytes;
    if (bodyBytes < 0 || bodyBytes > CONSUMER_RECORD_BYTES_MAX || next > end) break;
    at = next;
  }
  return { names, stateNames, unreadable };
}

/** What `aria repair` did (or would do) to the consumers file. */
export interface ConsumersRepair {
  /** The file's path. */
  file: string;
  /** Damaged regions: moved into `damaged/` (`to`), their records lost. */
  damaged: { offset: number; bytes: number; reason: string; to: string }[];
  /** Consumers kept. */
  kept: number;
  /** Consumers named in the damage and not kept: they start anew. */
  lost: string[];
  /** Consumers named in the damage and kept at an older record: they resume there. */
  older: string[];
  /** Damaged records whose name could not be read (their consumers are lost or resume older). */
  unreadable: number;
  /** Session states (an MQTT session's) named in the damage and not kept: those sessions resume
   * from their consumers only (a new session when they have none). */
  lostStates: string[];
  /** Session states named in the damage and kept at an older record. */
  olderStates: string[];
}

/**
 * `aria repair`'s part for `DATA_DIR/consumers.log`: when it holds damage, copies each damaged
 * region into `damaged/consumers.log.<offset>` (fsynced), then rewrites the file with every
 * record that checks, those after the damage too (a consumer whose newest record was damaged
 * falls back to its record before, or is gone and starts anew). Null: no file, or no damage.
 * `dryRun`: changes nothing.
 */
export function repairConsumersFile(
  dataDir: string,
  options: { crc32: Crc32; dryRun?: boolean },
): ConsumersRepair | null {
  const path = join(dataDir, CONSUMERS_FILE);
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return null;
    throw error;
  }
  if (decodeConsumersFile(bytes, options.crc32).ok) return null;
  const salvage = salvageConsumersFile(bytes, options.crc32);
  const damaged = salvage.damaged.map((region) => ({
    ...region,
    to: join(dataDir, "damaged", `${CONSUMERS_FILE}.${region.offset}`),
  }));
  if (options.dryRun !== true) {
    mkdirSync(join(dataDir, "damaged"), { recursive: true });
    for (const region of damaged) {
      const fd = openSync(region.to, "w");
      try {
        writeSync(fd, bytes.subarray(region.offset, region.offset + region.bytes));
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    syncDirectory(join(dataDir, "damaged"));
    replaceConsumersFile(path, [...salvage.entries, ...salvage.states], options.crc32);
  }
  const kept = new Set(salvage.entries.map((entry) => entry.name));
  const keptStates = new Set(salvage.states.map((entry) => entry.name));
  const named = new Set<string>();
  const namedStates = new Set<string>();
  let unreadable = 0;
  for (const region of salvage.damaged) {
    const found = damagedNames(bytes, region.offset, region.bytes);
    for (const name of found.names) named.add(name);
    for (const name of found.stateNames) namedStates.add(name);
    unreadable += found.unreadable;
  }
  const lost = [...named].filter((name) => !kept.has(name)).sort();
  const older = [...named].filter((name) => kept.has(name)).sort();
  const lostStates = [...namedStates].filter((name) => !keptStates.has(name)).sort();
  const olderStates = [...namedStates].filter((name) => keptStates.has(name)).sort();
  const keptCount = salvage.entries.length;
  return { file: path, damaged, kept: keptCount, lost, older, unreadable, lostStates, olderStates };
}

/** fsyncs a directory, so a rename in it is durable (ignored where directories cannot be opened). */
function syncDirectory(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return;
  }
  try {
    fsyncSync(fd);
  } catch {
    // Some file systems refuse fsync on a directory; the rename is as durable as they allow.
  } finally {
    closeSync(fd);
  }
}
