/**
 * Store: Aria's durable message log over a Disk. The broker hands it messages with seqs it
 * assigned (contiguous, increasing); the store persists them, says when they are durable, reads
 * them back by filter in seq order, and retires old data. See src/store/mod.ts for the API and
 * docs/storage.md for the design and file formats.
 *
 * Owns the parts (journal writer, sorter, readers) and their shared StoreContext; only this
 * class is exported. Not reentrant across processes: one process per data directory.
 */
import { STORE_BACKLOG_FACTOR, STORE_RECORD_HEADER_BYTES } from "../constants.ts";
import { Filter } from "../topic/mod.ts";
import { type JournalState, StoreContext, type StoreOptions, resolveOptions } from "./context.ts";
import { type Disk, isOutOfSpace } from "./disk.ts";
import { JournalWriter } from "./journal_writer.ts";
import { SEGMENT_DIR, StoreError, indexPath, subtreeStorePath } from "./layout.ts";
import {
  MANIFEST_REMOVE,
  MANIFEST_SPLIT,
  MANIFEST_SWAP,
  MANIFEST_TOPICS,
  type ManifestRecord,
  type SplitSummary,
  type TopicCount,
} from "./manifest_codec.ts";
import { appendManifestLocked, splitOfSubtreeStores } from "./manifest.ts";
import { type ReadFrom, type ReadOptions, StoreReader } from "./read/mod.ts";
import { recordTopic, recordTopicEquals, type StoredMessage } from "./record.ts";
import { type RecoveryReport, recover } from "./recovery.ts";
import { JOURNAL_HEADER_BYTES } from "./file_header.ts";
import {
  dropDrainedJournals,
  retireJournalFile,
  sealJournalFile,
  startJournal,
} from "./journal_files.ts";
import type { SegmentMeta } from "./segment_index.ts";
import { Sorter } from "./sorter.ts";
import {
  type SubtreeStoreMeta,
  isSubtreeStore,
  readSubtreeStoreHead,
  recordSpanOf,
} from "./subtree_store_file.ts";
import { scanRecords } from "./scan.ts";

/** Sizes and counts of what the store holds. */
export type StoreStats = {
  nextSeq: number;
  committedSeq: number;
  partitions: number;
  journals: number;
  journalBytes: number;
  /** Bytes of the spare journal files kept for recycling (journal_files.ts). */
  spareJournalBytes: number;
  segments: number;
  segmentBytes: number;
  pendingRecords: number;
  pendingBytes: number;
  segmentsWritten: number;
  manifestBytes: number;
  openFiles: number;
  fileOpens: number;
  /** Subtree stores in force and their bytes. */
  stores: number;
  storeBytes: number;
  /** Bytes readers have read from data files since open. */
  bytesRead: number;
  /** Why the store cannot write now (see Store.unwritable), or null; absent from older builds' fakes. */
  unwritable?: string | null;
};

/** One partition's closed data: what a split plans from. */
export type PartitionLayout = {
  partition: string;
  segments: SegmentMeta[];
  stores: SubtreeStoreMeta[];
};

/**
 * What a split says of itself at its switch; the store adds its generation, subtree stores and
 * bytes.
 */
export type SplitDetails = Pick<SplitSummary, "finishedUs" | "durationUs" | "algorithm" | "plan">;

/**
 * A split's switch: the segments and subtree stores it replaces and the subtree stores replacing
 * them, what the split was (kept in the manifest as the last split; without it, the subtree stores
 * alone tell), and the per-topic messages and record bytes of each new subtree store (without
 * them, `countFiles` measures it).
 */
export type LayoutSwap = {
  removed: number[];
  added: SubtreeStoreMeta[];
  split?: SplitDetails;
  topics?: { id: number; topics: TopicCount[] }[];
};

/** What the data directory holds of one topic: messages, their record bytes and payload bytes. */
export type TopicVolume = {
  topic: string;
  messages: number;
  recordBytes: number;
  payloadBytes: number;
};

/**
 * What the journal holds that no closed file does yet (open segments): a split cannot see it
 * until it closes, by the segment size or age, at a clean close, or by `seal`.
 */
export type OpenData = {
  /** Partitions with records in the journal only, those records, and their record bytes. */
  partitions: number;
  records: number;
  bytes: number;
  /** Publish time of the oldest of them (null when there is none): the age limit runs from it. */
  oldestTimeUs: number | null;
  /** The limits that close them: a partition's open segment closes at this age or size. */
  segmentAgeUs: number;
  segmentBytesMax: number;
};

/** What `seal` closed: segments, and the records and bytes that were open when it was asked. */
export type SealResult = { segmentsClosed: number; records: number; bytes: number };

/** What a `retain` removed: closed segments, a split's subtree stores, and their bytes. */
export type RetainResult = { segmentsRemoved: number; storesRemoved: number; bytesRemoved: number };

/** The durable log. Create with `Store.open`. */
export class Store {
  private readonly writer: JournalWriter;
  private readonly sorter: Sorter;
  /** Callers of whenCaughtUp() waiting for the backlog to fall under its bound. */
  private catchUpWaiters: (() => void)[] = [];

  /** Id ranges reserveIds handed out in this process and no switch has used yet. */
  private reserved: { first: number; end: number }[] = [];

  /** The context's journal state: the seq getters below read it once per call, as before. */
  private readonly journal: JournalState;

