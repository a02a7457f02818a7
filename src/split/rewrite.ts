/**
 * rewrite: the heart of the split executor, pure — merge a partition's closed data (its old
 * subtree stores and its segments, each a seq-ordered source) by seq, and route every record to
 * the new store holding its topic, producing each store file's bytes and index.
 *
 *   source: old store A ─┐
 *   source: old store B ─┼─ min seq ─▶ topic ─▶ SubtreeStoreBuilder(new store k) ─▶ chunks, index
 *   source: segments    ─┘
 *
 * Sources only expose "the current record" and an async refill; rewrite_files.ts gives them over
 * files read in chunks, in a worker.
 * Invariants: output records are exactly the input records, each once, in seq order per store;
 * a record whose topic no store holds, or a seq that does not increase, is an error.
 */
import { type Crc32, SubtreeStoreBuilder, type TopicCount } from "../store/mod.ts";
import { recordSeq, recordTopic, recordTopicEquals } from "../store/record.ts";

/** One new store of a partition: its file id, plan id and topics (sorted). */
export type SubtreeStoreAssignment = { id: number; label: string; topics: string[] };

/** A seq-ordered run of records; `seq` is Infinity at the end, NaN while a refill is needed. */
export interface RecordSource {
  /** Seq of the current record, Infinity at the end, NaN when `fill` must run first. */
  seq(): number;
  /** The current record: bytes, view and offset (valid until `next`). */
  readonly bytes: Uint8Array;
  readonly view: DataView;
  readonly at: number;
  readonly length: number;
  /** Moves past the current record. */
  next(): void;
  /** Reads more (only when seq() is NaN). */
  fill(): Promise<void>;
}

/** Routes records to the builders of a partition's new stores. */
export class PartitionRewriter {
  readonly builders: SubtreeStoreBuilder[];
  /** Messages and record bytes per topic of each new store: its TOPICS record in the manifest. */
  readonly counts: Map<string, TopicCount>[];
  private readonly subtreeOfTopic = new Map<string, number>();
  private lastTopic = "";
  private lastSubtree = -1;
  private lastCount: TopicCount = { topic: "", messages: 0, bytes: 0 };
  private lastSeq = 0;
  records = 0;

  constructor(
    readonly partition: string,
    stores: readonly SubtreeStoreAssignment[],
    options: { generation: number; intervalBytes: number; crc32: Crc32; chunkBytes?: number },
  ) {
    this.builders = stores.map(
      (store) =>
        new SubtreeStoreBuilder(
          {
            id: store.id,
            partition,
            label: store.label,
            generation: options.generation,
            topics: store.topics,
          },
          options,
        ),
    );
    this.counts = stores.map(() => new Map());
    stores.forEach((store, index) => {
      for (const topic of store.topics) this.subtreeOfTopic.set(topic, index);
    });
  }

  /** Adds the checked record bytes[at, at+length) to its topic's store; the index of that store. */
  add(bytes: Uint8Array, view: DataView, at: number, length: number): number {
    const seq = recordSeq(view, at);
    if (seq <= this.lastSeq)
      throw new Error(
        `partition "${this.partition}": seq ${seq} after ${this.lastSeq}: sources overlap or are out of order`,
      );
    this.lastSeq = seq;
    if (!recordTopicEquals(bytes, view, at, this.lastTopic)) {
      const topic = recordTopic(bytes, view, at);
      const store = this.subtreeOfTopic.get(topic);
      if (store === undefined)
        throw new Error(
          `partition "${this.partition}": topic "${topic}" (seq ${seq}) is in no store of the plan`,
        );
      this.lastTopic = topic;
      this.lastSubtree = store;
      const counts = this.counts[store];
      this.lastCount = counts.get(topic) ?? { topic, messages: 0, bytes: 0 };
      counts.set(topic, this.lastCount);
    }
    this.lastCount.messages++;
    this.lastCount.bytes += length;
    this.builders[this.lastSubtree].add(bytes, view, at, length);
    this.records++;
    return this.lastSubtree;
  }
}

/** Merges `sources` by seq into `rewriter`; `afterRecord` runs after each (to drain output). */
export async function mergeSources(
  sources: readonly RecordSource[],
  rewriter: PartitionRewriter,
  afterRecord?: (store: number) => Promise<void> | undefined,
): Promise<void> {
  for (;;) {
    let best = -1;
    let bestSeq = Infinity;
    for (let i = 0; i < sources.length; i++) {
      let seq = sources[i].seq();
      while (Number.isNaN(seq)) {
        await sources[i].fill();
        seq = sources[i].seq();
      }
      if (seq < bestSeq) {
        bestSeq = seq;
        best = i;
      }
    }
    if (best < 0) return;
    const source = sources[best];
    const store = rewriter.add(source.bytes, source.view, source.at, source.length);
    source.next();
    const waiting = afterRecord?.(store);
    if (waiting !== undefined) await waiting;
  }
}
