/**
 * JournalWriter: the write path. Appends encode records into in-memory chunks (synchronously,
 * no I/O); one flush loop at a time writes every chunk buffered so far to the journal and, under
 * `always`, fsyncs once for all of them — group commit: every append made while a flush runs
 * rides the next one, so 64 publishers or 10,000 partitions cost one fsync per flush.
 *
 *   append ─▶ chunks [gen 7 @ 4096 .. ][gen 7 @ 9000 .. ] ─flush─▶ write ─▶ fsync ─▶ commit waiters
 *
 * A journal rolls at journalBytesMax: the flush that first writes to the next generation stages
 * its file (`<gen>.next`, header written) and goes on writing into it while the sealed journal is
 * fsynced in the background; the staged file gets its journal name only after that, under every
 * policy, so only the newest journal can ever have a torn tail (journal_files.ts). A sync waits
 * for that promotion, so `always` acknowledges nothing in a staged file.
 *
 * A journal write, fsync, roll or seal that fails because the disk is full (ENOSPC, EDQUOT)
 * stalls the writer instead of failing the store: appends are refused with that reason (no seq is
 * taken), commit waiters keep waiting, and a retry runs after 100 ms, doubling to 5 s
 * (STORE_RETRY_MS_MIN/MAX in a RetryBackoff, as the sorter's), until one succeeds. A retry writes
 * every chunk not yet durable again, at its position, before it fsyncs: after a failed fsync the
 * kernel may have dropped those dirty pages and marked them clean, so fsyncing the same file
 * again would prove nothing. Under `always` the chunks of the batch in
 * flight are still in memory (they are recycled only once committed) and a roll's staged file
 * holds nothing acknowledged, so it is staged afresh; under `interval` and `never` what was
 * written before the failed fsync was acknowledged at its write, as those policies say, and is not
 * in memory any more: the retry fsyncs it again (a power loss may lose it, as it may lose an
 * interval). Any other error (EIO, say) fails the store for good (docs/storage.md, a full disk).
 *
 * Invariants: chunks are in seq order and contiguous within a generation; committedSeq only
 * grows; nothing is acknowledged before it is durable under the policy; after a failure that is
 * not a disk error, the store is failed: waiters reject, appends throw.
 */