  private constructor(private readonly context: StoreContext) {
    this.journal = context.journal;
    this.writer = new JournalWriter(context);
    this.sorter = new Sorter(context, this.writer);
    this.writer.onFlushed = () => this.sorter.poke();
    this.sorter.onProgress = () => this.wakeCaughtUp();
    this.writer.onFailed = () => {
      this.wakeCaughtUp();
      this.announce();
    };
    this.writer.onStalled = () => this.announce();
    this.sorter.onStalled = () => {
      // Stalled, the sorter no longer holds publishers back: they are refused (append) instead.
      this.wakeCaughtUp();
      this.announce();
    };
    // Drained journals whose deletion waited for a read count until deleted; once they are, the
    // sorter may find more to do (publishers may be paused: no flush pokes it).
    context.reads.afterDeferred = () => {
      this.sorter.poke();
      this.wakeCaughtUp();
    };
  }

  /** Opens (recovering) the store in `disk`; fails with ARIA_ERR_STORE_CORRUPT on unrepaired damage. */
  static async open(
    disk: Disk,
    options: StoreOptions = {},
  ): Promise<{ store: Store; recovery: RecoveryReport }> {
    const context = new StoreContext(disk, resolveOptions(options));
    const recovery = await recover(context);
    return { store: new Store(context), recovery };
  }

  /** The seq the next append must carry. */
  get nextSeq(): number {
    return this.journal.nextSeq;
  }

  /** The last seq durable under the policy (acknowledgeable). */
  get committedSeq(): number {
    return this.journal.committedSeq;
  }

  /** Bytes appended and not yet written: stop reading publishers when this grows. */
  get bufferedBytes(): number {
    return this.writer.bufferedBytes;
  }

  /**
   * True while the sorter is behind by more than STORE_BACKLOG_FACTOR times its budgets (journal
   * bytes kept for unsorted records, or unsorted records): appends should stop until
   * `whenCaughtUp()` resolves, or journals and memory grow without bound. False once the store
   * has failed or closed (nothing more will be sorted; appends fail on their own), and while the
   * sorter is stalled on a full disk (appends are refused then: see append).
   */
  get backlogged(): boolean {
    const context = this.context;
    if (context.failure !== null || context.closed || this.sorter.stalled !== null) return false;
    return this.overBudget();
  }

  /** Whether the sealed journals' bytes or the unsorted records exceed STORE_BACKLOG_FACTOR times their budget. */
  private overBudget(): boolean {
    const options = this.context.options;
    // Sealed journals only: the sorter never drains the active one by its bytes, so a large
    // `journalBytesMax` could otherwise hold the store backlogged for ever.
    const { sealedBytes, pendingRecords } = this.context.journal.totals();
    return (
      sealedBytes > STORE_BACKLOG_FACTOR * options.journalRetainedBytesMax ||
      pendingRecords > STORE_BACKLOG_FACTOR * options.pendingRecordsMax
    );
  }

  /** Resolves once the store is not `backlogged` (at once when it is not now). */
  whenCaughtUp(): Promise<void> {
    if (!this.backlogged) return Promise.resolve();
    this.sorter.poke();
    return new Promise((resolve) => this.catchUpWaiters.push(resolve));
  }

  /**
   * Every seq below this is gone (retention removed it): the oldest seq a closed file or a
   * partition's pending records hold, or `nextSeq` when nothing is held. Not the oldest journal's
   * first seq: its records up to a partition's sorted-through seq are no longer read from it
   * (recovery skips them too), and retention may have removed the files that held them. The broker
   * gives back the ids of topics with no record from here on (topic/topic_table.ts). O(partitions),
   * recomputed only once the layout changed (a file closed or removed: the only ways a held seq
   * goes; an append adds seqs >= nextSeq, at or above the value cached).
   */
  get firstSeqHeld(): number {
    const version = this.context.partitions.layout.version;
    const held = this.held;
    if (held.version === version) return held.seq;
    let first = this.journal.nextSeq;
    for (const log of this.context.partitions.list) {
      if (log.segments.length > 0) first = Math.min(first, log.segments[0].firstSeq);
      for (const store of log.subtreeStores) first = Math.min(first, store.firstSeq);
      if (log.pendingCount > 0) first = Math.min(first, log.pendingSeq(log.pendingHead));
    }
    this.held = { version, seq: first };
    return first;
  }
  private held = { version: -1, seq: 0 };

  private wakeCaughtUp(): void {
    if (this.catchUpWaiters.length === 0 || this.backlogged) return;
    const waiters = this.catchUpWaiters;
    this.catchUpWaiters = [];
    for (const wake of waiters) wake();
  }

  /** The newest publish time appended or recovered (0 when empty). */
  get newestTimeUs(): number {
    return this.journal.newestTimeUs;
  }

  /** The failure that stopped the store, or null. */
  get failure(): StoreError | null {
    return this.context.failure;
  }

  /**
   * Called when the store stops being able to write (with why: a stall it retries, or a failure
   * for good) and when it can write again (null). Each change once: the server logs them. One
   * part stalling while another already is (the sorter behind the journal) changes nothing.
   */
  onWritableChanged: (reason: StoreError | null) => void = () => {};
  private announced: StoreError | null = null;
  /** Why retention's last manifest append found no room (null: it did, or none failed so). */
  private retentionStall: StoreError | null = null;

  private announce(): void {
    const reason = this.unwritable;
    const failure = this.context.failure;
    // Once a failure is announced nothing changes any more; a stall for another while one is
    // announced is the same state.
    if (this.announced !== null && this.announced === failure) return;
    if ((reason === null) === (this.announced === null) && reason !== failure) return;
    this.announced = reason;
    this.onWritableChanged(reason);
  }

  /**
   * Why the store cannot write now — a full disk it retries (the journal's, the sorter's, or
   * retention's manifest append), or a failure for good — or null.
   */
  get unwritable(): StoreError | null {
    return (
      this.context.failure ?? this.writer.stalled ?? this.sorter.stalled ?? this.retentionStall
    );
  }

