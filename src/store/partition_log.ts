/**
 * PartitionLog: what the store knows of one topic partition — its closed segments and the
 * records it has in the journal that are not yet sorted into a segment ("pending").
 *
 *   segments (closed, immutable files)       pending (journal positions, parallel typed arrays)
 *   [s1 .. s2][s3 .. s4] ... sortedThrough │ head ───────────────── tail
 *                                           │ seq/time/gen/position/bytes of each record
 *
 * After a split, the partition's oldest data lives in subtree stores instead (`stores`: disjoint
 * topic sets, overlapping seq ranges, each seq-ordered); every segment then starts after the
 * last seq of every store, so "stores, then segments, then pending" is still the whole history.
 *
 * Invariants: segments are in increasing, disjoint seq ranges, all <= sortedThrough; pending
 * seqs increase and are all > sortedThrough; `version` changes whenever a segment or pending
 * record goes away, so a reader positioned in this partition knows to seek again.
 */
import { assert } from "../stdx/assert.ts";
import type { SegmentMeta } from "./segment_index.ts";
import type { SubtreeStoreMeta } from "./store_file.ts";

const PENDING_CAPACITY_INITIAL = 16;

/** One partition's closed segments and journal-resident records. */
export class PartitionLog {
  segments: SegmentMeta[] = [];
  /** Subtree stores in force (split output), by id. */
  stores: SubtreeStoreMeta[] = [];
  /** Highest seq of this partition ever sorted into a segment (0: none). */
  sortedThrough = 0;
  version = 0;
  pendingSeqs = new Float64Array(PENDING_CAPACITY_INITIAL);
  pendingTimes = new Float64Array(PENDING_CAPACITY_INITIAL);
  pendingGens = new Float64Array(PENDING_CAPACITY_INITIAL);
  pendingPositions = new Float64Array(PENDING_CAPACITY_INITIAL);
  pendingLengths = new Uint32Array(PENDING_CAPACITY_INITIAL);
  pendingHead = 0;
  pendingTail = 0;
  pendingBytes = 0;

  constructor(readonly name: string) {}

  /** Records in the journal not yet in a segment. */
  get pendingCount(): number {
    return this.pendingTail - this.pendingHead;
  }

  /** Seq of the newest record of this partition (0: none). */
  get lastSeq(): number {
    if (this.pendingTail > this.pendingHead) return this.pendingSeqs[this.pendingTail - 1];
    return this.sortedThrough;
  }

  /** Bytes of closed segments. */
  segmentBytes(): number {
    let total = 0;
    for (const segment of this.segments) total += segment.bytes;
    return total;
  }

  /** Notes a journal record of this partition. */
  addPending(seq: number, timeUs: number, gen: number, position: number, length: number): void {
    assert(seq > this.lastSeq, "partition_log: pending seqs must increase");
    if (this.pendingTail === this.pendingSeqs.length) this.makeRoom();
    const i = this.pendingTail++;
    this.pendingSeqs[i] = seq;
    this.pendingTimes[i] = timeUs;
    this.pendingGens[i] = gen;
    this.pendingPositions[i] = position;
    this.pendingLengths[i] = length;
    this.pendingBytes += length;
  }

  /** Index of the first pending record with seq > `seq` (pendingTail when none). */
  pendingAfter(seq: number): number {
    let lo = this.pendingHead;
    let hi = this.pendingTail;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.pendingSeqs[mid] <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Records a closed segment holding pending[head, end): they leave the pending list. */
  closeSegment(segment: SegmentMeta, end: number): void {
    assert(end > this.pendingHead && end <= this.pendingTail, "partition_log: close range out of bounds");
    assert(segment.lastSeq === this.pendingSeqs[end - 1], "partition_log: segment ends at the last closed record");
    for (let i = this.pendingHead; i < end; i++) this.pendingBytes -= this.pendingLengths[i];
    this.pendingHead = end;
    // Give back what a burst grew: the arrays shrink when at most a quarter of them is in use.
    if (this.pendingSeqs.length > PENDING_CAPACITY_INITIAL * 4 && this.pendingCount * 4 <= this.pendingSeqs.length) {
      this.resize(Math.max(PENDING_CAPACITY_INITIAL, this.pendingCount * 2));
    }
    this.segments.push(segment);
    this.sortedThrough = segment.lastSeq;
    this.version++;
  }

  /** Bytes of subtree stores. */
  storeBytes(): number {
    let total = 0;
    for (const store of this.stores) total += store.bytes;
    return total;
  }

  /** Applies a split's switch: segments and stores of `removed` go, `added` stores come. */
  swap(removed: ReadonlySet<number>, added: readonly SubtreeStoreMeta[]): void {
    this.segments = this.segments.filter((segment) => !removed.has(segment.id));
    this.stores = this.stores.filter((store) => !removed.has(store.id)).concat(added);
    let storesThrough = 0;
    for (const store of this.stores) storesThrough = Math.max(storesThrough, store.lastSeq);
    assert(this.segments.length === 0 || this.segments[0].firstSeq > storesThrough, "partition_log: segments follow the stores");
    this.sortedThrough = Math.max(this.sortedThrough, storesThrough);
    this.version++;
  }

  /** Forgets segment `id` (retention removed it). */
  removeSegment(id: number): void {
    this.segments = this.segments.filter((segment) => segment.id !== id);
    this.version++;
  }

  private makeRoom(): void {
    const count = this.pendingTail - this.pendingHead;
    this.resize(count * 2 < this.pendingSeqs.length ? this.pendingSeqs.length : this.pendingSeqs.length * 2);
  }

  /** Moves the pending records to the front of arrays of `capacity` (new ones when it differs). */
  private resize(capacity: number): void {
    const count = this.pendingTail - this.pendingHead;
    const move = <T extends Float64Array | Uint32Array>(from: T, make: (n: number) => T): T => {
      const to = capacity === from.length ? from : make(capacity);
      to.set(from.subarray(this.pendingHead, this.pendingTail), 0);
      return to;
    };
    this.pendingSeqs = move(this.pendingSeqs, (n) => new Float64Array(n));
    this.pendingTimes = move(this.pendingTimes, (n) => new Float64Array(n));
    this.pendingGens = move(this.pendingGens, (n) => new Float64Array(n));
    this.pendingPositions = move(this.pendingPositions, (n) => new Float64Array(n));
    this.pendingLengths = move(this.pendingLengths, (n) => new Uint32Array(n));
    this.pendingHead = 0;
    this.pendingTail = count;
    // Readers hold pending indexes between batches: they must look their position up again.
    this.version++;
  }
}
