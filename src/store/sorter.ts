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
 *
 * A batch the disk has no room for (ENOSPC or EDQUOT from its pack or its manifest append, which
 * manifest.ts cuts back) does not fail the store: its pack is removed (it is in no manifest), the
 * sorter *stalls* — `stalled` says why, the store reports it as it reports the journal's stall —
 * and it tries again on the journal's backoff (RetryBackoff) until a pass goes through, while the
 * journal keeps the records. Pokes meanwhile wait for the retry. Drained journals are still
 * retired (they free space). Any other error still fails the store.
 */
import { SEGMENT_AGE_SCAN_US } from "../constants.ts";
import { RetryBackoff, type StoreContext } from "./context.ts";
import { isOutOfSpace, readFully } from "./disk.ts";
import type { JournalWriter } from "./journal_writer.ts";
import { SEGMENT_DIR, StoreError, packPath } from "./layout.ts";
import { checkRecord, recordProblem, recordTopic, recordTopicEquals } from "./record.ts";
import {
  MANIFEST_ADD,
  MANIFEST_TOPICS,
  type ManifestRecord,
  type TopicCount,
} from "./manifest_codec.ts";
import { appendManifest, compactManifestMaybe } from "./manifest.ts";
import type { PartitionLog } from "./partition_log.ts";
import { dropDrainedJournals } from "./journal_files.ts";
import { PackWriter } from "./pack_file.ts";
import type { SegmentMeta } from "./segment_index.ts";

/**
 * Segments written into one pack and synced together, then put in force by one manifest append:
 * at most this many (one ADD record each, ~100 bytes) and at most BATCH_BYTES of records
 * (10,000 small partitions close in one batch: one file created instead of 20,000).
 */
const BATCH_SEGMENTS = 16_384;
const BATCH_BYTES = 64 * 1024 * 1024;
/**
 * Journal bytes one sort reads into memory at most (whole journals, at least one): the
 * partitions it closes take all they have in them, so 10,000 evenly loaded partitions close
 * segments of ~26 KB of 1 KiB messages each, where one 64 MiB journal's share is ~6.5 KB.
 */
const SORT_IMAGES_BYTES_MAX = 256 * 1024 * 1024;
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
  /** Messages and record bytes per topic (filled while copying): the segment's TOPICS record. */
  topics: Map<string, TopicCount>;
};

