/**
 * Sorter: moves journal records into closed per-partition segments, in the background, one
 * batch at a time. A partition's pending records become a segment when they reach
 * segmentBytesMax, when the oldest is segmentAgeUsMax old, when the journals they pin exceed
 * journalRetainedBytesMax (then only the part in the oldest journal, read into memory once), or
 * at a clean close.
 *
 * Crash-safe order of one batch:
 *   1. only records already fsynced in the journal are sorted (the journal is synced first)
 *   2. write the batch's segments and their indexes into one pack file, fsync it, fsync the
 *      segment directory
 *   3. append ADD records to the manifest and fsync it   ← the batch takes effect here
 *   4. drop the records from the partitions' pending lists; remove drained journals
 * A crash before 3 leaves an orphan pack (removed at open); after 3, replay skips the records
 * already in segments by seq, so nothing is lost or duplicated.
 */
import { SEGMENT_AGE_SCAN_US } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { StoreContext } from "./context.ts";
import { readFully } from "./disk.ts";
import type { JournalWriter } from "./journal_writer.ts";
import { SEGMENT_DIR, StoreError } from "./layout.ts";
import { MANIFEST_ADD } from "./manifest_codec.ts";
import { appendManifest, compactManifestMaybe } from "./manifest.ts";
import type { PartitionLog } from "./partition_log.ts";
import { dropDrainedJournals } from "./recovery.ts";
import { PackWriter } from "./pack_file.ts";
import type { SegmentMeta } from "./segment_index.ts";

/**
 * Segments written into one pack and synced together, then put in force by one manifest append:
 * at most this many (one ADD record each, ~100 bytes) and at most BATCH_BYTES of records
 * (10,000 small partitions close in one batch: one file created instead of 20,000).
 */
const BATCH_SEGMENTS = 16_384;
const BATCH_BYTES = 64 * 1024 * 1024;
/** Journal bytes between two records of one partition that one read still spans. */
const READ_GAP_BYTES = 16 * 1024;
const READ_SPAN_BYTES = 1024 * 1024;
/** Records copied between two questions to yieldToEvents (a few µs of work when compiled), and the longest run copied at once. */
const SLICE_RECORDS = 64;

/**
 * A planned close: the pending records [start, start + count) of `log` become one segment. They
 * stay where they are until the close completes (appends never move pending records).
 */
type Close = {
  log: PartitionLog;
  start: number;
  count: number;
  firstSeq: number;
  bytes: number;
  /** Records copied per journal generation (filled while copying). */
  recordsByGen: Map<number, number>;
};

function planClose(log: PartitionLog, end: number): Close {
  const start = log.pendingHead;
  return { log, start, count: end - start, firstSeq: log.pendingSeq(start), bytes: log.pendingBytesBefore(end), recordsByGen: new Map() };
}

/** Closes segments from journal records. */
export class Sorter {
  private running: Promise<void> | null = null;
  private lastAgeScanUs = -Infinity;
  private again = false;
  /** Segments closed so far (stats). */
  segmentsWritten = 0;
  /** Called after each batch of closes and when the background sort stops (the store's backlog check). */
  onProgress: () => void = () => {};

  constructor(
    private readonly context: StoreContext,
    private readonly writer: JournalWriter,
  ) {}

  /** Checks the triggers (cheap unless a journal rolled or `nowUs` aged something) and sorts in the background. */
  poke(nowUs: number = this.context.newestTimeUs): void {
    if (this.running !== null) {
      this.again = true;
      return;
    }
    this.running = this.loop(nowUs).finally(() => {
      this.running = null;
      this.onProgress();
    });
    this.running.catch(() => {});
  }

  /** Waits for the background sort to finish. */
  async idle(): Promise<void> {
    while (this.running !== null) await this.running.catch(() => {});
  }

  /**
   * Sorts every pending record (clean close), waiting for it: journal by journal, oldest first,
   * each read into memory once, closing what each partition has in it (as the retained-journal
   * trigger does). Closing each partition's records of all journals at once read them record by
   * record where partitions interleave: a stop with 1.1 GB of journals over 10,000 partitions
   * took 17 s that way.
   */
  async sortAll(): Promise<void> {
    await this.idle();
    await this.writer.sync();
    const context = this.context;
    for (const journal of [...context.journals]) {
      if (journal.pendingRecords === 0) continue;
      const pinning = context.partitionList.filter((log) => log.pendingCount > 0 && log.pendingGen(log.pendingHead) === journal.gen);
      await this.run(pinning, journal.gen);
    }
    await this.run(context.partitionList.filter((log) => log.pendingCount > 0), null);
  }

