/**
 * TopicTable: interns topic and partition names as dense integer ids, so hot paths index typed
 * arrays instead of hashing strings. Ids are handed out 0, 1, 2, … and never reused or removed:
 * anything cached per id (filter matches, partition of a topic) stays valid when topics are added.
 *
 *   topic id ──partitionOfTopic──▶ partition id ──partitionName──▶ "app/codestore"
 *
 * Interning a new topic also tells the matchers registered in `filters` that match it (one walk
 * of the index, filter_index.ts), so none has to test the new name itself.
 *
 * Invariant: topicCount <= TOPICS_MAX, partitionCount <= PARTITIONS_MAX.
 */
import { PARTITIONS_MAX, TOPICS_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { FilterIndex } from "./filter_index.ts";
import type { FilterMatcher } from "./filter_matcher.ts";
import { partitionOf, validateTopic } from "./topic.ts";

const CAPACITY_INITIAL = 1024;

/** The result of interning: the topic id, or why the name cannot be interned. */
export type InternResult = { ok: true; topicId: number } | { ok: false; reason: string };

/** Counts of a table, for metrics and /healthz. */
export interface TopicStats {
  /** Topics interned. */
  known: number;
  /** The most it may intern. */
  max: number;
  /** New topics refused because the table was full, since start. */
  refused: number;
}

/** Dense ids for topics and partitions. */
export class TopicTable {
  /** The most topics this table interns (TOPICS_MAX; tests shrink it). */
  readonly topicsMax: number;
  /** New topics refused at topicsMax, since start. */
  topicsRefused = 0;
  private readonly topicIds = new Map<string, number>();
  private readonly partitionIds = new Map<string, number>();
  private readonly topicNames: string[] = [];
  private readonly partitionNames: string[] = [];
  private partitionByTopic = new Int32Array(CAPACITY_INITIAL);
  /** The open matchers of this table's topics (they register themselves). */
  readonly filters = new FilterIndex<FilterMatcher>();
  private readonly matched: FilterMatcher[] = [];

  constructor(options: { topicsMax?: number } = {}) {
    this.topicsMax = options.topicsMax ?? TOPICS_MAX;
    assert(this.topicsMax >= 1 && this.topicsMax <= TOPICS_MAX, "TopicTable: topicsMax in range");
  }

  /** Topics known, the limit, and new topics refused at it. */
  stats(): TopicStats {
    return { known: this.topicNames.length, max: this.topicsMax, refused: this.topicsRefused };
  }

  /** Number of topics interned so far; grows only. */
  get topicCount(): number {
    return this.topicNames.length;
  }

  /** Number of partitions interned so far; grows only. */
  get partitionCount(): number {
    return this.partitionNames.length;
  }

  /** The id of `name`, interning it (and its partition) when new. */
  intern(name: string): InternResult {
    const known = this.topicIds.get(name);
    if (known !== undefined) return { ok: true, topicId: known };
    const reason = validateTopic(name);
    if (reason !== null) return { ok: false, reason };
    if (this.topicNames.length >= this.topicsMax) {
      this.topicsRefused++;
      return { ok: false, reason: `server holds ${this.topicsMax} topics, the limit` };
    }
    const partition = partitionOf(name);
    let partitionId = this.partitionIds.get(partition);
    if (partitionId === undefined) {
      if (this.partitionNames.length >= PARTITIONS_MAX) {
        return { ok: false, reason: `server holds ${PARTITIONS_MAX} partitions, the limit` };
      }
      partitionId = this.partitionNames.length;
      this.partitionNames.push(partition);
      this.partitionIds.set(partition, partitionId);
    }
    const topicId = this.topicNames.length;
    if (topicId === this.partitionByTopic.length) {
      const grown = new Int32Array(this.partitionByTopic.length * 2);
      grown.set(this.partitionByTopic);
      this.partitionByTopic = grown;
    }
    this.partitionByTopic[topicId] = partitionId;
    this.topicNames.push(name);
    this.topicIds.set(name, topicId);
    if (this.filters.size > 0) this.tellMatchers(name, topicId);
    return { ok: true, topicId };
  }

  /** Interns a name the caller knows to be valid; asserts that it is. */
  internValid(name: string): number {
    const result = this.intern(name);
    assert(result.ok, "internValid: topic name is valid");
    return result.topicId;
  }

  /** The id of `name`, or -1 when it was never interned. */
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
    return this.topicNames[topicId];
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

  /** Sets the answer of topic `topicId` in every registered matcher whose filter matches it. */
  private tellMatchers(name: string, topicId: number): void {
    const matched = this.matched;
    this.filters.matching(name, matched);
    for (let i = 0; i < matched.length; i++) matched[i].matched(topicId);
    matched.length = 0;
  }
}