  /**
   * True while some write is refused for lack of space and retries run (see unwritable): a
   * refused append is then to be tried again later, not a reason to stop.
   */
  get retrying(): boolean {
    return this.context.failure === null && this.unwritable !== null;
  }

  /** Retries a stalled journal now (the retries run by themselves with `schedule`); true once written again. */
  retryWrites(): Promise<boolean> {
    return this.writer.retry();
  }

  /** A shutdown: a journal that cannot be written fails the store now instead of retrying; the sorter stops retrying. */
  stopRetrying(): void {
    this.writer.stopRetrying();
    this.sorter.stopRetrying();
  }

  /**
   * Why appends are refused now, or null: the store failed or closed, or the sorter is stalled on
   * a full disk and the journal past the backlog bound (it keeps what it cannot sort up to there,
   * where publishers would otherwise wait for it). A caller checks it before a batch, whose
   * appends then all go through however far past the bound it goes: the bound is crossed in the
   * middle of a batch, and a batch is appended whole or not at all.
   */
  get refusal(): StoreError | null {
    const context = this.context;
    if (context.failure !== null) return context.failure;
    if (context.closed) return new StoreError("ARIA_ERR_STORE_CLOSED", "append to a closed store");
    const sortStall = this.sorter.stalled;
    return sortStall !== null && this.overBudget() ? sortStall : null;
  }

  /**
   * Buffers a message (no I/O). `seq` must equal `nextSeq`; `topic` must be a valid topic. The
   * payload is payload[start, start + length) (all of it by default): a publish hands the range
   * of its frame, with no view per message. Throws while the store has failed or is closed, or
   * the journal is stalled (each set between events, so before a batch's first append); the
   * sorter's stall does not make it throw: see `refusal`, checked before each batch. The
   * properties (none by default) are properties[propertiesStart, + propertiesBytes). `topicId`
   * and `partitionId`, when given, are the caller's ids of the topic and its partition, from one
   * table of ids (the broker's TopicTable): the store then finds the topic's entry by them
   * instead of by its name (context.ts, "Topics by id"); ids reused for another topic are fine.
   */
  append(
    seq: number,
    timeUs: number,
    topic: string,
    payload: Uint8Array,
    start = 0,
    length = payload.length - start,
    properties: Uint8Array | null = null,
    propertiesStart = 0,
    propertiesBytes = 0,
    topicId = -1,
    partitionId = -1,
  ): void {
    this.writer.append(
      seq,
      timeUs,
      topic,
      payload,
      start,
      length,
      properties,
      propertiesStart,
      propertiesBytes,
      topicId,
      partitionId,
    );
  }

  /**
   * Makes an EMPTY store (nothing ever appended: next seq 1, no file, no journal record) begin at
   * `seq`: its next append carries `seq`, and every seq below it is gone, as if retention had
   * removed it (a replica starting at its leader's oldest held seq, src/replica/follower.ts).
   * Durable when it resolves, through the journal header's first seq, which every build already
   * reads as the store's next seq: the empty journal is retired, then a journal starting at
   * `seq` is created (header fsynced). A crash between leaves an empty store at seq 1, never a
   * journal that seems to have lost seqs.
   */
  async beginAt(seq: number): Promise<void> {
    const context = this.context;
    const journal = context.journal;
    if (context.closed || context.failure !== null)
      throw new StoreError("ARIA_ERR_STORE_CLOSED", "beginAt on a closed or failed store");
    await this.writer.drain();
    const active = journal.generations[journal.generations.length - 1];
    const empty =
      journal.nextSeq === 1 &&
      journal.generations.length === 1 &&
      active.bytes === JOURNAL_HEADER_BYTES &&
      context.partitions.list.every(
        (log) => log.pendingCount === 0 && log.segments.length + log.subtreeStores.length === 0,
      );
    if (!empty) throw new StoreError("ARIA_ERR_STORE_IO", "beginAt: the store is not empty");
    if (!Number.isSafeInteger(seq) || seq < 1)
      throw new StoreError("ARIA_ERR_STORE_IO", `beginAt: bad seq ${seq}`);
    if (seq === 1) return;
    // Listed until its successor is: the active journal is never missing (nothing is appended
    // meanwhile: the caller waits for this).
    await sealJournalFile(context, active);
    await retireJournalFile(context, active);
    await startJournal(context, active.gen + 1, seq, false);
    journal.generations.shift();
    journal.nextSeq = seq;
    journal.writtenSeq = journal.syncedSeq = journal.committedSeq = seq - 1;
    this.held = { version: -1, seq: 0 };
  }

  /** Resolves once every message appended so far is durable under the policy (group commit). */
  commit(): Promise<void> {
    return this.writer.commit();
  }

  /** Fsyncs the journal now (the `interval` timer calls this; harmless under any policy). */
  sync(): Promise<void> {
    return this.writer.sync();
  }

  /** A reader of `filter`'s messages from `from`, in seq order. */
  read(filter: Filter, from: ReadFrom, options: ReadOptions = {}): StoreReader {
    return new StoreReader(this.context, filter, from, options);
  }