import {
  JOURNAL_FLUSH_BYTES_MAX,
  JOURNAL_SPARE_BYTES_MAX,
  JOURNAL_WRITE_NOW_BYTES_MAX,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import {
  type JournalInfo,
  type JournalState,
  type Partitions,
  RetryBackoff,
  type StoreContext,
} from "./context.ts";
import { type DiskFile, isOutOfSpace } from "./disk.ts";
import { JOURNAL_HEADER_BYTES } from "./file_header.ts";
import { SyncSlots, promoteJournalFile, stageJournalFile } from "./journal_files.ts";
import { StoreError, journalPath, stagedPath } from "./layout.ts";
import { ViewCache } from "../stdx/bytes.ts";
import { encodeRecord, recordBytes } from "./record.ts";
import { SpareFiller } from "./spare_filler.ts";

const CHUNK_BYTES_INITIAL = 64 * 1024;
/** The page a write should end on (see writeChunk). */
const PAGE_BYTES = 4096;

type Chunk = {
  gen: number;
  position: number;
  bytes: Uint8Array;
  view: DataView;
  length: number;
  lastSeq: number;
};
type Waiter = { seq: number; resolve: () => void; reject: (error: Error) => void };

/** Buffers appends and writes them to the journal with group commit. */
export class JournalWriter {
  private chunks: Chunk[] = [];
  /** Written chunks kept for reuse: fresh memory costs a page fault per 4 KiB on first touch. */
  private spare: Chunk[] = [];
  private spareBytes = 0;
  /** Bytes of the last fresh chunk (the first is CHUNK_BYTES_INITIAL). */
  private freshBytes = CHUNK_BYTES_INITIAL / 2;
  private waiters: Waiter[] = [];
  private flushing: Promise<void> | null = null;
  private syncing: Promise<void> | null = null;
  /** The journal written under its staged name while the one before is sealed, and that seal and rename (null: none in flight). */
  private staged: JournalInfo | null = null;
  private promotion: Promise<void> | null = null;
  /** Zero-fills a spare journal ahead, a piece after each group commit (under `always`). */
  readonly spareFiller: SpareFiller;
  /** The newest journal's synced point, written into its header before each fsync (journal_files.ts). */
  private readonly syncSlots: SyncSlots;
  private syncScheduled = false;
  private plannedBytes: number;
  /** A DataView of the arrays payloads are copied from (one per PUBLISH frame, not per message). */
  private readonly sources = new ViewCache();
  /** Bytes appended but not yet written: the broker's back-pressure signal. */
  bufferedBytes = 0;
  /** Called after each flush (the store checks whether segments should close). */
  onFlushed: () => void = () => {};
  /** Called once the store has failed. */
  onFailed: () => void = () => {};
  /** Called when the journal stalls (with why) and when it is written again (null), once each. */
  onStalled: (reason: StoreError | null) => void = () => {};

  /** Why the journal cannot be written now while retries run (null: it can, or the store failed). */
  private stall: StoreError | null = null;
  /** The waits between retries (STORE_RETRY_MS_MIN doubling to STORE_RETRY_MS_MAX). */
  private readonly backoff = new RetryBackoff();
  private retrying: Promise<boolean> | null = null;
  /** The stall a retry in flight is trying to end (see stalled). */
  private retryingStall: StoreError | null = null;
  /** onStalled said so and the journal has not been written since. */
  private stallAnnounced = false;
  /** Set by stopRetrying (a shutdown): a stall fails the store instead. */
  private retriesStopped = false;
  /** Callers waiting for the stall to end (see whenWritable). */
  private resumeWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];
  /** Under `interval`/`never`: a roll whose seal or rename failed, done again by the retry. */
  private failedPromotion: { previous: JournalInfo; journal: JournalInfo } | null = null;

  /** The context's journal state and partitions, held here so an append reads them in one step. */
  private readonly journals: JournalState;
  private readonly partitions: Partitions;

  constructor(private readonly context: StoreContext) {
    this.journals = context.journal;
    this.partitions = context.partitions;
    this.plannedBytes = this.active().bytes;
    this.spareFiller = new SpareFiller(context);
    this.syncSlots = new SyncSlots(context);
  }

  private active(): JournalInfo {
    const generations = this.journals.generations;
    return generations[generations.length - 1];
  }

  /**
   * Buffers one message, its payload source[payloadStart, payloadStart + payloadBytes) and its
   * properties properties[propertiesStart, + propertiesBytes); `seq` must be the store's next seq.
   * `topicId` and `partitionId` (-1: none), the caller's ids of the topic and its partition, find
   * its entry without hashing its name (context.ts, "Topics by id").
   */
  append(
    seq: number,
    timeUs: number,
    topic: string,
    source: Uint8Array,
    payloadStart: number,
    payloadBytes: number,
    properties: Uint8Array | null = null,
    propertiesStart = 0,
    propertiesBytes = 0,
    topicId = -1,
    partitionId = -1,
  ): void {
    const context = this.context;
    const journals = this.journals;
    if (context.failure !== null) throw context.failure;
    if (this.stall !== null) throw this.stall;
    if (context.closed) throw new StoreError("ARIA_ERR_STORE_CLOSED", "append to a closed store");
    assert(seq === journals.nextSeq, "journal_writer: seqs must be contiguous and increasing");
    const length = recordBytes(topic.length, payloadBytes, propertiesBytes);
    let journal = this.active();
    if (
      this.plannedBytes + length > context.options.journalBytesMax &&
      this.plannedBytes > JOURNAL_HEADER_BYTES
    ) {
      journal = {
        gen: journal.gen + 1,
        path: journalPath(journal.gen + 1),
        firstSeq: seq,
        bytes: JOURNAL_HEADER_BYTES,
        pendingRecords: 0,
        created: false,
      };
      journals.generations.push(journal);
      this.plannedBytes = JOURNAL_HEADER_BYTES;
    }
    const chunk = this.chunkFor(journal.gen, length);
    const position = this.plannedBytes;
    encodeRecord(
      chunk.bytes,
      chunk.view,
      chunk.length,
      seq,
      timeUs,
      topic,
      source,
      this.sources,
      payloadStart,
      payloadBytes,
      context.crc32,
      properties,
      propertiesStart,
      propertiesBytes,
    );
    chunk.length += length;
    chunk.lastSeq = seq;
    this.plannedBytes += length;
    this.bufferedBytes += length;
    const held =
      topicId < 0
        ? this.partitions.topicHeld(topic)
        : this.partitions.topicHeldById(topic, topicId, partitionId);
    held.messages++;
    held.bytes += length;
    const log = held.log;
    log.addPending(seq, timeUs, journal.gen, position, length);
    if (log.pendingBytes >= context.options.segmentBytesMax) this.partitions.oversized.add(log);
    journal.pendingRecords++;
    journals.nextSeq = seq + 1;
    if (timeUs > journals.newestTimeUs) journals.newestTimeUs = timeUs;
    if (this.flushing === null) this.flushing = this.flushLoop();
  }

  /** Resolves when every message appended so far is durable under the policy. */
  commit(): Promise<void> {
    const context = this.context;
    if (context.failure !== null) return Promise.reject(context.failure);
    const seq = context.journal.nextSeq - 1;
    if (seq <= context.journal.committedSeq) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ seq, resolve, reject }));
  }

  /** Why the journal cannot be written for now while it retries (null: it can, or the store failed). */
  get stalled(): StoreError | null {
    // During a retry `stall` is cleared (so that the flush it runs may write): still stalled
    // until that retry has gone through.
    return this.context.failure === null ? (this.stall ?? this.retryingStall) : null;
  }

  /** Fsyncs the journal up to everything written so far; a stall meanwhile is waited out. */
  async sync(): Promise<void> {
    for (;;) {
      if (this.stall !== null) await this.whenWritable();
      try {
        return await this.syncShared();
      } catch (error) {
        if (this.stall === null || this.context.failure !== null) throw error;
      }
    }
  }

  /** Resolves once the journal is not stalled; rejects once the store has failed. */
  whenWritable(): Promise<void> {
    const context = this.context;
    if (context.failure !== null) return Promise.reject(context.failure);
    if (this.stall === null) return Promise.resolve();
    return new Promise((resolve, reject) => this.resumeWaiters.push({ resolve, reject }));
  }

  /** One fsync of everything written so far, shared by its callers; rejects on a stall. */
  private syncShared(): Promise<void> {
    if (this.syncing === null) {
      this.syncing = this.syncOnce().finally(() => {
        this.syncing = null;
      });
    }
    return this.syncing;
  }

  /** Waits until every buffered append is written (and committed under the policy), and every journal has its name. */
  async drain(): Promise<void> {
    for (;;) {
      const pending = this.flushing ?? this.promotion;
      if (pending === null) return;
      await pending;
    }
  }

  private async syncOnce(): Promise<void> {
    const context = this.context;
    if (context.failure !== null) throw context.failure;
    const target = context.journal.writtenSeq;
    if (target <= context.journal.syncedSeq) return;
    // Records written into a staged journal are durable only once it has its name.
    if (this.promotion !== null) await this.promotion;
    if (context.failure !== null) throw context.failure;
    if (this.stall !== null) throw this.stall;
    const journal = this.lastCreated();
    const covered = journal.bytes;
    try {
      await context.files.with(journal.path, async (file) => {
        await file.sync();
        // Claimed before anything it covered is acknowledged (journal_files.ts, SyncSlots).
        await this.syncSlots.synced(file, journal, covered);
      });
    } catch (error) {
      this.stallOrFail(error);
      throw context.failure ?? this.stall;
    }
    if (target > context.journal.syncedSeq) context.journal.syncedSeq = target;
  }

  private lastCreated(): JournalInfo {
    const journals = this.context.journal.generations;
    for (let i = journals.length - 1; i >= 0; i--) if (journals[i].created) return journals[i];
    assert(false, "journal_writer: no journal created");
  }

  private chunkFor(gen: number, length: number): Chunk {
    const last = this.chunks[this.chunks.length - 1];
    if (last !== undefined && last.gen === gen && last.length + length <= last.bytes.length)
      return last;
    // A full chunk is not grown (fresh memory and a copy of it): the next one follows it, a spare
    // if one holds the record, else a fresh one twice the size of the previous fresh one (up to a
    // whole flush), so a burst soon writes in large chunks and the spares then carry it.
    let chunk = this.takeSpare(length);
    if (chunk === undefined) {
      this.freshBytes = Math.min(JOURNAL_FLUSH_BYTES_MAX, this.freshBytes * 2);
      const bytes = new Uint8Array(Math.max(this.freshBytes, length));
      chunk = { gen, position: 0, bytes, view: new DataView(bytes.buffer), length: 0, lastSeq: 0 };
    }
    chunk.gen = gen;
    chunk.position = this.plannedBytes;
    chunk.length = 0;
    this.chunks.push(chunk);
    return chunk;
  }

  /** The largest spare chunk if it holds `length` bytes (taken off the spare list), else undefined. */
  private takeSpare(length: number): Chunk | undefined {
    const spare = this.spare;
    let best = -1;
    for (let i = 0; i < spare.length; i++)
      if (best < 0 || spare[i].bytes.length > spare[best].bytes.length) best = i;
    if (best < 0 || spare[best].bytes.length < length) return undefined;
    const chunk = spare[best];
    spare[best] = spare[spare.length - 1];
    spare.pop();
    this.spareBytes -= chunk.bytes.length;
    return chunk;
  }

  /** Keeps a written chunk for reuse while the spare chunks stay within JOURNAL_SPARE_BYTES_MAX. */
  private keepSpare(chunk: Chunk): void {
    if (this.spareBytes + chunk.bytes.length > JOURNAL_SPARE_BYTES_MAX) return;
    this.spare.push(chunk);
    this.spareBytes += chunk.bytes.length;
  }

  private async flushLoop(): Promise<void> {
    const context = this.context;
    const policy = context.options.fsync;
    let batch: Chunk[] = [];
    try {
      // Started by an append: let the appends already queued behind it (publishers woken by the
      // last commit, the rest of a socket read) join this write and its fsync.
      await Promise.resolve();
      while (this.chunks.length > 0 && context.failure === null && this.stall === null) {
        batch = this.chunks;
        this.chunks = [];
        for (const chunk of batch) {
          if (context.failure !== null) throw context.failure;
          if (this.stall !== null) throw this.stall;
          if (chunk.lastSeq <= context.journal.syncedSeq) {
            // Put back by a stall, and made durable since by a roll's seal that was in flight:
            // its journal may be sealed, and a write now would leave bytes after its records.
            this.bufferedBytes -= chunk.length;
            continue;
          }
          const journal = context.journal.generation(chunk.gen);
          if (!journal.created && journal !== this.staged) await this.stageJournal(journal);
          await context.files.with(journal.path, (file) => writeChunk(file, chunk));
          journal.bytes = chunk.position + chunk.length;
          // A chunk written again after a stall may be older than the last one written.
          if (chunk.lastSeq > context.journal.writtenSeq)
            context.journal.writtenSeq = chunk.lastSeq;
          this.bufferedBytes -= chunk.length;
        }
        // A sync started earlier (by the sorter) may cover less than this batch: sync until it does.
        // A store that failed meanwhile (a segment's fsync in the sorter, say) syncs nothing more:
        // stop here, or this loop spins on microtasks for ever and starves the event loop.
        if (policy === "always") {
          while (context.journal.syncedSeq < context.journal.writtenSeq) {
            if (context.failure !== null) throw context.failure;
            await this.syncShared();
          }
          // The disk is idle until the publishers this commit wakes have appended again.
          this.spareFiller.step(batchBytes(batch));
        }
        // A failure beside this batch (a journal's seal, a sorter's fsync) stops the loop where
        // it is: nothing written after it becomes visible to readers or subscribers.
        if (context.failure !== null) throw context.failure;
        if (this.stall !== null) throw this.stall;
        context.journal.committedSeq =
          policy === "always" ? context.journal.syncedSeq : context.journal.writtenSeq;
        if (policy === "interval") this.scheduleSync();
        this.resolveWaiters();
        for (const chunk of batch) this.keepSpare(chunk);
        batch = [];
      }
    } catch (error) {
      this.stallOrFail(error, batch);
    } finally {
      this.flushing = null;
    }
    if (context.failure === null && this.stall === null) this.onFlushed();
  }

  /**
   * Starts journal `journal` under its staged name and seals the one before in the background:
   * writes go on into the new file while the sealed one's fsync runs (under `interval` that
   * fsync covers up to a sync interval of data, tens of milliseconds, in which writes would
   * otherwise stop). One journal is staged at a time.
   */
  private async stageJournal(journal: JournalInfo): Promise<void> {
    const context = this.context;
    if (this.promotion !== null) await this.promotion;
    if (context.failure !== null) throw context.failure;
    if (context.journal.spares.length === 0) {
      const partial = await this.spareFiller.handOver();
      if (partial !== undefined) context.journal.spares.push(partial);
    }
    // Staged afresh after a failed roll (the retry of a stall): a handle cached under the staged
    // name could be a file a spare's rename has since replaced.
    if (journal.path === stagedPath(journal.gen)) await context.files.drop(journal.path);
    await stageJournalFile(context, journal.gen, journal.firstSeq);
    journal.path = stagedPath(journal.gen);
    this.staged = journal;
    this.promotion = this.promote(context.journal.generation(journal.gen - 1), journal);
  }

  /** Seals `previous` and gives `journal` its name; a failure fails the store (never rejects). */
  private async promote(previous: JournalInfo, journal: JournalInfo): Promise<void> {
    const context = this.context;
    try {
      await promoteJournalFile(context, previous, journal);
      context.journal.syncedSeq = Math.max(context.journal.syncedSeq, journal.firstSeq - 1);
    } catch (error) {
      // Under `interval`/`never` the staged file holds acknowledged records: the retry promotes
      // it again. Under `always` nothing in it is acknowledged: the retry stages it afresh.
      if (this.context.options.fsync !== "always") this.failedPromotion = { previous, journal };
      this.stallOrFail(error);
    } finally {
      this.staged = null;
      this.promotion = null;
    }
  }

  private scheduleSync(): void {
    const schedule = this.context.options.schedule;
    if (this.syncScheduled || schedule === undefined) return;
    this.syncScheduled = true;
    schedule(this.context.options.fsyncIntervalMs, () => {
      this.syncScheduled = false;
      this.sync().catch(() => {});
    });
  }

  private resolveWaiters(): void {
    const committed = this.context.journal.committedSeq;
    let i = 0;
    while (i < this.waiters.length && this.waiters[i].seq <= committed) this.waiters[i++].resolve();
    if (i > 0) this.waiters.splice(0, i);
  }

  /**
   * After a journal write, fsync, roll or seal failed: a full disk stalls the writer (retried,
   * see the file's comment), anything else fails the store. `batch`: the chunks of the flush in
   * flight; those not durable under the policy go back to the front, to be written again.
   */
  private stallOrFail(error: unknown, batch: readonly Chunk[] = []): void {
    const context = this.context;
    if (context.failure !== null) return this.fail(error);
    if (!isOutOfSpace(error) && !(error instanceof StoreError && error === this.stall))
      return this.fail(error);
    const journal = context.journal;
    const durable = context.options.fsync === "always" ? journal.syncedSeq : journal.writtenSeq;
    const again = batch.filter((chunk) => chunk.lastSeq > durable);
    // Chunks already written counted out of the buffered bytes: they count in again until
    // their rewrite.
    for (const chunk of again)
      if (chunk.lastSeq <= journal.writtenSeq) this.bufferedBytes += chunk.length;
    if (again.length > 0) this.chunks = again.concat(this.chunks);
    if (this.stall !== null) return;
    const reason = error instanceof Error ? error.message : String(error);
    this.stall = new StoreError(
      "ARIA_ERR_STORE_IO",
      `The store cannot write its journal (${reason}); it retries by itself: publish again later`,
    );
    if (this.retriesStopped) return this.fail(this.stall);
    if (!this.stallAnnounced) {
      this.stallAnnounced = true;
      this.onStalled(this.stall);
    }
    this.scheduleRetry();
  }

  /**
   * No more retries (a shutdown): a stall now, or one later, fails the store, so that whatever
   * waits for a commit is refused instead of waiting for free space.
   */
  stopRetrying(): void {
    this.retriesStopped = true;
    if (this.stall !== null && this.context.failure === null) this.fail(this.stall);
  }

  private scheduleRetry(): void {
    this.backoff.later(this.context.options.schedule, () => void this.retry());
  }

  /**
   * Tries a stalled journal again now: writes what is not durable again and fsyncs it. Resolves
   * true once the journal is written again (commit waiters then resolve as their records are
   * durable), false while it is still stalled (the next retry is scheduled) or the store failed.
   */
  retry(): Promise<boolean> {
    this.retrying ??= this.retryOnce().finally(() => {
      this.retrying = null;
    });
    return this.retrying;
  }

  private async retryOnce(): Promise<boolean> {
    const context = this.context;
    // Whatever was in flight at the stall settles first (a roll's seal, a shared fsync).
    await this.flushing;
    await this.promotion;
    await this.syncing?.catch(() => {});
    if (this.stall === null || context.failure !== null || context.closed || this.retriesStopped)
      return this.stall === null && context.failure === null;
    const stalled = this.stall;
    this.stall = null;
    this.retryingStall = stalled;
    try {
      const promotion = this.failedPromotion;
      this.failedPromotion = null;
      if (promotion !== null) {
        this.staged = promotion.journal;
        this.promotion = this.promote(promotion.previous, promotion.journal);
        await this.promotion;
        if (this.stall !== null) throw this.stall;
      }
      if (this.chunks.length > 0) {
        this.flushing ??= this.flushLoop();
        await this.flushing;
      } else {
        await this.syncShared();
      }
    } catch {
      // The stall (or failure) it caused is recorded: looked at below.
    }
    this.retryingStall = null;
    if (context.failure !== null) return false;
    if (this.stall !== null) {
      // Still stalled: the first stall's reason stands until the journal is written again.
      this.stall = stalled;
      this.scheduleRetry();
      return false;
    }
    this.backoff.reset();
    const waiters = this.resumeWaiters;
    this.resumeWaiters = [];
    for (const waiter of waiters) waiter.resolve();
    this.stallAnnounced = false;
    this.onStalled(null);
    if (this.chunks.length > 0 && this.flushing === null) this.flushing = this.flushLoop();
    return true;
  }

  /** Puts the store in the failed state: nothing further is acknowledged. */
  fail(error: unknown): void {
    const context = this.context;
    if (context.failure === null) {
      const reason = error instanceof Error ? error.message : String(error);
      context.failure = new StoreError(
        "ARIA_ERR_STORE_FAILED",
        `The store stopped after a journal write or fsync failed: ${reason}`,
      );
    }
    for (const waiter of this.waiters) waiter.reject(context.failure);
    this.waiters = [];
    const resumeWaiters = this.resumeWaiters;
    this.resumeWaiters = [];
    for (const waiter of resumeWaiters) waiter.reject(context.failure);
    this.onFailed();
  }
}

function batchBytes(batch: Chunk[]): number {
  let bytes = 0;
  for (const chunk of batch) bytes += chunk.length;
  return bytes;
}

/** Writes a chunk: a short one at once on this thread (see JOURNAL_WRITE_NOW_BYTES_MAX). */
function writeChunk(file: DiskFile, chunk: Chunk): Promise<void> | void {
  // Zeros to the end of the last page the records touch (as room allows): a write that ends
  // inside a page of a file whose blocks exist (a recycled or zero-filled journal) must first read
  // that page from the disk when it is not cached, once per group commit; a whole page is not
  // read. The next write starts inside that page, cached now. Recovery cuts zeros after the last
  // record as a torn tail; a seal truncates them.
  const padded = Math.min(
    chunk.bytes.length,
    Math.ceil((chunk.position + chunk.length) / PAGE_BYTES) * PAGE_BYTES - chunk.position,
  );
  if (padded > chunk.length) chunk.bytes.fill(0, chunk.length, padded);
  const bytes = chunk.bytes.subarray(0, padded);
  if (file.writeNow === undefined || bytes.length > JOURNAL_WRITE_NOW_BYTES_MAX)
    return file.write(chunk.position, bytes);
  file.writeNow(chunk.position, bytes);
}