function planClose(log: PartitionLog, end: number): Close {
  const start = log.pendingHead;
  return {
    log,
    start,
    count: end - start,
    firstSeq: log.pendingSeq(start),
    bytes: log.pendingBytesBefore(end),
    recordsByGen: new Map(),
    topics: new Map(),
  };
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
  /** Called when the sorter stalls for lack of space and when a pass goes through again. */
  onStalled: () => void = () => {};
  /** Why sorting cannot proceed now while retries run (null: it can). */
  private stall: StoreError | null = null;
  private readonly backoff = new RetryBackoff();
  /** Set by stopRetrying (a shutdown): no retry is scheduled any more. */
  private retriesStopped = false;

  constructor(
    private readonly context: StoreContext,
    private readonly writer: JournalWriter,
  ) {}

  /** Why sorting cannot proceed for now while it retries (null: it can, or the store failed). */
  get stalled(): StoreError | null {
    return this.context.failure === null ? this.stall : null;
  }

  /**
   * Records that sorting failed for lack of space (`error`, which isOutOfSpace): the sorter
   * stalls, says so once, and tries again later. A shutdown's stop or a closed store only records it.
   */
  stallOn(error: unknown): void {
    if (this.stall === null) {
      const reason = error instanceof Error ? error.message : String(error);
      this.stall = new StoreError(
        "ARIA_ERR_STORE_IO",
        `The store cannot sort its journal into segments (${reason}); it retries by itself: publish again later`,
      );
      this.onStalled();
    }
    if (this.retriesStopped || this.context.closed) return;
    this.backoff.later(this.context.options.schedule, () => this.retry());
  }

  /** A retry's time has come: a pass from scratch (the triggers are checked again). */
  private retry(): void {
    if (this.stall === null || this.context.closed || this.context.failure !== null) return;
    // The triggers consumed by the failed pass come back: oversized partitions are found again
    // by the size check, aged ones by a scan now.
    for (const log of this.context.partitions.list)
      if (log.pendingBytes >= this.context.options.segmentBytesMax)
        this.context.partitions.oversized.add(log);
    this.lastAgeScanUs = -Infinity;
    this.poke(this.context.journal.newestTimeUs, true);
  }

  /** No more retries (a shutdown); a stall stays as it is. */
  stopRetrying(): void {
    this.retriesStopped = true;
  }

  /** A pass went through: a stall is over. */
  private resumed(): void {
    if (this.stall === null) return;
    this.stall = null;
    this.backoff.reset();
    this.onStalled();
  }

  /**
   * Checks the triggers (cheap unless a journal rolled or `nowUs` aged something) and sorts in the
   * background; while stalled, only the retry (`retrying`) sorts.
   */
  poke(nowUs: number = this.context.journal.newestTimeUs, retrying = false): void {
    if (this.stall !== null && !retrying) return;
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
   * Sorts every pending record (clean close), waiting for it: by groups of journals of up to
   * SORT_IMAGES_BYTES_MAX, oldest first, each read into memory once, every partition with records
   * in a group closing them (as the retained-journal trigger does). Closing each partition's
   * records of all journals at once read them record by record where partitions interleave: a
   * stop with 1.1 GB of journals over 10,000 partitions took 17 s that way.
   */
  async sortAll(): Promise<void> {
    await this.sortThrough(Infinity);
  }

  /**
   * Sorts, as sortAll does, every partition whose oldest pending record has a seq at or below
   * `throughSeq` (`aria split --seal`: the records appended before it asked), waiting for it;
   * the records must be written (the caller waits for their commit). Publishes meanwhile go on
   * and are not waited for: a partition whose pending records all came later is left alone, so
   * the sort ends however fast they come.
   */
  async sortThrough(throughSeq: number): Promise<void> {
    // The background loop stays out while this runs (a poke meanwhile only asks for a pass after
    // it): two runs at once closed the same pending records twice (overlapping segments).
    while (this.running !== null) await this.running.catch(() => {});
    const sorting = this.sortEverything(throughSeq);
    this.running = sorting
      .then(
        // Everything due went through: a stall is over, its retry need not wait.
        () => this.resumed(),
        () => {},
      )
      .finally(() => {
        this.running = null;
        this.onProgress();
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
    return sorting;
  }

  private async sortEverything(throughSeq: number): Promise<void> {
    await this.writer.sync();
    const context = this.context;
    const due = (log: PartitionLog) =>
      log.pendingCount > 0 && log.pendingSeq(log.pendingHead) <= throughSeq;
    // Passes until nothing due is pending: a close stops at the segment size, so a partition with
    // more than that in one group of journals needs more than one.
    for (let closed = 1; closed > 0 && context.partitions.list.some(due); ) {
      closed = 0;
      for (let first = 0; first < context.journal.generations.length; ) {
        if (context.journal.generations[first].pendingRecords === 0) {
          first++;
          continue;
        }
        // Every partition with records in this group of journals closes them.
        const gens = imagesFrom(context, first, context.journal.generations.length);
        const group = new Set(gens);
        closed += await this.run(
          context.partitions.list.filter(
            (log) => due(log) && group.has(log.pendingGen(log.pendingHead)),
          ),
          gens,
        );
        first = context.journal.generations.findIndex(
          (journal) => journal.gen > gens[gens.length - 1],
        );
        if (first < 0) break;
      }
      closed += await this.run(context.partitions.list.filter(due), null);
    }
  }

  private async loop(nowUs: number): Promise<void> {
    let closed = 1;
    while (closed > 0 || this.again) {
      this.again = false;
      const { closes, imageGens } = this.plan(nowUs);
      if (closes.length === 0) break;
      try {
        closed = await this.run(closes, imageGens);
        this.onProgress();
      } catch (error) {
        if (isOutOfSpace(error) && this.context.failure === null) {
          // The journal still holds every record: wait for space, then try again.
          this.stallOn(error);
          await this.retireDrained();
          return;
        }
        // A disk that fails otherwise fails the store.
        this.writer.fail(error);
        throw error;
      }
    }
    this.resumed();
  }

  /**
   * Retires the journals the batches before a stall drained: they free space. One the disk has
   * no room to retire now (its manifest record) stays for the next pass.
   */
  private async retireDrained(): Promise<void> {
    const context = this.context;
    await context.reads
      .whenNoReads(() => dropDrainedJournals(context))
      .catch((error) => {
        if (!isOutOfSpace(error)) this.writer.fail(error);
      });
  }

  private plan(nowUs: number): { closes: PartitionLog[]; imageGens: number[] | null } {
    const context = this.context;
    const options = context.options;
    const totals = context.journal.totals();
    // The oldest sealed journal still holding unsorted records (a drained one may wait for a
    // read in flight before it is deleted: the sort goes on past it).
    const oldestPinned = context.journal.generations.findIndex(
      (journal) => journal.pendingRecords > 0,
    );
    if (
      totals.bytes > options.journalRetainedBytesMax &&
      oldestPinned >= 0 &&
      oldestPinned < context.journal.generations.length - 1
    ) {
      // The oldest pinned journal and the sealed ones after it, up to the image budget: the
      // partitions pinning the first close what they have in all of them (bigger segments than
      // one journal's share, which over 10,000 partitions is ~6.5 KB each).
      const gens = imagesFrom(context, oldestPinned, context.journal.generations.length - 1);
      const oldest = gens[0];
      return {
        closes: context.partitions.list.filter(
          (log) => log.pendingCount > 0 && log.pendingGen(log.pendingHead) === oldest,
        ),
        imageGens: gens,
      };
    }
    const closes = new Set<PartitionLog>();
    for (const log of context.partitions.oversized)
      if (log.pendingBytes >= options.segmentBytesMax) closes.add(log);
    context.partitions.oversized.clear();
    let pending = totals.pendingRecords;
    if (pending > options.pendingRecordsMax) {
      // Too many positions held in memory: sort the partitions holding the most until half remain.
      const byCount = context.partitions.list
        .filter((log) => log.pendingCount > 0)
        .sort((a, b) => b.pendingCount - a.pendingCount);
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
      for (const log of context.partitions.list) {
        if (log.pendingCount > 0 && log.pendingTime(log.pendingHead) < ageLimit) closes.add(log);
      }
    }
    return { closes: [...closes], imageGens: null };
  }

  /**
   * Closes segments for `logs`: all their synced pending records, or with `imageGens` (journals
   * from the oldest one of theirs on, consecutive), those in these journals, each read into
   * memory once.
   */
  private async run(logs: PartitionLog[], imageGens: number[] | null): Promise<number> {
    const context = this.context;
    if (context.journal.syncedSeq < context.journal.writtenSeq) await this.writer.sync();
    const limit = context.journal.syncedSeq;
    const images: Images | null = imageGens === null ? null : new Map();
    for (const gen of imageGens ?? []) {
      // A journal that starts after the synced seq holds nothing to sort yet (and may still be
      // only in the writer's memory, or staged under another name).
      if (context.journal.generation(gen).firstSeq > limit) break;
      const bytes = await this.loadJournal(gen);
      images?.set(gen, { bytes, view: new DataView(bytes.buffer, bytes.byteOffset, bytes.length) });
    }
    const plan: Close[] = [];
    for (const log of logs) {
      let end = log.pendingAfter(limit);
      if (images !== null)
        while (end > log.pendingHead && !images.has(log.pendingGen(end - 1))) end--;
      end = segmentEnd(log, end, context.options.segmentBytesMax);
      if (end > log.pendingHead) plan.push(planClose(log, end));
    }
    for (let i = 0; i < plan.length; ) {
      let j = i + 1;
      let bytes = plan[i].bytes;
      while (j < plan.length && j - i < BATCH_SEGMENTS && bytes + plan[j].bytes <= BATCH_BYTES)
        bytes += plan[j++].bytes;
      await this.closeBatch(plan.slice(i, j), images);
      i = j;
    }
    // A close stops at the segment size: what is still past it closes in the next pass.
    for (const close of plan)
      if (close.log.pendingBytes >= context.options.segmentBytesMax)
        context.partitions.oversized.add(close.log);
    await context.reads.whenNoReads(() => dropDrainedJournals(context));
    await compactManifestMaybe(context);
    return plan.length;
  }

  private async closeBatch(batch: Close[], images: Images | null): Promise<void> {
    const context = this.context;
    const expectedBytes = batch.reduce((sum, close) => sum + close.bytes, 0);
    const pack = await PackWriter.create(context.disk, {
      id: context.inForce.nextSegmentId++,
      firstSeq: batch[0].firstSeq,
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
      expectedBytes,
    });
    const written: { close: Close; meta: SegmentMeta }[] = [];
    try {
      for (const close of batch) {
        await pack.begin(context.inForce.nextSegmentId++, close.log.name, close.firstSeq);
        await this.copyRecords(close, pack, images);
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
      if (isOutOfSpace(error)) await removePack(context, pack.id);
      throw error;
    }
    // Each segment's per-topic counts before its ADD, in one append: a torn tail that keeps the
    // ADD keeps them (counts of a file not in force are never used).
    const records: ManifestRecord[] = [];
    for (const { close, meta } of written)
      records.push(
        { kind: MANIFEST_TOPICS, id: meta.id, topics: [...close.topics.values()] },
        { kind: MANIFEST_ADD, segment: meta },
      );
    try {
      await context.disk.syncDir(SEGMENT_DIR);
      await appendManifest(context, records);
    } catch (error) {
      // Out of space, the append was cut back (manifest.ts): the pack is in force nowhere.
      if (isOutOfSpace(error)) await removePack(context, pack.id);
      throw error;
    }
    for (const { close, meta } of written) {
      for (const [gen, records] of close.recordsByGen)
        context.journal.generation(gen).pendingRecords -= records;
      close.log.closeSegment(meta, close.start + close.count);
      context.inForce.hold(meta);
      // Its records were counted in the journal: they stay counted, now as the segment's.
      context.inForce.count(meta.id, [...close.topics.values()], false);
      this.segmentsWritten++;
    }
  }

  /**
   * Copies the records of `close` into `writer`, reading runs of nearby records at once, and
   * asks to yield to the event loop every SLICE_RECORDS records.
   */
  private async copyRecords(
    close: Close,
    writer: PackWriter,
    images: Images | null,
  ): Promise<void> {
    const context = this.context;
    const log = close.log;
    const end = close.start + close.count;
    const yieldToEvents = context.options.yieldToEvents;
    const crc32 = context.crc32;
    let sliced = 0;
    // Adds `records` back-to-back records; a promise only when the writer flushes or a slice ends
    // (no await per record).
    const add = (
      bytes: Uint8Array,
      at: number,
      first: number,
      end: number,
    ): Promise<void> | undefined => {
      const written = writer.addPending(bytes, at, log, first, end);
      sliced += end - first;
      if (sliced < SLICE_RECORDS) return written;
      sliced = 0;
      if (written !== undefined) return written.then(yieldToEvents);
      return yieldToEvents();
    };
    // The count of the last record's topic: a partition's records often share one.
    let last: TopicCount = { topic: "", messages: 0, bytes: 0 };
    const topics = close.topics;
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
      const image = images?.get(gen);
      if (image !== undefined) {
        while (j < end && log.pendingGen(j) === gen) j++;
        bytes = image.bytes;
        view = image.view;
        base = 0;
      } else {
        base = log.pendingPosition(i);
        let spanEnd = base + log.pendingLength(i);
        while (j < end && log.pendingGen(j) === gen) {
          const nextEnd = log.pendingPosition(j) + log.pendingLength(j);
          if (log.pendingPosition(j) - spanEnd > READ_GAP_BYTES || nextEnd - base > READ_SPAN_BYTES)
            break;
          spanEnd = nextEnd;
          j++;
        }
        const span = spanEnd - base;
        if (buffer.length < span) buffer = new Uint8Array(Math.max(span, 64 * 1024));
        const into = buffer.subarray(0, span);
        const path = context.journal.generation(gen).path;
        const read = await context.files.with(path, async (file) => readFully(file, base, into));
        if (read < span)
          throw new StoreError(
            "ARIA_ERR_STORE_IO",
            `Journal "${path}" is shorter than expected: ${base + read} < ${spanEnd}`,
          );
        bytes = buffer;
        view = new DataView(buffer.buffer, 0, span);
      }
      close.recordsByGen.set(gen, (close.recordsByGen.get(gen) ?? 0) + j - i);
      // Records that lie back to back in the journal (all of them, when one partition has the
      // stream to itself) go to the writer as runs of up to SLICE_RECORDS: one copy per run.
      for (let k = i; k < j; ) {
        // `| 0` (an offset in a journal's bytes, < JOURNAL_BYTES_MAX): the log's entries are
        // doubles, and a DataView read at a double offset leaves optimized code (see reader.ts).
        const at = (log.pendingPosition(k) - base) | 0;
        let end = at;
        let m = k;
        do {
          // Each record's own CRC, checked again: the segment's image CRC is computed from these
          // bytes, and would vouch for a record that rotted on the disk since it was written.
          const length = log.pendingLength(m++);
          const checked = checkRecord(bytes, view, end, end + length, crc32);
          if (checked !== length)
            throw damagedJournal(context.journal.generation(gen).path, base + end, checked);
          if (!recordTopicEquals(bytes, view, end, last.topic))
            last = topicCountOf(topics, bytes, view, end);
          last.messages++;
          last.bytes += length;
          end += length;
        } while (m < j && m - k < SLICE_RECORDS && log.pendingPosition(m) - base === end);
        const pause = add(bytes, at, k, m);
        if (pause !== undefined) await pause;
        k = m;
      }
      i = j;
    }
  }

  private async loadJournal(gen: number): Promise<Uint8Array> {
    const journal = this.context.journal.generation(gen);
    const bytes = new Uint8Array(journal.bytes);
    await this.context.files.with(journal.path, (file) => readFully(file, 0, bytes));
    return bytes;
  }
}

/**
 * Removes the pack of a batch that failed for lack of space (in no manifest: its space comes
 * back at once instead of at the next open); a removal that fails leaves an orphan the next open
 * removes.
 */
async function removePack(context: StoreContext, id: number): Promise<void> {
  await context.files.drop(packPath(id)).catch(() => {});
  await context.disk.remove(packPath(id)).catch(() => {});
}

/** Topics of a segment compared byte by byte before its record's topic is decoded and looked up. */
const TOPICS_COMPARED_MAX = 8;

/**
 * The count of the topic of the record at `at`, added when new. A segment's few topics are
 * compared in place (decoding the topic and hashing it for each record whose topic differs from
 * the one before made a sort of interleaved topics ~25% slower); past a few, looked up by name.
 */
function topicCountOf(
  topics: Map<string, TopicCount>,
  bytes: Uint8Array,
  view: DataView,
  at: number,
): TopicCount {
  if (topics.size <= TOPICS_COMPARED_MAX) {
    for (const count of topics.values())
      if (recordTopicEquals(bytes, view, at, count.topic)) return count;
  }
  const topic = recordTopic(bytes, view, at);
  let count = topics.get(topic);
  if (count === undefined) {
    count = { topic, messages: 0, bytes: 0 };
    topics.set(topic, count);
  }
  return count;
}

/** Journals read into memory for one sort, by generation. */
type Images = Map<number, { bytes: Uint8Array; view: DataView }>;

/**
 * Generations of journal.generations[from] and the ones after it (before index `end`) while their
 * bytes stay within SORT_IMAGES_BYTES_MAX: at least the first.
 */
function imagesFrom(context: StoreContext, from: number, end: number): number[] {
  const gens = [context.journal.generations[from].gen];
  let bytes = context.journal.generations[from].bytes;
  for (
    let k = from + 1;
    k < end && bytes + context.journal.generations[k].bytes <= SORT_IMAGES_BYTES_MAX;
    k++
  ) {
    gens.push(context.journal.generations[k].gen);
    bytes += context.journal.generations[k].bytes;
  }
  return gens;
}

/** The end of a close of `log`'s pending records up to `end` that stays within `bytesMax` (at least one record). */
function segmentEnd(log: PartitionLog, end: number, bytesMax: number): number {
  if (end <= log.pendingHead || log.pendingBytesBefore(end) <= bytesMax) return end;
  let bytes = log.pendingLength(log.pendingHead);
  let cut = log.pendingHead + 1;
  while (cut < end && bytes + log.pendingLength(cut) <= bytesMax) bytes += log.pendingLength(cut++);
  return cut;
}

/** A journal record the sorter found damaged (`code`: checkRecord's, or a length other than the one appended). */
function damagedJournal(path: string, offset: number, code: number): StoreError {
  const what = code > 0 ? "record length differs from the one appended" : recordProblem(code);
  return new StoreError(
    "ARIA_ERR_STORE_CORRUPT",
    `Cannot sort "${path}": ${what} at offset ${offset}`,
  );
}
