/**
 * FilterMatcher: matches topic ids against one filter in O(1) amortised. The answer for each
 * topic id is computed from its name once and cached in a byte per id; since topic ids are dense
 * and never reused, a new topic simply has no cached answer yet (state UNKNOWN), so the cache
 * never needs flushing. Also lists the partitions the filter touches, refreshed when new
 * partitions appear. Pure.
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

  constructor(
    readonly table: TopicTable,
    readonly filter: Filter,
  ) {}

  /** True when topic `topicId` matches the filter. */
  matches(topicId: number): boolean {
    if (topicId >= this.answers.length) this.grow(topicId);
    let answer = this.answers[topicId];
    if (answer === UNKNOWN) {
      answer = this.filter.matches(this.table.topicName(topicId)) ? YES : NO;
      this.answers[topicId] = answer;
    }
    return answer === YES;
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

  private grow(topicId: number): void {
    let length = this.answers.length;
    while (length <= topicId) length *= 2;
    const grown = new Uint8Array(length);
    grown.set(this.answers);
    this.answers = grown;
  }
}