  /**
   * The newest messages of the whole stream, oldest first, whose sizes by `bytesOf` sum to at
   * most `maxBytes`: what refills the tip ring after a restart. They are one run of contiguous
   * seqs ending just before `nextSeq`, as the ring holds them and the broker appends next: where
   * the stored stream has a hole (retention removed a small partition's recent file; a repair
   * lost seqs) or ends before `nextSeq` (seqs a repair skipped), only what follows it.
   */
  async readNewest(
    maxBytes: number,
    options: { bytesOf?: (message: StoredMessage) => number } = {},
  ): Promise<StoredMessage[]> {
    const bytesOf =
      options.bytesOf ??
      ((m: StoredMessage) => STORE_RECORD_HEADER_BYTES + m.topic.length + m.payload.length);
    // Start where at least `target` record bytes follow; when `bytesOf` counts less than record
    // bytes the window may not fill: start earlier and read again.
    for (let target = maxBytes; ; target *= 2) {
      const startSeq = this.newestStart(target);
      const window: StoredMessage[] = [];
      let head = 0;
      let bytes = 0;
      let dropped = false;
      const reader = this.read(Filter.of("**"), { seq: startSeq });
      for (;;) {
        const batch = await reader.nextBatch();
        if (batch.length === 0) break;
        for (const message of batch) {
          window.push(message);
          bytes += bytesOf(message);
          while (bytes > maxBytes && head < window.length) {
            bytes -= bytesOf(window[head++]);
            dropped = true;
          }
        }
        if (head > 4096) {
          window.splice(0, head);
          head = 0;
        }
      }
      if (dropped || startSeq <= 1) return runBefore(window.slice(head), this.nextSeq);
    }
  }

  /** A seq from which at least `maxBytes` of records follow (whole segments and journal records). */
  private newestStart(maxBytes: number): number {
    const units: { seq: number; bytes: number }[] = [];
    for (const log of this.context.partitions.list) {
      for (const segment of log.segments)
        units.push({ seq: segment.firstSeq, bytes: segment.bytes });
      for (const subtree of log.subtreeStores)
        units.push({ seq: subtree.firstSeq, bytes: subtree.bytes });
      for (let i = log.pendingHead; i < log.pendingTail; i++)
        units.push({ seq: log.pendingSeq(i), bytes: log.pendingLength(i) });
    }
    units.sort((a, b) => b.seq - a.seq);
    let total = 0;
    for (const unit of units) {
      total += unit.bytes;
      if (total >= maxBytes) return unit.seq;
    }
    return 1;
  }

  /** Lets time-based work happen: segments older than the age limit close (call every second or so). */
  maintain(nowUs: number): void {
    this.sorter.poke(nowUs);
  }

  /** Sorts every journal record into segments and waits (a clean shutdown does this). */
  async sortAll(): Promise<void> {
    await this.writer.drain();
    await this.sorter.sortAll();
  }

  /** The records of the journal that no closed segment holds yet (what `seal` would close). */
  openData(): OpenData {
    const context = this.context;
    const open: OpenData = {
      partitions: 0,
      records: 0,
      bytes: 0,
      oldestTimeUs: null,
      segmentAgeUs: context.options.segmentAgeUsMax,
      segmentBytesMax: context.options.segmentBytesMax,
    };
    for (const log of context.partitions.list) {
      if (log.pendingCount === 0) continue;
      open.partitions++;
      open.records += log.pendingCount;
      open.bytes += log.pendingBytes;
      const oldest = log.pendingTime(log.pendingHead);
      if (open.oldestTimeUs === null || oldest < open.oldestTimeUs) open.oldestTimeUs = oldest;
    }
    return open;
  }

  /**
   * Closes the open segments now (`aria split --seal`): every record appended before the call is
   * committed, then sorted into segments as a clean close sorts them, and the call resolves once
   * they are in force. Appends go on meanwhile; those made after the call may stay open. A
   * failed sort fails the store, as the background sorter's does.
   */
  async seal(): Promise<SealResult> {
    const context = this.context;
    if (context.closed || context.failure !== null)
      throw new StoreError("ARIA_ERR_STORE_CLOSED", "seal on a closed or failed store");
    const open = this.openData();
    if (open.records === 0) return { segmentsClosed: 0, records: 0, bytes: 0 };
    const through = context.journal.nextSeq - 1;
    // Counted from here: the background sorter may close some of them (a size trigger) first.
    const written = this.sorter.segmentsWritten;
    await this.writer.commit();
    try {
      await this.sorter.sortThrough(through);
    } catch (error) {
      // No room for a pack or its manifest append: nothing of the failed batch is in force, and
      // the sorter retries in the background; the caller may seal again later.
      if (isOutOfSpace(error) && context.failure === null) {
        this.sorter.stallOn(error);
        throw this.sorter.stalled ?? error;
      }
      this.writer.fail(error);
      throw error;
    }
    return {
      segmentsClosed: this.sorter.segmentsWritten - written,
      records: open.records,
      bytes: open.bytes,
    };
  }

  /** Waits until background segment closing is done (tests, benchmarks). */
  async idle(): Promise<void> {
    await this.writer.drain();
    await this.sorter.idle();
  }

  /**
   * Removes whole closed files — segments and a split's subtree stores — whose newest message is
   * older than `ageUs` before `nowUs`, then the oldest (by last seq) until at most `bytes` remain.
   * When the manifest has no room for the removal (a full disk) nothing is removed: the store is
   * `unwritable` (said once through onWritableChanged, not at every call) until a call goes through.
   */
  async retain(limits: { ageUs?: number; bytes?: number }, nowUs: number): Promise<RetainResult> {
    const context = this.context;
    if (context.closed || context.failure !== null)
      throw new StoreError("ARIA_ERR_STORE_CLOSED", "retention on a closed or failed store");
    const paths: string[] = [];
    // Chosen, removed from the manifest and from the partitions under the manifest's lock: a
    // split's switch (or another retention) between the choice and the removal could otherwise
    // remove a victim first, and its pack would then be released twice and deleted while other
    // segments in it are in force.
    const result = await context.manifest.locked(() => this.retainLocked(limits, nowUs, paths));
    await removeReleased(context, paths);
    return result;
  }

