/**
 * StoreContext: the state the store's parts share, grouped by the part that writes it. It holds
 * data only; journal_writer.ts, sorter.ts, recovery.ts, manifest.ts, store.ts and the reader
 * (read/) act on it, store.ts owns it.
 *
 *   StoreContext
 *   ├─ disk, options, crc32, files   set at open; files (the open-file LRU) is shared by all
 *   ├─ failure, closed               status: journal_writer.ts and store.ts write, all read
 *   ├─ journal     JournalState      generations, spares, seq watermarks — journal_writer.ts
 *   ├─ partitions  Partitions        partition logs, topics, oversized — appends, sorter, recovery
 *   ├─ inForce     FilesInForce      closed files in force: ids, packs, counts — sorter, store.ts
 *   ├─ manifest    ManifestState     the manifest file, its lock, the last split — manifest.ts
 *   └─ reads       ReadState         reads in flight, deferred removals, index cache — read/
 *
 * Also here: RetryBackoff, the waits between retries of a write refused for lack of space, which
 * the journal writer and the sorter each keep (not shared state: one per part).
 *
 * Recovery (recovery.ts) writes every group once at open, before any other part runs.
 *
 * Seq watermarks, always ordered:  committedSeq <= writtenSeq < nextSeq, syncedSeq <= writtenSeq
 *   nextSeq       the seq the next append must carry
 *   writtenSeq    last seq whose bytes reached the journal file (readable)
 *   syncedSeq     last seq whose journal bytes are fsynced (durable under every policy)
 *   committedSeq  last seq acknowledged under the policy (always: synced; interval/never: written)
 */
