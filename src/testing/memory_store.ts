/**
 * MemoryStore: an in-memory stand-in for the durable store, for broker tests and the simulator.
 * It keeps every message in an array, commits when told (or on the next microtask), and reads
 * committed messages in seq order in small batches — the same contract as src/store's Store,
 * with none of the disk. `holdCommits` lets a test keep messages unacknowledged on purpose;
 * `retainFrom` removes the oldest messages as retention would.
 */
import type { BrokerStore, StoredMessageLike } from "../broker/ports.ts";
import type { Filter } from "../topic/filter.ts";

/** An in-memory BrokerStore. */
export class MemoryStore implements BrokerStore {
  readonly messages: StoredMessageLike[] = [];
  nextSeq = 1;
  /** Every seq below this was removed by `retainFrom` (messages[0] has this seq when held). */
  firstSeqHeld = 1;
  committedSeq = 0;
  /** While true, commit() waits until release() is called. */
  holdCommits = false;
  private waiting: (() => void)[] = [];

  /** Tests set this to make the broker see a store that is behind; `catchUp()` clears it. */
  backlogged = false;
  private catchUpWaiters: (() => void)[] = [];

  constructor(private readonly batchMessagesMax = 7) {}

  whenCaughtUp(): Promise<void> {
    if (!this.backlogged) return Promise.resolve();
    return new Promise((resolve) => this.catchUpWaiters.push(resolve));
  }

  /** Clears `backlogged` and wakes whoever waits for it. */
  catchUp(): void {
    this.backlogged = false;
    const waiters = this.catchUpWaiters;
    this.catchUpWaiters = [];
    for (const wake of waiters) wake();
  }

  get newestTimeUs(): number {
    return this.messages.length === 0 ? 0 : this.messages[this.messages.length - 1].timeUs;
  }

  append(
    seq: number,
    timeUs: number,
    topic: string,
    payload: Uint8Array,
    start = 0,
    length = payload.length - start,
    properties: Uint8Array = payload,
    propertiesStart = 0,
    propertiesBytes = 0,
  ): void {
    if (seq !== this.nextSeq)
      throw new Error(`MemoryStore: append seq ${seq}, expected ${this.nextSeq}`);
    const message: StoredMessageLike = {
      seq,
      timeUs,
      topic,
      payload: payload.slice(start, start + length),
    };
    if (propertiesBytes > 0)
      message.properties = properties.slice(propertiesStart, propertiesStart + propertiesBytes);
    this.messages.push(message);
    this.nextSeq++;
  }

  commit(): Promise<void> {
    const target = this.nextSeq - 1;
    return new Promise((resolve) => {
      const done = () => {
        this.committedSeq = Math.max(this.committedSeq, target);
        resolve();
      };
      if (this.holdCommits) this.waiting.push(done);
      else queueMicrotask(done);
    });
  }

  /** Removes the committed messages below `seq`, as retention would. */
  retainFrom(seq: number): void {
    const to = Math.min(seq, this.committedSeq + 1);
    if (to <= this.firstSeqHeld) return;
    this.messages.splice(0, to - this.firstSeqHeld);
    this.firstSeqHeld = to;
  }

  /** Lets held commits complete. */
  release(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const done of waiting) done();
  }

  read(
    filter: Filter,
    from: { seq: number } | { timeUs: number },
  ): { nextBatch(): Promise<StoredMessageLike[]> } {
    let index =
      "seq" in from
        ? Math.max(0, from.seq - this.firstSeqHeld)
        : this.messages.findIndex((m) => m.timeUs >= from.timeUs);
    if (index < 0) index = this.messages.length;
    // Where the read is, as a seq: retention may remove messages before it between batches.
    let seq = this.firstSeqHeld + index;
    return {
      nextBatch: async () => {
        const batch: StoredMessageLike[] = [];
        index = Math.max(0, seq - this.firstSeqHeld);
        while (
          index < this.messages.length &&
          this.messages[index].seq <= this.committedSeq &&
          batch.length < this.batchMessagesMax
        ) {
          const message = this.messages[index++];
          if (filter.matches(message.topic)) batch.push(message);
        }
        seq = this.firstSeqHeld + index;
        return batch;
      },
    };
  }
}