  private endRetentionStall(): void {
    if (this.retentionStall === null) return;
    this.retentionStall = null;
    this.announce();
  }

  private async retainLocked(
    limits: { ageUs?: number; bytes?: number },
    nowUs: number,
    paths: string[],
  ): Promise<RetainResult> {
    const context = this.context;
    const all: (SegmentMeta | SubtreeStoreMeta)[] = [];
    let total = 0;
    for (const log of context.partitions.list) all.push(...log.segments, ...log.subtreeStores);
    for (const file of all) total += file.bytes;
    all.sort((a, b) => a.lastSeq - b.lastSeq);
    const victims: typeof all = [];
    const ageLimit = limits.ageUs === undefined ? -Infinity : nowUs - limits.ageUs;
    const bytesLimit = limits.bytes ?? Infinity;
    for (const file of all) {
      if (file.lastTimeUs >= ageLimit && total <= bytesLimit) break;
      victims.push(file);
      total -= file.bytes;
    }
    if (victims.length === 0) {
      // Nothing waits to be recorded any more: a stall of an earlier call is over.
      this.endRetentionStall();
      return { segmentsRemoved: 0, storesRemoved: 0, bytesRemoved: 0 };
    }
    const segments = victims.filter((file) => !isSubtreeStore(file));
    const subtrees = victims.filter(isSubtreeStore);
    // Stores go by a SWAP that adds nothing (a split's switch in reverse); segments by REMOVE.
    const records: ManifestRecord[] = segments.map((segment) => ({
      kind: MANIFEST_REMOVE,
      id: segment.id,
    }));
    if (subtrees.length > 0)
      records.push({
        kind: MANIFEST_SWAP,
        removed: subtrees.map((subtree) => subtree.id),
        added: [],
      });
    try {
      await appendManifestLocked(context, records);
    } catch (error) {
      if (isOutOfSpace(error)) {
        // Cut back (manifest.ts): nothing is removed, and the next call tries again.
        const reason = error instanceof Error ? error.message : String(error);
        this.retentionStall = new StoreError(
          "ARIA_ERR_STORE_IO",
          `The store cannot write its manifest (${reason}); retention retries by itself`,
        );
        this.announce();
        return { segmentsRemoved: 0, storesRemoved: 0, bytesRemoved: 0 };
      }
      // Otherwise the records may still reach the disk (a failed fsync), and the manifest's
      // length here no longer says where its records end: only the next open can tell, so the
      // store stops here, as after a failed append of the sorter or of a switch.
      this.writer.fail(error);
      throw error;
    }
    this.endRetentionStall();
    let bytesRemoved = 0;
    for (const file of victims) {
      const log = context.partitions.log(file.partition);
      if (isSubtreeStore(file)) log.swap(new Set([file.id]), []);
      else log.removeSegment(file.id);
      // What the directory holds of each topic loses what the file held.
      context.inForce.uncount(file.id);
      context.reads.indexes.delete(file.id);
      paths.push(...context.inForce.release(file));
      bytesRemoved += file.bytes;
    }
    return { segmentsRemoved: segments.length, storesRemoved: subtrees.length, bytesRemoved };
  }

  /** Every partition's closed segments and subtree stores (copies), partitions in creation order. */
  layout(): PartitionLayout[] {
    return this.context.partitions.list
      .filter((log) => log.segments.length + log.subtreeStores.length > 0)
      .map((log) => ({
        partition: log.name,
        segments: [...log.segments],
        stores: [...log.subtreeStores],
      }));
  }

  /** Reserves `count` file ids for a split's new subtree stores; returns the first. */
  reserveIds(count: number): number {
    const first = this.context.inForce.nextSegmentId;
    this.context.inForce.nextSegmentId += count;
    this.reserved.push({ first, end: first + count });
    return first;
  }