import {
  FSYNC_INTERVAL_MS_DEFAULT,
  JOURNAL_BYTES_MAX,
  JOURNAL_RETAINED_BYTES_MAX,
  PARTITION_SEGMENTS,
  READ_BATCH_BYTES_MAX,
  READ_BUFFER_BYTES_TOTAL,
  SEGMENT_AGE_US_MAX,
  PENDING_RECORDS_MAX,
  SEGMENT_BYTES_MAX,
  SEGMENT_INDEX_INTERVAL_BYTES,
  STORE_OPEN_FILES_MAX,
  STORE_RETRY_MS_MAX,
  STORE_RETRY_MS_MIN,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { partitionOf } from "../topic/mod.ts";
import type { Crc32 } from "./crc32.ts";
import { crc32 as pureCrc32 } from "./crc32.ts";
import type { Disk, DiskFile } from "./disk.ts";
import { FileCache } from "./file_cache.ts";
import { type StoreError, indexPath, packPath } from "./layout.ts";
import type { SplitSummary, TopicCount } from "./manifest_codec.ts";
import { PartitionLog } from "./partition_log.ts";
import type { SegmentIndex, SegmentMeta } from "./segment_index.ts";
import { type SubtreeStoreMeta, dataPathOf, isSubtreeStore } from "./subtree_store_file.ts";

/** Durability policy: when a publish is acknowledged. */
export type FsyncPolicy = "always" | "interval" | "never";

/** Options of Store.open; limits default to src/constants.ts and shrink in tests. */
export type StoreOptions = {
  /** `always` (default): ack after fsync, group commit. `interval`: ack after write, fsync every fsyncIntervalMs. `never`: no fsync. */
  fsync?: FsyncPolicy;
  fsyncIntervalMs?: number;
  /** One-shot timer for `interval` (runtime passes setTimeout); without it the caller calls `store.sync()`. */
  schedule?: (delayMs: number, run: () => void) => void;
  /**
   * Background work (the sorter) asks this every few dozen records and awaits the promise it
   * returns, if any, so socket reads, commits and deliveries run in between (the runtime pauses
   * every half millisecond; default: a resolved promise every time).
   */
  yieldToEvents?: () => Promise<void> | undefined;
  /** CRC-32 implementation (default: the pure one; runtime passes the native one). */
  crc32?: Crc32;
  /** Continue past corruption in the middle of a file, reporting it, instead of refusing to open. */
  repair?: boolean;
  journalBytesMax?: number;
  journalRetainedBytesMax?: number;
  segmentBytesMax?: number;
  segmentAgeUsMax?: number;
  /** Unsorted journal records (all partitions) before the largest partitions are sorted. */
  pendingRecordsMax?: number;
  indexIntervalBytes?: number;
  openFilesMax?: number;
  readBufferBytes?: number;
  readBatchBytesMax?: number;
};

/** StoreOptions with every default filled in. */
export type ResolvedOptions = Required<Omit<StoreOptions, "schedule">> &
  Pick<StoreOptions, "schedule">;

/**
 * Journals roll before this many bytes (journalBytesMax may not pass half of it; a roll may
 * overshoot by one record): positions in a journal are int32s, which the partitions' pending
 * entries hand out as such (partition_log.ts).
 */
export const JOURNAL_POSITION_LIMIT = 2 ** 31;

/** Fills in the defaults of `options`. */
export function resolveOptions(options: StoreOptions): ResolvedOptions {
  assert(
    options.journalBytesMax === undefined || options.journalBytesMax <= JOURNAL_POSITION_LIMIT / 2,
    "store: journalBytesMax at most 1 GiB",
  );
  return {
    fsync: options.fsync ?? "always",
    fsyncIntervalMs: options.fsyncIntervalMs ?? FSYNC_INTERVAL_MS_DEFAULT,
    schedule: options.schedule,
    yieldToEvents: options.yieldToEvents ?? (() => Promise.resolve()),
    crc32: options.crc32 ?? pureCrc32,
    repair: options.repair ?? false,
    journalBytesMax: options.journalBytesMax ?? JOURNAL_BYTES_MAX,
    journalRetainedBytesMax: options.journalRetainedBytesMax ?? JOURNAL_RETAINED_BYTES_MAX,
    segmentBytesMax: options.segmentBytesMax ?? SEGMENT_BYTES_MAX,
    segmentAgeUsMax: options.segmentAgeUsMax ?? SEGMENT_AGE_US_MAX,
    pendingRecordsMax: options.pendingRecordsMax ?? PENDING_RECORDS_MAX,
    indexIntervalBytes: options.indexIntervalBytes ?? SEGMENT_INDEX_INTERVAL_BYTES,
    openFilesMax: options.openFilesMax ?? STORE_OPEN_FILES_MAX,
    readBufferBytes: options.readBufferBytes ?? READ_BUFFER_BYTES_TOTAL,
    readBatchBytesMax: options.readBatchBytesMax ?? READ_BATCH_BYTES_MAX,
  };
}

/**
 * The waits between the retries of a write the disk refused for lack of space: STORE_RETRY_MS_MIN,
 * then twice the last wait, up to STORE_RETRY_MS_MAX; one retry scheduled at a time. The journal
 * writer and the sorter each keep one (docs/storage.md, a full disk).
 */
export class RetryBackoff {
  private delayMs = 0;
  private scheduled = false;

  /** Runs `retry` after the next wait; nothing when one is scheduled already or without `schedule`. */
  later(schedule: StoreOptions["schedule"], retry: () => void): void {
    if (this.scheduled || schedule === undefined) return;
    this.scheduled = true;
    this.delayMs = Math.min(STORE_RETRY_MS_MAX, Math.max(STORE_RETRY_MS_MIN, this.delayMs * 2));
    schedule(this.delayMs, () => {
      this.scheduled = false;
      retry();
    });
  }

  /** The write went through: the next stall's first wait is the shortest again. */
  reset(): void {
    this.delayMs = 0;
  }
}

/** One journal generation on disk. */
export type JournalInfo = {
  gen: number;
  path: string;
  firstSeq: number;
  /** Bytes of the file that hold valid data (header + records written). */
  bytes: number;
  /** Records of this journal still pending in some partition (not yet in a segment). */
  pendingRecords: number;
  /** The file exists on disk with its header (the writer creates it lazily). */
  created: boolean;
};

/**
 * One topic: its partition's log, and the messages and record bytes the data directory holds of
 * it — in the journal (counted at append and at replay) and in the closed files whose counts are
 * known (FilesInForce.fileCounts). Retention and a split's switch subtract what they remove.
 * A topic may have several entries (one by name, one per id it was appended by: see "Topics by
 * id" in Partitions); what the directory holds of it is their sum, and one alone may be negative.
 */
export type TopicHeld = {
  readonly topic: string;
  readonly log: PartitionLog;
  messages: number;
  bytes: number;
};

/**
 * The journal's state. Owner: journal_writer.ts (appends, rolls, watermarks) and journal_files.ts
 * (creates and retires generations), with spare_filler.ts (spares). Read by the sorter (which
 * journals its closes drain, the synced watermark), the reader (committedSeq, a journal's path)
 * and store.ts (stats, the backlog check).
 */
export class JournalState {
  /** Live generations, oldest first; the last one is the active one appends go to. */
  generations: JournalInfo[] = [];
  /** Spare journal files ready for the next generations, and their bytes (journal_files.ts). */
  spares: { path: string; bytes: number }[] = [];
  /** Number of the next spare file's name. */
  nextSpareId = 1;
  nextSeq = 1;
  writtenSeq = 0;
  syncedSeq = 0;
  committedSeq = 0;
  /** Newest publish time appended: the store's notion of "now" for segment age. */
  newestTimeUs = 0;

  /**
   * Bytes of every journal kept, of the sealed ones only (all but the active, newest one), and
   * their unsorted records: what the sorter's triggers, the backlog check and stats read.
   */
  totals(): { bytes: number; sealedBytes: number; pendingRecords: number } {
    const journals = this.generations;
    let bytes = 0;
    let pendingRecords = 0;
    for (const journal of journals) {
      bytes += journal.bytes;
      pendingRecords += journal.pendingRecords;
    }
    return { bytes, sealedBytes: bytes - journals[journals.length - 1].bytes, pendingRecords };
  }

  /** The journal of generation `gen` (it must be live). */
  generation(gen: number): JournalInfo {
    const first = this.generations[0].gen;
    const info = this.generations[gen - first];
    if (info !== undefined && info.gen === gen) return info;
    // Generations can skip one: recovery removes a journal whose creation a crash cut short (or,
    // with repair, skips a damaged one) and starts the next generation after it.
    const found = this.generations.find((journal) => journal.gen === gen);
    assert(found !== undefined, "JournalState.generation: the generation is live");
    return found;
  }
}

/**
 * The partition logs and the topics. Owner: whoever first names a partition creates its log —
 * journal_writer.ts (an append), recovery.ts (replay), store.ts; the sorter writes `oversized`
 * (the writer adds to it). Read by the sorter, the reader (new partitions by index, `layout`),
 * manifest.ts (a rewrite lists every file) and store.ts (retention, stats).
 *
 * Topics by id. An append may name its topic by the caller's ids too (the broker's topic table:
 * topic and partition ids). Its entry is then found in `heldById` — no string is hashed — and a
 * topic new to the store enters no table by name on the append path: its entry waits in
 * `unfiled`. A name may then have two entries or more (one by name: recovery, a file's counts,
 * retention; one per id it had), and what the directory holds of it is their sum: only
 * `topicsHeld` (stats) reads counts, and it files every waiting entry first (merging it into the
 * name's entry). A slot whose id now names another topic (the table reclaimed and reused it) is
 * told by the name (`held.topic`): nothing needs to hear of a reclaim. Past one waiting entry
 * per id (ids reused, UNFILED_SLACK), each new one files a few of the oldest: entries stay
 * bounded by the ids and the names. A partition id's log is checked against the topic's name
 * before use, so ids of another table cannot misplace a record.
 */
export class Partitions {
  readonly byName = new Map<string, PartitionLog>();
  /**
   * Every topic filed, by name (never removed: entries never go stale). Read through
   * `topicHeld` and `topicsHeld` (which files the entries appended by id first).
   */
  private readonly topics = new Map<string, TopicHeld>();
  /** Entries by the appender's topic id (see "Topics by id"); a slot may be stale. */
  private readonly heldById: (TopicHeld | undefined)[] = [];
  /** Logs by the appender's partition id, and what their topics' names start with (its name/). */
  private readonly logById: (PartitionLog | undefined)[] = [];
  private readonly belowById: string[] = [];
  /**
   * Entries made by id and not yet in `topics`, with their ids (unfiledIds[i] of unfiled[i]),
   * from unfiledHead on.
   */
  private unfiled: TopicHeld[] = [];
  private unfiledIds: number[] = [];
  private unfiledHead = 0;
  /** Partitions in creation order: readers pick up new ones by index. */
  readonly list: PartitionLog[] = [];
  /** Bumped with every partition's layout version (see PartitionLog): any change of any one. */
  readonly layout = { version: 0 };
  /** Partitions whose pending bytes reached segmentBytesMax since the sorter last looked. */
  readonly oversized = new Set<PartitionLog>();

  /** The log of `partition`, created when new. */
  log(partition: string): PartitionLog {
    let log = this.byName.get(partition);
    if (log === undefined) {
      log = new PartitionLog(partition, this.layout);
      this.byName.set(partition, log);
      this.list.push(log);
    }
    return log;
  }

  /**
   * `topic`'s entry by name: its partition's log, and what the directory holds of it less what
   * its entries by id hold (see "Topics by id"). Created when new.
   */
  topicHeld(topic: string): TopicHeld {
    // Cached by topic: every append would otherwise cut a new partition string and hash it.
    let held = this.topics.get(topic);
    if (held === undefined) {
      held = { topic, log: this.log(partitionOf(topic)), messages: 0, bytes: 0 };
      this.topics.set(topic, held);
    }
    return held;
  }

  /**
   * `topic`'s entry found by the appender's ids (see "Topics by id"): `topicId` names `topic`
   * now, and `partitionId` its partition, both in one table of ids.
   */
  topicHeldById(topic: string, topicId: number, partitionId: number): TopicHeld {
    const held = this.heldById[topicId];
    if (held !== undefined && held.topic === topic) return held;
    return this.newHeldById(topic, topicId, partitionId);
  }

  /** Every topic's entry by name (the entries appended by id filed first). */
  topicsHeld(): ReadonlyMap<string, TopicHeld> {
    this.file(this.unfiled.length);
    return this.topics;
  }

  /** The log of `topic`'s partition. */
  logOfTopic(topic: string): PartitionLog {
    return this.topicHeld(topic).log;
  }

  private newHeldById(topic: string, topicId: number, partitionId: number): TopicHeld {
    let log = this.logById[partitionId];
    // The log is the topic's when the topic is its name or lies below it (PARTITION_SEGMENTS).
    if (
      log === undefined ||
      !(topic.startsWith(this.belowById[partitionId]) || topic === log.name)
    ) {
      log = this.log(partitionOf(topic));
      while (this.logById.length <= partitionId) {
        this.logById.push(undefined);
        this.belowById.push(NOTHING_BELOW);
      }
      this.logById[partitionId] = log;
      this.belowById[partitionId] = isFullPartition(log.name) ? `${log.name}/` : NOTHING_BELOW;
    }
    const held: TopicHeld = { topic, log, messages: 0, bytes: 0 };
    const heldById = this.heldById;
    while (heldById.length < topicId) heldById.push(undefined);
    if (topicId === heldById.length) heldById.push(held);
    else heldById[topicId] = held;
    this.unfiled.push(held);
    this.unfiledIds.push(topicId);
    if (this.unfiled.length - this.unfiledHead > heldById.length + UNFILED_SLACK)
      this.file(this.unfiledHead + FILED_PER_ENTRY);
    return held;
  }

  /**
   * Files the waiting entries up to index `end`: each goes in `topics`, or is merged into the
   * entry its name has there (and its id's slot, if still its own, points to that entry).
   */
  private file(end: number): void {
    const unfiled = this.unfiled;
    const ids = this.unfiledIds;
    for (let i = this.unfiledHead; i < end; i++) {
      const held = unfiled[i];
      const named = this.topics.get(held.topic);
      if (named === undefined) {
        this.topics.set(held.topic, held);
        continue;
      }
      named.messages += held.messages;
      named.bytes += held.bytes;
      if (this.heldById[ids[i]] === held) this.heldById[ids[i]] = named;
    }
    this.unfiledHead = end;
    if (end === unfiled.length) {
      this.unfiled = [];
      this.unfiledIds = [];
      this.unfiledHead = 0;
    } else if (end > 4096 && end * 4 > unfiled.length) {
      // The filed head is a quarter or more: dropped (a copy of the rest, amortised).
      this.unfiled = unfiled.slice(end);
      this.unfiledIds = ids.slice(end);
      this.unfiledHead = 0;
    }
  }
}

/** Waiting entries (context.ts, "Topics by id") allowed beyond one per id before filing starts. */
const UNFILED_SLACK = 1 << 16;
/** Waiting entries filed per new one past that: the oldest first. */
const FILED_PER_ENTRY = 4;

/** True when `partition` has PARTITION_SEGMENTS segments: topics below it are its own. */
function isFullPartition(partition: string): boolean {
  let slashes = 0;
  for (let i = 0; i < partition.length; i++) if (partition.charCodeAt(i) === CODE_SLASH) slashes++;
  return slashes === PARTITION_SEGMENTS - 1;
}

const CODE_SLASH = 0x2f;
/** What no topic starts with (a control character): no topic lies below a shorter partition. */
const NOTHING_BELOW = "\u0000";

/**
 * The closed files (segments, subtree stores, packs) in force: their ids, their packs' segment
 * counts, their per-topic counts. Owner: the sorter (closes segments) and store.ts (retention, a
 * split's switch), recovery.ts and manifest.ts at open. Read by manifest.ts (a rewrite) and
 * store.ts (stats, counting the uncounted files).
 */
export class FilesInForce {
  nextSegmentId = 1;
  /** Per-topic counts of the closed files in force that have them (manifest TOPICS records). */
  readonly fileCounts = new Map<number, readonly TopicCount[]>();
  /** Closed files in force without counts (older than TOPICS records): `countFiles` counts them. */
  readonly uncounted = new Set<number>();
  /** Segments in force per pack id: a pack's file is deleted when its count reaches 0. */
  readonly packSegments = new Map<number, number>();

  constructor(private readonly partitions: Partitions) {}

  /** Closed file `id` came into force holding `counts`: kept, and added to its topics (journal records it replaces are subtracted by the caller, if any). */
  count(id: number, counts: readonly TopicCount[], add: boolean): void {
    this.fileCounts.set(id, counts);
    this.uncounted.delete(id);
    if (!add) return;
    for (const count of counts) {
      const held = this.partitions.topicHeld(count.topic);
      held.messages += count.messages;
      held.bytes += count.bytes;
    }
  }

  /** Closed file `id` left force (retention, a split's switch): its counts, if known, leave its topics. */
  uncount(id: number): void {
    this.uncounted.delete(id);
    const counts = this.fileCounts.get(id);
    if (counts === undefined) return;
    this.fileCounts.delete(id);
    for (const count of counts) {
      const held = this.partitions.topicHeld(count.topic);
      held.messages -= count.messages;
      held.bytes -= count.bytes;
    }
  }

  /** `file` came into force (a close, recovery): its pack, if any, counts one more segment. */
  hold(file: SegmentMeta | SubtreeStoreMeta): void {
    if (!isSubtreeStore(file) && file.pack !== undefined)
      this.packSegments.set(file.pack.pack, (this.packSegments.get(file.pack.pack) ?? 0) + 1);
  }

  /**
   * `file` left force (retention, a split's switch): the paths to delete once no read is in
   * flight — its own files, or its pack when it was the last segment in force there.
   */
  release(file: SegmentMeta | SubtreeStoreMeta): string[] {
    if (isSubtreeStore(file) || file.pack === undefined)
      return [dataPathOf(file), indexPath(file.id)];
    const pack = file.pack.pack;
    const left = (this.packSegments.get(pack) ?? 0) - 1;
    assert(left >= 0, "FilesInForce.release: the pack held the segment");
    if (left > 0) {
      this.packSegments.set(pack, left);
      return [];
    }
    this.packSegments.delete(pack);
    return [packPath(pack)];
  }
}

/**
 * The manifest file's handle and size, its write lock, and the last split it records. Owner:
 * manifest.ts (opens, appends, rewrites), store.ts (closes it; sets `lastSplit` at a switch),
 * recovery.ts (`lastSplit` at open). Read by store.ts (stats, `lastSplit()`).
 */
export class ManifestState {
  file: DiskFile | null = null;
  bytes = 0;
  records = 0;
  /** What the last split did, as the manifest says (null: no split has switched). */
  lastSplit: SplitSummary | null = null;
  private lockTail: Promise<unknown> = Promise.resolve();

  /** Runs `work` after every earlier locked work has finished (manifest writes are serial). */
  locked<T>(work: () => Promise<T>): Promise<T> {
    const result = this.lockTail.then(work, work);
    this.lockTail = result.catch(() => {});
    return result;
  }
}

/**
 * Reads in flight and what waits for them. Owner: the reader (read/: counts its reads, its reads
 * ahead, the bytes it reads, the segment index cache) and store.ts (its own reads, deferring
 * removals). Read by store.ts (close waits for `prefetches`; stats).
 */
export class ReadState {
  inFlight = 0;
  /** Reads ahead in flight that no batch waits for (read/span_read.ts); close waits for them. */
  readonly prefetches = new Set<Promise<void>>();
  /** Bytes readers have read from data files (segments, subtree stores, journals): read amplification. */
  bytesRead = 0;
  /** Parsed segment indexes by id, least recently used first (null: unreadable, scan instead). */
  readonly indexes = new Map<number, SegmentIndex | null>();
  deferred: (() => Promise<void>)[] = [];

  /** Called after deferred removals ran (the store checks whether it is still backlogged). */
  afterDeferred: () => void = () => {};

  /** Runs `work` now if no read is in flight, else when the last one ends (files readers may hold). */
  async whenNoReads(work: () => Promise<void>): Promise<void> {
    if (this.inFlight === 0) await work();
    else this.deferred.push(work);
  }

  /**
   * Marks a read done; runs deferred removals once none is in flight. A removal that fails (a
   * file left behind, which the next open removes or retires) fails neither the read that
   * happened to end last nor the removals after it.
   */
  async done(): Promise<void> {
    this.inFlight--;
    if (this.inFlight > 0 || this.deferred.length === 0) return;
    const work = this.deferred;
    this.deferred = [];
    for (const run of work) await run().catch(() => {});
    this.afterDeferred();
  }
}

/** Shared state of one open store, grouped by owner (see the picture above). */
export class StoreContext {
  /** The open-file LRU every part reads and writes through. */
  readonly files: FileCache;
  /** The store's first failure: the journal writer, store.ts, spare_filler.ts set it; all read. */
  failure: StoreError | null = null;
  /** Set by store.ts's close; appends, reads and background work check it. */
  closed = false;
  readonly journal = new JournalState();
  readonly partitions = new Partitions();
  readonly inForce = new FilesInForce(this.partitions);
  readonly manifest = new ManifestState();
  readonly reads = new ReadState();

  constructor(
    readonly disk: Disk,
    readonly options: ResolvedOptions,
  ) {
    this.files = new FileCache(disk, options.openFilesMax);
  }

  get crc32(): Crc32 {
    return this.options.crc32;
  }
}
