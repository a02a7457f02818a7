/**
 * FilterMatcher: matches topic ids against one filter in O(1) amortised, with a byte per id.
 * A matcher registers with its table's FilterIndex (filter_index.ts) until close(): every topic
 * interned from then on is matched by the index, which sets YES in the matchers that match, so a
 * new topic costs O(segments + matches) however many matchers exist, and an id interned while
 * registered with no answer set is a NO. Other ids are matched against the filter on first sight
 * and cached. "Interned while registered" compares the id's intern stamp (topic_table.ts), not
 * the id, since a reclaimed id is handed out again.
 *
 * Reclaimed ids: before any read or write of an answer, a matcher that saw an older reclaim
 * epoch clears the answers of the ids reclaimed since (or, too far behind, all of them, and then
 * decides every id interned so far by the filter again), so an answer is never one for an id's
 * previous name. Also lists the partitions the filter touches, refreshed when new partitions
 * appear. Pure.
 */
import type { Filter } from "./filter.ts";
import type { TopicTable } from "./topic_table.ts";

const UNKNOWN = 0;
const NO = 1;
const YES = 2;

/** Matches topic ids of one table against one filter. */
export class FilterMatcher {
  private answers = new Uint8Array(256);
  private partitionList = new Int32Array(0);
  private partitionsSeen = 0;
  /** Ids whose intern stamp is in [indexedFrom, indexedEnd) were decided by the index. */
  private indexedFrom: number;
  private indexedEnd = Number.POSITIVE_INFINITY;
  /** The table's reclaim epoch the answers are up to date with. */
  private epoch: number;

  constructor(
    readonly table: TopicTable,
    readonly filter: Filter,
  ) {
    this.indexedFrom = table.internStamp;
    this.epoch = table.reclaimEpoch;
    table.filters.add(this);
  }

  /** True when topic `topicId` matches the filter. */
  matches(topicId: number): boolean {
    if (this.epoch !== this.table.reclaimEpoch) this.forgetReclaimed();
    const answer = topicId < this.answers.length ? this.answers[topicId] : UNKNOWN;
    if (answer !== UNKNOWN) return answer === YES;
    const stamp = this.table.internedAt(topicId);
    if (stamp >= this.indexedFrom && stamp < this.indexedEnd) return false;
    const matched = this.filter.matches(this.table.topicName(topicId));
    if (topicId >= this.answers.length) this.grow(topicId);
    this.answers[topicId] = matched ? YES : NO;
    return matched;
  }

  /** The index found that topic `topicId`, just interned, matches (topic_table.ts calls it). */
  matched(topicId: number): void {
    if (this.epoch !== this.table.reclaimEpoch) this.forgetReclaimed();
    if (topicId >= this.answers.length) this.grow(topicId);
    this.answers[topicId] = YES;
  }

  /** Unregisters from the table's index (the subscription ended); answers stay readable. */
  close(): void {
    if (this.indexedEnd !== Number.POSITIVE_INFINITY) return;
    this.indexedEnd = this.table.internStamp;
    this.table.filters.remove(this);
  }

  /** Ids of the known partitions that may hold matching topics, ascending. */
  partitions(): Int32Array {
    const count = this.table.partitionCount;
    if (count !== this.partitionsSeen) {
      // Partition ids only grow, so only the new ones need a look; appending keeps the order.
      const ids = Array.from(this.partitionList);
      for (let id = this.partitionsSeen; id < count; id++) {
        if (this.filter.touchesPartition(this.table.partitionName(id))) ids.push(id);
      }
      this.partitionList = Int32Array.from(ids);
      this.partitionsSeen = count;
    }
    return this.partitionList;
  }

  /** Clears the answers of ids reclaimed since this matcher's epoch. */
  private forgetReclaimed(): void {
    const batches = this.table.reclaimedSince(this.epoch);
    this.epoch = this.table.reclaimEpoch;
    const answers = this.answers;
    if (batches === null) {
      // Too far behind to know which: forget everything, and let the filter decide every id
      // interned so far (the YES answers the index gave are gone with the rest).
      answers.fill(UNKNOWN);
      this.indexedFrom = this.table.internStamp;
      return;
    }
    for (const ids of batches)
      for (let i = 0; i < ids.length; i++) if (ids[i] < answers.length) answers[ids[i]] = UNKNOWN;
  }

  private grow(topicId: number): void {
    let length = this.answers.length;
    while (length <= topicId) length *= 2;
    const grown = new Uint8Array(length);
    grown.set(this.answers);
    this.answers = grown;
  }
}