  /**
   * The split's one switch: checks `swap` against the layout in force and the new files on disk,
   * appends one SWAP record to the manifest and syncs it (in force from here, whole or not at
   * all after a crash), updates the partitions (readers seek again by seq), then removes the
   * replaced files once no read is in flight. Rejects, changing nothing, when the swap does not fit.
   */
  async switchLayout(swap: LayoutSwap): Promise<void> {
    const context = this.context;
    if (context.closed || context.failure !== null)
      throw new StoreError("ARIA_ERR_STORE_CLOSED", "switch on a closed or failed store");
    const replaced: string[] = [];
    await context.manifest.locked(async () => {
      const problem =
        (await this.swapProblem(swap)) ?? detailsProblem(swap.split) ?? topicsProblem(swap);
      if (problem !== null)
        throw new StoreError(
          "ARIA_ERR_STORE_FAILED",
          `Cannot switch to the split layout: ${problem}`,
        );
      const stored = splitOfSubtreeStores(swap.added);
      const split =
        stored === null
          ? null
          : { ...stored, ...(swap.split === undefined ? {} : pickDetails(swap.split)) };
      // The SPLIT record after the SWAP, in one append: torn off by a crash, the SWAP still says
      // which subtree stores the split wrote (manifest.ts).
      // The new subtree stores' counts before the SWAP that puts them in force (counts of files
      // not in force are never used, so a tail torn after them changes nothing).
      const counted = new Map(
        (swap.topics ?? []).map((entry) => [
          entry.id,
          entry.topics.map((count) => ({
            topic: count.topic,
            messages: count.messages,
            bytes: count.bytes,
          })),
        ]),
      );
      const records: ManifestRecord[] = [...counted].map(([id, topics]) => ({
        kind: MANIFEST_TOPICS,
        id,
        topics,
      }));
      records.push({ kind: MANIFEST_SWAP, removed: swap.removed, added: swap.added });
      if (split !== null) records.push({ kind: MANIFEST_SPLIT, split });
      try {
        await appendManifestLocked(context, records);
      } catch (error) {
        // Out of space, the append was cut back (manifest.ts): the switch did not happen, and
        // the split may try it again. Otherwise the SWAP record may still reach the disk (a
        // failed fsync, like the sorter's): only the next open can tell which layout is in force,
        // so the store stops here.
        if (!isOutOfSpace(error)) this.writer.fail(error);
        throw error;
      }
      const removed = new Set(swap.removed);
      const partitions = new Set([...swap.added.map((subtree) => subtree.partition)]);
      for (const log of context.partitions.list) {
        for (const file of [...log.segments, ...log.subtreeStores])
          if (removed.has(file.id)) {
            partitions.add(log.name);
            replaced.push(...context.inForce.release(file));
          }
      }
      for (const name of partitions)
        context.partitions.log(name).swap(
          removed,
          swap.added.filter((subtree) => subtree.partition === name),
        );
      for (const id of removed) {
        context.reads.indexes.delete(id);
        context.inForce.uncount(id);
      }
      for (const subtree of swap.added) {
        const topics = counted.get(subtree.id);
        if (topics === undefined) context.inForce.uncounted.add(subtree.id);
        else context.inForce.count(subtree.id, topics, true);
      }
      if (split !== null) context.manifest.lastSplit = split;
      // A reservation serves one switch.
      this.reserved = this.reserved.filter(
        (range) => !swap.added.some((subtree) => inRange(range, subtree.id)),
      );
    });
    // The switch is in force: a replaced file that cannot be removed now is never a reason to
    // report it as failed (the split would then remove the new files in force).
    await removeReleased(context, replaced);
  }

  /**
   * Null when `swap` replaces, per partition, all its subtree stores and its oldest segments by
   * subtree stores holding the same records.
   */
  private async swapProblem(swap: LayoutSwap): Promise<string | null> {
    const context = this.context;
    const removed = new Set(swap.removed);
    if (removed.size !== swap.removed.length) return "an id is removed twice";
    const records = new Map<string, number>();
    let found = 0;
    for (const log of context.partitions.list) {
      let prefix = true;
      let count = 0;
      for (const subtree of log.subtreeStores) {
        if (removed.has(subtree.id)) {
          found++;
          count += subtree.records;
        } else if (log.subtreeStores.some((other) => removed.has(other.id))) {
          return `partition "${log.name}": store ${subtree.id} is neither kept whole nor replaced with its siblings`;
        }
      }
      for (const segment of log.segments) {
        if (!removed.has(segment.id)) prefix = false;
        else if (!prefix)
          return `partition "${log.name}": segment ${segment.id} is not among the oldest`;
        else {
          found++;
          count += segment.records;
        }
      }
      if (count > 0) records.set(log.name, count);
    }
    if (found !== removed.size)
      return `${removed.size - found} replaced file(s) are no longer in force (retention or another split)`;
    for (const subtree of swap.added)
      records.set(subtree.partition, (records.get(subtree.partition) ?? 0) - subtree.records);
    for (const [partition, difference] of records) {
      if (difference !== 0)
        return `partition "${partition}": the new stores hold ${-difference} records more than the files they replace`;
    }
    const ids = new Set<number>();
    for (const subtree of swap.added) {
      // Reserved from this store, in this process: ids reserved from a server since restarted
      // are the new one's to give to its own segments and packs.
      if (!this.reserved.some((range) => inRange(range, subtree.id)))
        return `store id ${subtree.id} was never reserved (by this server since it started)`;
      if (ids.has(subtree.id)) return `store id ${subtree.id} is added twice`;
      ids.add(subtree.id);
      const head = await context.files
        .with(subtreeStorePath(subtree.id), (file) => readSubtreeStoreHead(file, context.crc32))
        .catch((error: Error) => error.message);
      if (typeof head === "string") return `store file ${subtreeStorePath(subtree.id)}: ${head}`;
      if (
        head.partition !== subtree.partition ||
        head.topics.length !== subtree.topics.length ||
        head.dataStart !== subtree.dataStart
      ) {
        return `store file ${subtreeStorePath(subtree.id)} does not match its entry`;
      }
      if (
        !(await context.disk.list(SEGMENT_DIR)).includes(
          indexPath(subtree.id).slice(SEGMENT_DIR.length + 1),
        )
      )
        return `index of store ${subtree.id} is missing`;
    }
    return null;
  }

  /**
   * What the data directory holds of each topic: the journal's records and the closed files', as
   * TOPICS records in the manifest keep them (no file is read); retention and a split's switch
   * subtract what they remove. Files without counts (closed by an earlier build) are left out
   * until `countFiles` has measured them. Topics with nothing left are not listed.
   */
  topicVolumes(): TopicVolume[] {
    const rows: TopicVolume[] = [];
    for (const [topic, held] of this.context.partitions.topicsHeld()) {
      if (held.messages > 0)
        rows.push({
          topic,
          messages: held.messages,
          recordBytes: held.bytes,
          payloadBytes: held.bytes - held.messages * (STORE_RECORD_HEADER_BYTES + topic.length),
        });
    }
    return rows;
  }

  /** Closed files whose per-topic counts are not known yet (closed by an earlier build): `countFiles` measures them. */
  get uncountedFiles(): number {
    return this.context.inForce.uncounted.size;
  }

