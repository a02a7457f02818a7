/**
 * TopicTable: interns topic and partition names as dense integer ids, so hot paths index typed
 * arrays instead of hashing strings. Ids are handed out 0, 1, 2, … up to topicsMax; once the
 * table is full, the ids of topics that have no record left in the tip or the store (retention
 * removed them) are reclaimed and handed out again. Partitions are never reclaimed.
 *
 *   topic id ──partitionOfTopic──▶ partition id ──partitionName──▶ "app/codestore"
 *
 * Interning a new topic also tells the matchers registered in `filters` that match it (one walk
 * of the index, filter_index.ts), so none has to test the new name itself — no walk at all when
 * the index says none can match a topic of its partition (remembered per partition id).
 *
 * Reclaim. Every id carries the newest seq of a record of its topic the server holds
 * (`lastSeq`: the tip's appends and the store's reads set it). The broker says below which seq
 * nothing is held any more (`reclaimBelow`: the tip's and the store's oldest seqs); an id whose
 * lastSeq is below that names a topic no reader can meet again. When a new topic finds the table
 * full and no free id, one bounded step scans ids from where the last one stopped and releases
 * those it finds in one batch (`reclaimScanIds`, `reclaimBatchIds`: no step pauses for long with
 * millions of ids). A batch is an epoch: caches by id hear it through `onReclaim` (one listener
 * per cache: the fan-out lists, delivery's topic bytes, the sequencer's counts) or, for the many
 * matchers, read `reclaimEpoch` and `reclaimedSince` on their next use (filter_matcher.ts).
 *
 * Invariants: topicCount <= topicsMax, partitionCount <= PARTITIONS_MAX; a free id has no name
 * and no record in the tip; every id a reader can meet (a record held, a caller between intern
 * and use) has lastSeq >= reclaimBelow(), so it is never released under it.
 */
