/**
 * partition_read: PartitionRead, one partition's part of a read — a lane per subtree store
 * holding a matching topic (subtree stores holding none are never opened), and a lane for the
 * segments and journal records after them, merged by seq with a linear min (a filter matches few
 * subtree stores of a partition).
 *
 *   subtree store lane (app/a/**) ─┐
 *   subtree store lane (app/b/x)  ─┼─ min of next seqs ─▶ headLane ─▶ the reader's merge
 *   segments + journal            ─┘
 *
 * When the partition's layout changes (a segment closed or retired, a split switched) the lanes
 * are rebuilt from the next seq the partition may yield, inheriting what the old ones had read.
 * Does no I/O itself but through `load`/`topUp` (its lanes'). Invariants: yielded seqs strictly
 * increase; at most one lane waits for a read (`loading`).
 */
import { assert } from "../../stdx/assert.ts";
import { type Filter, isUnder } from "../../topic/mod.ts";
import type { StoreContext } from "../context.ts";
import type { BorrowedMessage, DecodedRuns } from "../decoded_runs.ts";
import type { PartitionLog } from "../partition_log.ts";
import type { StoredMessage } from "../record.ts";
import type { SubtreeStoreMeta } from "../subtree_store_file.ts";
import type { BufferPool } from "./buffer_pool.ts";
import { Lane } from "./lane.ts";
import { NEEDS_READ } from "./lane_buffer.ts";
import type { SpanRequest } from "./span_read.ts";
import type { TopicCache } from "./topic_cache.ts";

/**
 * Where a read starts: at a seq, after a seq (resume), or at the first message at or after a time.
 */
export type ReadFrom = { seq: number } | { afterSeq: number } | { timeUs: number };

const MATCH_NONE = 0;
const MATCH_SOME = 1;
const MATCH_ALL = 2;

/** One partition's lanes, merged by seq. */
export class PartitionRead {
  version = -1;
  /** Next seq this partition may yield. */
  nextSeq: number;
  /** Until the first yield of a time-based read: skip records older than this. */
  timeFloor: number;
  private lanes: Lane[] = [];
  private headLane = -1;
  private loading: Lane | null = null;
  readonly matchesAll: boolean;

  constructor(
    readonly log: PartitionLog,
    private readonly filter: Filter,
    private readonly topics: TopicCache,
    from: ReadFrom,
    private readonly chunkBytes: number,
    private readonly subtreeMatches: Map<number, number>,
    private readonly pool: BufferPool | null,
    private readonly access: { sparse: boolean; firstReadBytes: number },
  ) {
    this.nextSeq = "seq" in from ? from.seq : "afterSeq" in from ? from.afterSeq + 1 : 1;
    this.timeFloor = "timeUs" in from ? from.timeUs : -Infinity;
    this.matchesAll = filter.entries.some(
      (entry) => entry.kind === "subtree" && isUnder(log.name, entry.prefix),
    );
  }

  /** The reader reads few of the store's partitions (see StoreReader.access). */
  get sparse(): boolean {
    return this.access.sparse;
  }

  /** Bytes of a new lane's first read (see StoreReader.access). */
  get firstReadBytes(): number {
    return this.access.firstReadBytes;
  }

  private rebuild(): void {
    this.version = this.log.version;
    const old = this.lanes;
    this.lanes = [];
    this.headLane = -1;
    const from = { nextSeq: this.nextSeq, timeFloor: this.timeFloor };
    for (const subtree of this.log.subtreeStores) {
      if (subtree.lastSeq < this.nextSeq) continue;
      const match = this.matchOf(subtree);
      if (match === MATCH_NONE) continue;
      this.lanes.push(
        new Lane(
          this.log,
          [subtree],
          false,
          this.topics,
          match === MATCH_ALL,
          from,
          this.chunkBytes,
          this,
          this.pool,
        ),
      );
    }
    this.lanes.push(
      new Lane(
        this.log,
        this.log.segments,
        true,
        this.topics,
        this.matchesAll,
        from,
        this.chunkBytes,
        this,
        this.pool,
      ),
    );
    // Keep what the old lanes read: a journal chunk or subtree store chunk is still valid bytes.
    for (const lane of old) {
      const heir = lane.withPending
        ? this.lanes[this.lanes.length - 1]
        : this.lanes.find((fresh) => !fresh.withPending && fresh.files[0].id === lane.files[0].id);
      if (heir !== undefined && heir.bufferPath === "" && lane.bufferPath !== "")
        heir.inherit(lane);
    }
  }