  /**
   * Measures the closed files without per-topic counts (once per directory of an earlier build,
   * or after a manifest rebuilt from files), a file at a time, every record checked, and records
   * each file's counts in the manifest, so that no later open reads them. Meant to run in the
   * background after open; removals wait for the file being read, as for any read. Resolves
   * with the number of files counted; stops early when the store closes.
   */
  async countFiles(): Promise<number> {
    const context = this.context;
    let counted = 0;
    for (const id of [...context.inForce.uncounted]) {
      if (context.closed || context.failure !== null) break;
      const file = this.fileInForce(id);
      if (file === undefined) continue;
      const topics = await this.measureFile(file);
      if (topics === null) continue;
      const recorded = await context.manifest.locked(async () => {
        // Retention or a switch may have removed it meanwhile: then its counts mean nothing.
        if (!context.inForce.uncounted.has(id) || context.closed || context.failure !== null)
          return false;
        try {
          await appendManifestLocked(context, [{ kind: MANIFEST_TOPICS, id, topics }]);
        } catch (error) {
          // Out of space, the append was cut back: the file stays uncounted (the next call or
          // open counts it). Otherwise only the next open can tell where the manifest ends.
          if (!isOutOfSpace(error)) this.writer.fail(error);
          throw error;
        }
        context.inForce.count(id, topics, true);
        return true;
      });
      if (recorded) counted++;
    }
    return counted;
  }

  private fileInForce(id: number): SegmentMeta | SubtreeStoreMeta | undefined {
    for (const log of this.context.partitions.list) {
      const file =
        log.segments.find((segment) => segment.id === id) ??
        log.subtreeStores.find((subtree) => subtree.id === id);
      if (file !== undefined) return file;
    }
    return undefined;
  }

  /** The per-topic counts of `file`'s records, read as a read batch is (removals wait); null when it went meanwhile. */
  private async measureFile(file: SegmentMeta | SubtreeStoreMeta): Promise<TopicCount[] | null> {
    const context = this.context;
    context.reads.inFlight++;
    try {
      if (!context.inForce.uncounted.has(file.id)) return null;
      const span = recordSpanOf(file);
      const topics = new Map<string, TopicCount>();
      let lastTopic = "";
      let last: TopicCount = { topic: "", messages: 0, bytes: 0 };
      const scan = await context.files.with(span.path, (handle) =>
        scanRecords(
          handle,
          span.dataStart,
          context.crc32,
          (bytes, view, at, length) => {
            if (!recordTopicEquals(bytes, view, at, lastTopic)) {
              lastTopic = recordTopic(bytes, view, at);
              last = topics.get(lastTopic) ?? { topic: lastTopic, messages: 0, bytes: 0 };
              topics.set(lastTopic, last);
            }
            last.messages++;
            last.bytes += length;
            return undefined;
          },
          { end: span.end },
        ),
      );
      if (scan.problem !== null || scan.end !== span.end)
        throw new StoreError(
          "ARIA_ERR_STORE_CORRUPT",
          `Cannot count the topics of "${span.path}": ${scan.problem ?? "the file ends early"} at offset ${scan.end}`,
        );
      context.reads.bytesRead += span.end - span.dataStart;
      return [...topics.values()];
    } finally {
      await context.reads.done();
    }
  }

  /** What the last split did, as the data directory records it (null: no split has switched). */
  lastSplit(): SplitSummary | null {
    return this.context.manifest.lastSplit;
  }

  /** Counts and sizes. */
  stats(): StoreStats {
    const context = this.context;
    let segments = 0;
    let segmentBytes = 0;
    let pendingRecords = 0;
    let pendingBytes = 0;
    let subtrees = 0;
    let storeBytes = 0;
    for (const log of context.partitions.list) {
      subtrees += log.subtreeStores.length;
      storeBytes += log.storeBytes();
      segments += log.segments.length;
      segmentBytes += log.segmentBytes();
      pendingRecords += log.pendingCount;
      pendingBytes += log.pendingBytes;
    }
    const journalBytes = context.journal.totals().bytes;
    return {
      nextSeq: context.journal.nextSeq,
      committedSeq: context.journal.committedSeq,
      partitions: context.partitions.list.length,
      journals: context.journal.generations.length,
      journalBytes,
      spareJournalBytes:
        context.journal.spares.reduce((sum, spare) => sum + spare.bytes, 0) +
        this.writer.spareFiller.fillingBytes,
      segments,
      segmentBytes,
      pendingRecords,
      pendingBytes,
      segmentsWritten: this.sorter.segmentsWritten,
      manifestBytes: context.manifest.bytes,
      openFiles: context.files.size,
      fileOpens: context.files.opens,
      stores: subtrees,
      storeBytes,
      bytesRead: context.reads.bytesRead,
      unwritable: this.unwritable?.message ?? null,
    };
  }