import { PARTITION_SEGMENTS, PARTITIONS_MAX, TOPICS_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { FilterIndex } from "./filter_index.ts";
import type { FilterMatcher } from "./filter_matcher.ts";
import { validateTopic } from "./topic.ts";

const CAPACITY_INITIAL = 1024;
/** The name slot of a free id ("" is never a valid topic). */
const FREE = "";
/** Ids one reclaim step looks at: a compare each, well under a millisecond. */
const RECLAIM_SCAN_IDS = 1 << 18;
/**
 * Ids one step releases: a map delete each (~1.5 µs in a table of millions on a loaded machine),
 * plus every listener's slot, so a step stays well under 50 ms (bench/topic_reclaim.ts).
 */
const RECLAIM_BATCH_IDS = 1 << 12;
/** Epochs whose ids stay listed for matchers catching up (1 MiB); older ones reset whole. */
const RECLAIM_LOG_EPOCHS = 64;
/** Slots of the partition cache (a power of two): 8 KiB of names and ids. */
const PARTITION_SLOTS = 1024;
const CODE_SLASH = 0x2f;

/** The result of interning: the topic id, or why the name cannot be interned. */
export type InternResult = { ok: true; topicId: number } | { ok: false; reason: string };

/** Told each new topic's id with the registered matchers that match it (the index's walk). */
export type InternListener = (topicId: number, matched: readonly FilterMatcher[]) => void;

/** Told the ids of a reclaimed batch (their names already forgotten); clears its slots. */
export type ReclaimListener = (topicIds: Int32Array) => void;

/** Counts of a table, for metrics and /healthz. */
export interface TopicStats {
  /** Topics interned. */
  known: number;
  /** The most it may intern. */
  max: number;
  /** New topics refused because the table was full, since start. */
  refused: number;
}

/** Sizes of a table; tests shrink them. */
export interface TopicTableOptions {
  /** The most topics held at once (TOPICS_MAX). */
  topicsMax?: number;
  /** Ids one reclaim step looks at. */
  reclaimScanIds?: number;
  /** Ids one reclaim step releases at most. */
  reclaimBatchIds?: number;
}

/** Dense ids for topics and partitions. */
export class TopicTable {
  /** The most topics this table interns (TOPICS_MAX; tests shrink it). */
  readonly topicsMax: number;
  /** New topics refused at topicsMax, since start. */
  topicsRefused = 0;
  /** Ids reclaimed, since start. */
  topicsReclaimed = 0;
  /** Bumped by each reclaimed batch: a cache that saw another epoch clears what it names. */
  reclaimEpoch = 0;
  private readonly topicIds = new Map<string, number>();
  private readonly partitionIds = new Map<string, number>();
  private readonly topicNames: string[] = [];
  private readonly partitionNames: string[] = [];
  /**
   * The partition cache: a partition's name and id in the slot its characters hash to (FREE:
   * none), so that a new topic of a known partition finds its id without cutting the
   * partition's name out and hashing it. Partitions are never reclaimed: an entry never goes
   * stale. `partitionEnd` and `partitionSlot` are cachedPartition's other results.
   */
  private readonly partitionSlotNames: string[] = new Array<string>(PARTITION_SLOTS).fill(FREE);
  private readonly partitionSlotIds = new Int32Array(PARTITION_SLOTS);
  private partitionEnd = 0;
  private partitionSlot = 0;
  /** Per partition id: the index's version + 1 when mayMatchIn was answered (0: never), and the answer. */
  private mayMatchVersions = new Float64Array(CAPACITY_INITIAL);
  private mayMatchAnswers = new Uint8Array(CAPACITY_INITIAL);
  private partitionByTopic = new Int32Array(CAPACITY_INITIAL);
  private lastSeqByTopic = new Float64Array(CAPACITY_INITIAL);
  private stampByTopic = new Float64Array(CAPACITY_INITIAL);
  /** Interns of a new name so far: the stamp the next one gets. */
  private stamp = 0;
  private readonly freeIds: number[] = [];
  private horizon: (() => number) | null = null;
  private readonly listeners: ReclaimListener[] = [];
  private readonly internListeners: InternListener[] = [];
  /** The ids of the last RECLAIM_LOG_EPOCHS epochs; log[i] is epoch reclaimEpoch - length + 1 + i. */
  private readonly log: Int32Array[] = [];
  /** Where the next reclaim step looks, and what the pass it belongs to found. */
  private sweepAt = 0;
  private passBelow = 0;
  private passFound = 0;
  /** A whole pass found nothing below this: no step runs until the horizon passes it. */
  private idleBelow = 0;
  private readonly scanIds: number;
  private readonly batchIds: number;
  /** The open matchers of this table's topics (they register themselves). */
  readonly filters = new FilterIndex<FilterMatcher>();
  private readonly matched: FilterMatcher[] = [];

  constructor(options: TopicTableOptions = {}) {
    this.topicsMax = options.topicsMax ?? TOPICS_MAX;
    this.scanIds = options.reclaimScanIds ?? RECLAIM_SCAN_IDS;
    this.batchIds = options.reclaimBatchIds ?? RECLAIM_BATCH_IDS;
    assert(this.topicsMax >= 1 && this.topicsMax <= TOPICS_MAX, "TopicTable: topicsMax in range");
    assert(this.scanIds >= 1 && this.batchIds >= 1, "TopicTable: reclaim steps do work");
  }

  /** Topics known, the limit, and new topics refused at it. */
  stats(): TopicStats {
    return {
      known: this.topicNames.length - this.freeIds.length,
      max: this.topicsMax,
      refused: this.topicsRefused,
    };
  }

  /** Ids handed out so far (every id is below it; some may be free); grows only. */
  get topicCount(): number {
    return this.topicNames.length;
  }

  /** Number of partitions interned so far; grows only. */
  get partitionCount(): number {
    return this.partitionNames.length;
  }

  /**
   * The id of `name`, interning it (and its partition) when new. `seq`, when given, is a record
   * of the topic the caller will read or write with this id: the id is not reclaimed under it.
   */
  intern(name: string, seq = 0): InternResult {
    const known = this.topicIds.get(name);
    if (known !== undefined) {
      if (seq > this.lastSeqByTopic[known]) this.lastSeqByTopic[known] = seq;
      return { ok: true, topicId: known };
    }
    const reason = validateTopic(name);
    if (reason !== null) return { ok: false, reason };
    return this.internNew(name, seq);
  }

  /**
   * As intern, for a name validated already (a PUBLISH frame's topics are, by the decoder's
   * TopicCache): a new topic costs one validation, not two.
   */
  internValidated(name: string, seq: number): InternResult {
    const known = this.topicIds.get(name);
    if (known !== undefined) {
      if (seq > this.lastSeqByTopic[known]) this.lastSeqByTopic[known] = seq;
      return { ok: true, topicId: known };
    }
    return this.internNew(name, seq);
  }

  private internNew(name: string, seq: number): InternResult {
    let partitionId = this.cachedPartition(name);
    let partition: string | null = null;
    if (partitionId < 0) {
      partition = name.slice(0, this.partitionEnd); // partitionOf(name)
      partitionId = this.partitionIds.get(partition) ?? -1;
      if (partitionId < 0 && this.partitionNames.length >= PARTITIONS_MAX)
        return { ok: false, reason: `server holds ${PARTITIONS_MAX} partitions, the limit` };
    }
    const topicId = this.takeId();
    if (topicId < 0) {
      this.topicsRefused++;
      return { ok: false, reason: `server holds ${this.topicsMax} topics, the limit` };
    }
    if (partition !== null) {
      if (partitionId < 0) {
        partitionId = this.partitionNames.length;
        this.partitionNames.push(partition);
        this.partitionIds.set(partition, partitionId);
      }
      this.partitionSlotNames[this.partitionSlot] = partition;
      this.partitionSlotIds[this.partitionSlot] = partitionId;
    }
    this.partitionByTopic[topicId] = partitionId;
    this.lastSeqByTopic[topicId] = seq;
    this.stampByTopic[topicId] = this.stamp++;
    this.topicNames[topicId] = name;
    this.topicIds.set(name, topicId);
    if (this.filters.size > 0) this.tellMatchers(name, topicId, partitionId);
    return { ok: true, topicId };
  }

  /**
   * The id of `name`'s partition if the partition cache holds it, else -1; either way sets
   * `partitionEnd` (the partition's length: its name is name.slice(0, partitionEnd), as
   * partitionOf says) and `partitionSlot` (its slot). The slot comes from a hash of the
   * partition's characters, computed while looking for its end: no string is cut or hashed.
   */
  private cachedPartition(name: string): number {
    let hash = 0;
    let end = name.length;
    let slashes = 0;
    for (let i = 0; i < name.length; i++) {
      const code = name.charCodeAt(i);
      if (code === CODE_SLASH && ++slashes === PARTITION_SEGMENTS) {
        end = i;
        break;
      }
      hash = (Math.imul(hash, 31) + code) | 0;
    }
    const slot = hash & (PARTITION_SLOTS - 1);
    this.partitionEnd = end;
    this.partitionSlot = slot;
    const cached = this.partitionSlotNames[slot];
    return cached.length === end && name.startsWith(cached) ? this.partitionSlotIds[slot] : -1;
  }

  /** Interns a name the caller knows to be valid; asserts that it is. */
  internValid(name: string): number {
    const result = this.intern(name);
    assert(result.ok, "internValid: topic name is valid");
    return result.topicId;
  }

  /** A record of topic `topicId` with seq `seq` is held (the tip appended it). */
  seen(topicId: number, seq: number): void {
    if (seq > this.lastSeqByTopic[topicId]) this.lastSeqByTopic[topicId] = seq;
  }

  /** The id of `name`, or -1 when it is not interned. */
  lookup(name: string): number {
    return this.topicIds.get(name) ?? -1;
  }

  /** The id of partition `name`, or -1 when no topic of it was interned. */
  lookupPartition(name: string): number {
    return this.partitionIds.get(name) ?? -1;
  }

  /** The name of topic `topicId`. */
  topicName(topicId: number): string {
    assert(topicId >= 0 && topicId < this.topicNames.length, "topicName: id in range");
    const name = this.topicNames[topicId];
    assert(name !== FREE, "topicName: id is interned");
    return name;
  }

  /** The stamp of the intern that gave `topicId` its current name (interns count up). */
  internedAt(topicId: number): number {
    return this.stampByTopic[topicId];
  }

  /** The stamp the next new name gets: every id interned so far has a lower one. */
  get internStamp(): number {
    return this.stamp;
  }

  /** The partition id of topic `topicId`. */
  partitionOfTopic(topicId: number): number {
    assert(topicId >= 0 && topicId < this.topicNames.length, "partitionOfTopic: id in range");
    return this.partitionByTopic[topicId];
  }

  /** The name of partition `partitionId`. */
  partitionName(partitionId: number): string {
    assert(
      partitionId >= 0 && partitionId < this.partitionNames.length,
      "partitionName: id in range",
    );
    return this.partitionNames[partitionId];
  }

  /**
   * The topic → partition map as a typed array, valid for ids below topicCount. Hot loops read it
   * directly; fetch it again after interning, since growing replaces the array.
   */
  partitionsByTopic(): Int32Array {
    return this.partitionByTopic;
  }

  /**
   * Lets ids be reclaimed: `horizon()` is the oldest seq still held anywhere (0: none may be).
   * One caller (the broker's sequencer) sets it.
   */
  reclaimBelow(horizon: () => number): void {
    this.horizon = horizon;
  }

  /**
   * Registers a cache to be told each new topic with the matchers the index found for it, so it
   * needs no walk of its own (the fan-out lists); told only while some matcher is registered.
   */
  onIntern(listener: InternListener): void {
    this.internListeners.push(listener);
  }

  /** Registers a cache to be told each reclaimed batch. */
  onReclaim(listener: ReclaimListener): void {
    this.listeners.push(listener);
  }

  /**
   * The batches reclaimed after epoch `epoch` (oldest first), or null when some are no longer
   * listed: the caller then forgets every answer it holds.
   */
  reclaimedSince(epoch: number): readonly Int32Array[] | null {
    const behind = this.reclaimEpoch - epoch;
    if (behind > this.log.length) return null;
    return this.log.slice(this.log.length - behind);
  }

  /**
   * One bounded reclaim step: looks at up to reclaimScanIds ids from where the last step stopped
   * and releases those whose topic holds no record (at most reclaimBatchIds) as one epoch.
   * Returns the ids released. Runs by itself when a new topic finds the table full.
   */
  reclaim(): number {
    if (this.horizon === null) return 0;
    const below = this.horizon();
    if (below <= this.idleBelow) return 0;
    const end = this.topicNames.length;
    if (end === 0) return 0;
    const names = this.topicNames;
    const lastSeq = this.lastSeqByTopic;
    const found: number[] = [];
    let at = this.sweepAt;
    // At most one look at each id per step (found ids are released only after the loop).
    const scanIds = Math.min(this.scanIds, end);
    for (let scanned = 0; scanned < scanIds && found.length < this.batchIds; scanned++) {
      if (at === 0) {
        this.passBelow = below;
        this.passFound = 0;
      }
      if (names[at] !== FREE && lastSeq[at] < below) found.push(at);
      if (++at === end) {
        at = 0;
        // A whole pass without finding anything: idle until the horizon moves past its start.
        if (this.passFound + found.length === 0) {
          this.idleBelow = this.passBelow;
          break;
        }
      }
    }
    this.sweepAt = at;
    this.passFound += found.length;
    if (found.length > 0) this.release(Int32Array.from(found));
    return found.length;
  }

  /** A free id, a new one below topicsMax, or one a reclaim step frees; -1 when none is. */
  private takeId(): number {
    const free = this.freeIds;
    if (free.length > 0) return free.pop() as number;
    const topicId = this.topicNames.length;
    if (topicId < this.topicsMax) {
      if (topicId === this.partitionByTopic.length) this.grow();
      this.topicNames.push(FREE);
      return topicId;
    }
    if (this.reclaim() === 0) return -1;
    return free.pop() as number;
  }

  private release(ids: Int32Array): void {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      this.topicIds.delete(this.topicNames[id]);
      this.topicNames[id] = FREE;
      this.lastSeqByTopic[id] = 0;
    }
    this.reclaimEpoch++;
    this.log.push(ids);
    if (this.log.length > RECLAIM_LOG_EPOCHS) this.log.shift();
    this.topicsReclaimed += ids.length;
    for (const listener of this.listeners) listener(ids);
    // Reused lowest first (popped from the end), so ids stay as dense as they can.
    for (let i = ids.length - 1; i >= 0; i--) this.freeIds.push(ids[i]);
  }

  private grow(): void {
    const length = this.partitionByTopic.length * 2;
    const partitions = new Int32Array(length);
    partitions.set(this.partitionByTopic);
    this.partitionByTopic = partitions;
    const lastSeq = new Float64Array(length);
    lastSeq.set(this.lastSeqByTopic);
    this.lastSeqByTopic = lastSeq;
    const stamps = new Float64Array(length);
    stamps.set(this.stampByTopic);
    this.stampByTopic = stamps;
  }

  /**
   * False when no registered matcher can match a topic of partition `partitionId`
   * (FilterIndex.mayMatchIn), remembered per partition until the index changes.
   */
  private mayMatchIn(partitionId: number): boolean {
    const known = this.filters.version + 1; // 0: never asked
    if (partitionId >= this.mayMatchVersions.length) {
      let length = this.mayMatchVersions.length;
      while (length <= partitionId) length *= 2;
      const versions = new Float64Array(length);
      versions.set(this.mayMatchVersions);
      this.mayMatchVersions = versions;
      const answers = new Uint8Array(length);
      answers.set(this.mayMatchAnswers);
      this.mayMatchAnswers = answers;
    }
    if (this.mayMatchVersions[partitionId] !== known) {
      this.mayMatchAnswers[partitionId] = this.filters.mayMatchIn(this.partitionNames[partitionId])
        ? 1
        : 0;
      this.mayMatchVersions[partitionId] = known;
    }
    return this.mayMatchAnswers[partitionId] === 1;
  }

  /**
   * Sets the answer of topic `topicId` in every registered matcher whose filter matches it, and
   * hands the same walk's result to the intern listeners (none: the index says that no matcher
   * can match a topic of its partition, and there is no walk).
   */
  private tellMatchers(name: string, topicId: number, partitionId: number): void {
    const matched = this.matched;
    if (this.mayMatchIn(partitionId)) {
      this.filters.matching(name, matched);
      for (let i = 0; i < matched.length; i++) matched[i].matched(topicId);
    }
    for (const listener of this.internListeners) listener(topicId, matched);
    matched.length = 0;
  }
}