  /** Whether `subtree` holds none, some or only topics of the filter (cached per reader). */
  private matchOf(subtree: SubtreeStoreMeta): number {
    if (this.matchesAll) return MATCH_ALL;
    let match = this.subtreeMatches.get(subtree.id);
    if (match === undefined) {
      let count = 0;
      for (const topic of subtree.topics) if (this.filter.matches(topic)) count++;
      match = count === 0 ? MATCH_NONE : count === subtree.topics.length ? MATCH_ALL : MATCH_SOME;
      this.subtreeMatches.set(subtree.id, match);
    }
    return match;
  }

  /** The seq of the partition's next record to yield, Infinity for none yet, or NEEDS_READ. */
  advance(context: StoreContext, limit: number): number {
    if (this.version !== this.log.version) this.rebuild();
    let best = Infinity;
    let bestLane = -1;
    const lanes = this.lanes;
    for (let i = 0; i < lanes.length; i++) {
      const key = lanes[i].advance(context, limit);
      if (key === NEEDS_READ) {
        this.loading = lanes[i];
        return NEEDS_READ;
      }
      if (key < best) {
        best = key;
        bestLane = i;
      }
    }
    this.headLane = bestLane;
    return best;
  }

  /** The head as a message; the partition moves past it. */
  take(into: BorrowedMessage | null): StoredMessage {
    assert(this.headLane >= 0, "reader: take without a head");
    const message = this.lanes[this.headLane].take(into);
    this.nextSeq = message.seq + 1;
    this.headLane = -1;
    if (this.timeFloor > -Infinity) {
      // A time read yields everything after its first match: other lanes may have skipped older-
      // timed records beyond it (a clock stepped back), so they seek again by seq.
      this.timeFloor = -Infinity;
      if (this.lanes.length > 1) this.version = -1;
    }
    return message;
  }

  /**
   * Moves the head and the records after it into a run of `runs` (see Lane.decodeRun): only a
   * partition of one lane, past a time read's first message.
   */
  decodeRun(runs: DecodedRuns, source: number, limit: number): boolean {
    if (this.headLane !== 0 || this.lanes.length !== 1 || this.timeFloor !== -Infinity)
      return false;
    const lane = this.lanes[0];
    if (!lane.decodeRun(runs, source, limit)) return false;
    this.nextSeq = lane.nextSeq;
    return true;
  }

  /** Sets the partition back to the first record of its run not taken (its seq and file offset). */
  rewind(seq: number, position: number): void {
    assert(this.lanes.length === 1, "reader: rewind of a partition of several lanes");
    this.lanes[0].rewind(seq, position);
    this.headLane = -1;
    this.nextSeq = seq;
  }

  /**
   * True when a lane's head sits near the end of what it has read (see Lane.lowOnData), or a
   * lane could read its next image ahead with others (Lane.readsAheadEarly): the batch start
   * then offers its read to a span.
   */
  lowOnData(): boolean {
    for (const lane of this.lanes) if (lane.lowOnData() || lane.readsAheadEarly()) return true;
    return false;
  }

  /** Lanes whose next read could come from a span read, with their regions (see Lane.spanWant). */
  spanWants(into: SpanRequest[]): void {
    for (const lane of this.lanes) {
      if (lane.headAt < 0 && lane !== this.loading) continue;
      const want = lane.spanWant();
      if (want !== null) into.push({ lane, ...want });
    }
  }

  /** Tops up every lane low on data. */
  async topUp(context: StoreContext): Promise<void> {
    for (const lane of this.lanes) if (lane.lowOnData()) await lane.topUp(context);
  }

  /** Performs the read the last advance asked for. */
  load(context: StoreContext): Promise<void> {
    const lane = this.loading;
    assert(lane !== null, "reader: load without a request");
    this.loading = null;
    return lane.load(context);
  }
}

/** The next seq `part` may yield (Infinity: none yet), performing the reads it asks for. */
export async function advanceReading(
  context: StoreContext,
  part: PartitionRead,
  limit: number,
): Promise<number> {
  for (;;) {
    const key = part.advance(context, limit);
    if (key !== NEEDS_READ) return key;
    await part.load(context);
  }
}