  /** Writes what is buffered, optionally sorts the journal into segments, and closes every file. */
  async close(options: { sort?: boolean } = {}): Promise<void> {
    const context = this.context;
    if (context.closed) return;
    this.stopRetrying();
    if (context.failure === null) {
      await this.writer.drain();
      await this.sorter.idle();
      await this.writer.sync().catch(() => {});
      // No room to sort (a full disk): the journal keeps the records, and the next open replays them.
      const sorted =
        (options.sort ?? true) &&
        (await this.sorter.sortAll().then(
          () => true,
          (error) => {
            if (isOutOfSpace(error) && context.failure === null) return false;
            throw error;
          },
        ));
      if (sorted) {
        // Everything is in segments: start an empty journal so the next open replays nothing.
        const active = context.journal.generations[context.journal.generations.length - 1];
        if (active.pendingRecords === 0 && active.bytes > JOURNAL_HEADER_BYTES) {
          // Sealed first, as a roll seals the journal before the next one has its name: once it is
          // not the newest, recovery takes bytes after its records (a write's page padding, a
          // recycled file's older records) for damage, and it is there until its retirement below
          // is on disk (a kill or a power loss before that left a store that would not open).
          await sealJournalFile(context, active);
          // A new file, not a spare: it stays empty, and the next open starts a generation of its
          // own. No room for it (or for its manifest record): the sealed journal stays the newest,
          // drained, and the next open starts after it.
          try {
            await startJournal(context, active.gen + 1, context.journal.nextSeq, false);
            await context.reads.whenNoReads(() => dropDrainedJournals(context));
          } catch (error) {
            if (!isOutOfSpace(error)) throw error;
          }
        }
      }
      // A recycled newest journal ends with an older generation's bytes: a clean close cuts them,
      // so the next open finds no tail to cut (should this fail, that open cuts them instead).
      const newest = context.journal.generations[context.journal.generations.length - 1];
      if (newest.created) await sealJournalFile(context, newest).catch(() => {});
    }
    await this.writer.spareFiller.stop();
    context.closed = true;
    this.wakeCaughtUp();
    await Promise.all(context.reads.prefetches);
    // Read batches in flight finish before their files close (no new one starts: the store is
    // closed); closing under them failed them with EBADF.
    await new Promise<void>((resolve) => void context.reads.whenNoReads(async () => resolve()));
    await context.manifest.locked(async () => {
      await context.manifest.file?.close();
      context.manifest.file = null;
    });
    await context.files.closeAll();
  }
}

/**
 * Removes files the manifest no longer holds, once no read is in flight. The change is in force
 * already: a file that cannot be removed now is an orphan the next open removes, not a failure
 * of the retention or switch that released it.
 */
function removeReleased(context: StoreContext, paths: readonly string[]): Promise<void> {
  return context.reads.whenNoReads(async () => {
    try {
      for (const path of paths) {
        await context.files.drop(path);
        await context.disk.remove(path);
      }
      await context.disk.syncDir(SEGMENT_DIR);
    } catch {
      // left to the next open
    }
  });
}

/** Null when `details` (which may come over HTTP) can be recorded: integers where the codec writes u64s. */
function detailsProblem(details: SplitDetails | undefined): string | null {
  if (details === undefined) return null;
  const count = (value: unknown) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
  if (details.finishedUs !== null && !count(details.finishedUs))
    return "split.finishedUs is not a time";
  if (details.durationUs !== null && !count(details.durationUs))
    return "split.durationUs is not a duration";
  if (
    details.algorithm !== null &&
    details.algorithm !== "heuristic" &&
    details.algorithm !== "adaptive"
  )
    return "split.algorithm is not heuristic or adaptive";
  const plan = details.plan;
  if (
    plan !== null &&
    (typeof plan !== "object" ||
      !count(plan.stores) ||
      plan.stores === 0 ||
      typeof plan.wastedBytesTotal !== "number" ||
      typeof plan.worstRatio !== "number")
  ) {
    return "split.plan is not {stores, wastedBytesTotal, worstRatio}";
  }
  return null;
}

/**
 * Null when the per-topic counts of `swap` (which may come over HTTP) add up: one entry per new
 * subtree store at most, its topics among the subtree store's, messages summing to its records
 * and record bytes to its records' bytes.
 */
function topicsProblem(swap: LayoutSwap): string | null {
  if (swap.topics === undefined) return null;
  if (!Array.isArray(swap.topics)) return "topics is not a list";
  const subtrees = new Map(swap.added.map((subtree) => [subtree.id, subtree]));
  const seen = new Set<number>();
  const count = (value: unknown) =>
    typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
  for (const entry of swap.topics) {
    const subtree = subtrees.get(entry?.id);
    if (subtree === undefined || seen.has(subtree.id) || !Array.isArray(entry.topics))
      return `topics: entry for id ${entry?.id} is not one per new store`;
    seen.add(subtree.id);
    const held = new Set(subtree.topics);
    let messages = 0;
    let bytes = 0;
    for (const topic of entry.topics) {
      if (
        typeof topic?.topic !== "string" ||
        !held.has(topic.topic) ||
        !count(topic.messages) ||
        !count(topic.bytes)
      )
        return `topics of store ${subtree.id}: not its topics with counts`;
      messages += topic.messages;
      bytes += topic.bytes;
    }
    if (messages !== subtree.records || bytes !== subtree.bytes - subtree.dataStart)
      return `topics of store ${subtree.id}: ${messages} messages of ${bytes} bytes, the store holds ${subtree.records} of ${subtree.bytes - subtree.dataStart}`;
  }
  return null;
}

/** The fields of `details` (a body over HTTP may carry more). */
function pickDetails(details: SplitDetails): SplitDetails {
  const plan =
    details.plan === null
      ? null
      : {
          stores: details.plan.stores,
          wastedBytesTotal: details.plan.wastedBytesTotal,
          worstRatio: details.plan.worstRatio,
        };
  return {
    finishedUs: details.finishedUs,
    durationUs: details.durationUs,
    algorithm: details.algorithm,
    plan,
  };
}

/** Whether `id` is one of the range's. */
function inRange(range: { first: number; end: number }, id: number): boolean {
  return id >= range.first && id < range.end;
}

/** The messages of `newest` (ascending seqs) after its last hole, ending just before `nextSeq`. */
function runBefore(newest: StoredMessage[], nextSeq: number): StoredMessage[] {
  let from = newest.length;
  while (
    from > 0 &&
    newest[from - 1].seq === (from < newest.length ? newest[from].seq : nextSeq) - 1
  )
    from--;
  return from === 0 ? newest : newest.slice(from);
}