  private async loop(nowUs: number): Promise<void> {
    let closed = 1;
    while (closed > 0 || this.again) {
      this.again = false;
      const { closes, imageGen } = this.plan(nowUs);
      if (closes.length === 0) break;
      try {
        closed = await this.run(closes, imageGen);
        this.onProgress();
      } catch (error) {
        // The journal still holds every record, but a disk that fails here fails the store.
        this.writer.fail(error);
        throw error;
      }
    }
  }

  private plan(nowUs: number): { closes: PartitionLog[]; imageGen: number | null } {
    const context = this.context;
    const options = context.options;
    const totals = context.journalTotals();
    // The oldest sealed journal still holding unsorted records (a drained one may wait for a
    // read in flight before it is deleted: the sort goes on past it).
    const oldestPinned = context.journals.findIndex((journal) => journal.pendingRecords > 0);
    if (totals.bytes > options.journalRetainedBytesMax && oldestPinned >= 0 && oldestPinned < context.journals.length - 1) {
      const oldest = context.journals[oldestPinned].gen;
      return { closes: context.partitionList.filter((log) => log.pendingCount > 0 && log.pendingGen(log.pendingHead) === oldest), imageGen: oldest };
    }
    const closes = new Set<PartitionLog>();
    for (const log of context.oversized) if (log.pendingBytes >= options.segmentBytesMax) closes.add(log);
    context.oversized.clear();
    let pending = totals.pendingRecords;
    if (pending > options.pendingRecordsMax) {
      // Too many positions held in memory: sort the partitions holding the most until half remain.
      const byCount = context.partitionList.filter((log) => log.pendingCount > 0).sort((a, b) => b.pendingCount - a.pendingCount);
      for (const log of byCount) {
        if (pending <= options.pendingRecordsMax / 2) break;
        closes.add(log);
        pending -= log.pendingCount;
      }
    }
    if (nowUs - this.lastAgeScanUs >= SEGMENT_AGE_SCAN_US) {
      // A full pass over the partitions: at most once per SEGMENT_AGE_SCAN_US of publish time.
      this.lastAgeScanUs = nowUs;
      const ageLimit = nowUs - options.segmentAgeUsMax;
      for (const log of context.partitionList) {
        if (log.pendingCount > 0 && log.pendingTime(log.pendingHead) < ageLimit) closes.add(log);
      }
    }
    return { closes: [...closes], imageGen: null };
  }

  /** Closes segments for `logs`: all their synced pending records, or with `imageGen`, those in that journal. */
  private async run(logs: PartitionLog[], imageGen: number | null): Promise<number> {
    const context = this.context;
    if (context.syncedSeq < context.writtenSeq) await this.writer.sync();
    const limit = context.syncedSeq;
    const image = imageGen === null ? null : await this.loadJournal(imageGen);
    const plan: Close[] = [];
    for (const log of logs) {
      let end = log.pendingAfter(limit);
      if (image !== null) while (end > log.pendingHead && log.pendingGen(end - 1) !== imageGen) end--;
      if (end > log.pendingHead) plan.push(planClose(log, end));
    }
    for (let i = 0; i < plan.length; ) {
      let j = i + 1;
      let bytes = plan[i].bytes;
      while (j < plan.length && j - i < BATCH_SEGMENTS && bytes + plan[j].bytes <= BATCH_BYTES) bytes += plan[j++].bytes;
      await this.closeBatch(plan.slice(i, j), image === null ? null : { gen: imageGen as number, bytes: image });
      i = j;
    }
    await context.whenNoReads(() => dropDrainedJournals(context));
    await compactManifestMaybe(context);
    return plan.length;
  }

