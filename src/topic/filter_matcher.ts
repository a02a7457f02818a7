/**
 * FilterMatcher: matches topic ids against one filter in O(1) amortised, with a byte per id.
 * A matcher registers with its table's FilterIndex (filter_index.ts) until close(): every topic
 * interned from then on is matched by the index, which sets YES in the matchers that match, so a
 * new topic costs O(segments + matches) however many matchers exist, and an id interned after
 * registration with no answer set is a NO. Ids interned before registration are matched against
 * the filter on first sight and cached. Topic ids are dense and never reused, so the cache never
 * needs flushing. Also lists the partitions the filter touches, refreshed when new partitions
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
  /** Ids in [indexedFrom, indexedEnd) were interned while registered: the index decided them. */
  private readonly indexedFrom: number;
  private indexedEnd = Number.POSITIVE_INFINITY;

  constructor(
    readonly table: TopicTable,
    readonly filter: Filter,
  ) {
    this.indexedFrom = table.topicCount;
    table.filters.add(this);
  }

  /** True when topic `topicId` matches the filter. */
  matches(topicId: number): boolean {
    const answer = topicId < this.answers.length ? this.answers[topicId] : UNKNOWN;
    if (answer !== UNKNOWN) return answer === YES;
    if (topicId >= this.indexedFrom && topicId < this.indexedEnd) return false;
    const matched = this.filter.matches(this.table.topicName(topicId));
    if (topicId >= this.answers.length) this.grow(topicId);
    this.answers[topicId] = matched ? YES : NO;
    return matched;
  }

  /** The index found that topic `topicId`, just interned, matches (topic_table.ts calls it). */
  matched(topicId: number): void {
    if (topicId >= this.answers.length) this.grow(topicId);
    this.answers[topicId] = YES;
  }

  /** Unregisters from the table's index (the subscription ended); answers stay readable. */
  close(): void {
    if (this.indexedEnd !== Number.POSITIVE_INFINITY) return;
    this.indexedEnd = this.table.topicCount;
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

  private grow(topicId: number): void {
    let length = this.answers.length;
    while (length <= topicId) length *= 2;
    const grown = new Uint8Array(length);
    grown.set(this.answers);
    this.answers = grown;
  }
}