  private async closeBatch(batch: Close[], image: { gen: number; bytes: Uint8Array } | null): Promise<void> {
    const context = this.context;
    const expectedBytes = batch.reduce((sum, close) => sum + close.bytes, 0);
    const pack = await PackWriter.create(context.disk, {
      id: context.nextSegmentId++,
      firstSeq: batch[0].firstSeq,
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
      expectedBytes,
    });
    const written: { close: Close; meta: SegmentMeta }[] = [];
    try {
      for (const close of batch) {
        await pack.begin(context.nextSegmentId++, close.log.name, close.firstSeq);
        await this.copyRecords(close, pack, image);
        written.push({ close, meta: await pack.end() });
      }
      const file = await pack.finish();
      try {
        await file.sync();
      } finally {
        await file.close();
      }
    } catch (error) {
      await pack.abandon();
      throw error;
    }
    await context.disk.syncDir(SEGMENT_DIR);
    await appendManifest(context, written.map((entry) => ({ kind: MANIFEST_ADD, segment: entry.meta })));
    for (const { close, meta } of written) {
      for (const [gen, records] of close.recordsByGen) context.journal(gen).pendingRecords -= records;
      close.log.closeSegment(meta, close.start + close.count);
      context.holdFiles(meta);
      this.segmentsWritten++;
    }
  }

  /**
   * Copies the records of `close` into `writer`, reading runs of nearby records at once, and
   * asks to yield to the event loop every SLICE_RECORDS records.
   */
  private async copyRecords(close: Close, writer: PackWriter, image: { gen: number; bytes: Uint8Array } | null): Promise<void> {
    const context = this.context;
    const log = close.log;
    const end = close.start + close.count;
    const yieldToEvents = context.options.yieldToEvents;
    let sliced = 0;
    // Adds `records` back-to-back records; a promise only when the writer flushes or a slice ends
    // (no await per record).
    const add = (bytes: Uint8Array, at: number, first: number, end: number): Promise<void> | undefined => {
      const written = writer.addPending(bytes, at, log, first, end);
      sliced += end - first;
      if (sliced < SLICE_RECORDS) return written;
      sliced = 0;
      if (written !== undefined) return written.then(yieldToEvents);
      return yieldToEvents();
    };
    const imageView = image === null ? null : new DataView(image.bytes.buffer, image.bytes.byteOffset, image.bytes.length);
    let i = close.start;
    let buffer = new Uint8Array(0);
    while (i < end) {
      const gen = log.pendingGen(i);
      // Records i..j-1 of one journal, in `bytes` (`view`) whose byte 0 is the journal's byte `base`:
      // the journal read into memory, or one read spanning them while gaps stay small.
      let j = i + 1;
      let bytes: Uint8Array;
      let view: DataView;
      let base: number;
      if (image !== null && imageView !== null && gen === image.gen) {
        while (j < end && log.pendingGen(j) === gen) j++;
        bytes = image.bytes;
        view = imageView;
        base = 0;
      } else {
        base = log.pendingPosition(i);
        let spanEnd = base + log.pendingLength(i);
        while (j < end && log.pendingGen(j) === gen) {
          const nextEnd = log.pendingPosition(j) + log.pendingLength(j);
          if (log.pendingPosition(j) - spanEnd > READ_GAP_BYTES || nextEnd - base > READ_SPAN_BYTES) break;
          spanEnd = nextEnd;
          j++;
        }
        const span = spanEnd - base;
        if (buffer.length < span) buffer = new Uint8Array(Math.max(span, 64 * 1024));
        const into = buffer.subarray(0, span);
        const path = context.journal(gen).path;
        const read = await context.files.with(path, async (file) => readFully(file, base, into));
        if (read < span) throw new StoreError("ARIA_ERR_STORE_IO", `Journal "${path}" is shorter than expected: ${base + read} < ${spanEnd}`);
        bytes = buffer;
        view = new DataView(buffer.buffer, 0, span);
      }
      close.recordsByGen.set(gen, (close.recordsByGen.get(gen) ?? 0) + j - i);
      // Records that lie back to back in the journal (all of them, when one partition has the
      // stream to itself) go to the writer as runs of up to SLICE_RECORDS: one copy per run.
      for (let k = i; k < j; ) {
        const at = log.pendingPosition(k) - base;
        assert(view.getUint32(at, true) === log.pendingLength(k), "sorter: journal record moved");
        let end = at;
        let m = k;
        do end += log.pendingLength(m++);
        while (m < j && m - k < SLICE_RECORDS && log.pendingPosition(m) - base === end);
        const pause = add(bytes, at, k, m);
        if (pause !== undefined) await pause;
        k = m;
      }
      i = j;
    }
  }

  private async loadJournal(gen: number): Promise<Uint8Array> {
    const journal = this.context.journal(gen);
    const bytes = new Uint8Array(journal.bytes);
    await this.context.files.with(journal.path, (file) => readFully(file, 0, bytes));
    return bytes;
  }
}
