/**
 * Latest: the newest message of each topic matching a filter — what MQTT calls a topic's retained
 * message (the MQTT door asks when a client subscribes). Nothing is copied per publish: the
 * sequencer keeps each topic id's newest seq since start in a typed array; the newest seq of the
 * topics as they were at start comes from the store, read once per filter the first time it is
 * asked (one scan of every partition, the first time any filter is asked, shared by all the
 * callers, up to the seq the server started at), and kept as a topic → seq map. A message is then
 * read from the tip when it still holds it, else from the store (one read per topic).
 *
 *   newestOf(filter)   ─▶ newest seq per matching topic: max(sequencer's table, store scan's map)
 *   messagesOf(list)   ─▶ each message: tip (offsetOfSeq) or store.read(topic, seq)
 *   latestOf(filter)   ─▶ both (a caller that bounds its memory reads the list in batches)
 *
 * Not here: what MQTT does with them (an empty payload deletes a retained message there: the door
 * decides). Invariants: only visible (durable) messages are returned; a seq retention removed is
 * skipped; answers after a restart equal the ones before (the store holds what the table held).
 * Pure: the store and the tip are ports.
 */
import type { Tip } from "../tip/mod.ts";
import { Filter } from "../topic/filter.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { BrokerStore } from "./ports.ts";

/** The newest message of one topic. Payload and properties are copies of their own. */
export interface LatestMessage {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
  /** Its properties (empty when none). */
  properties: Uint8Array;
}

/** A topic and the seq of its newest message. */
export interface LatestEntry {
  topic: string;
  seq: number;
}

/** What Latest reads of the sequencer. */
export interface NewestSeqs {
  /** The seq the next message gets. */
  readonly nextSeq: number;
  /** Newest seq of topic id `topicId` published since start; 0 when none. */
  newestSeqOf(topicId: number): number;
  /** Resolves once every seq below `seq` is visible. */
  whenVisible(seq: number): Promise<void>;
}

const NONE = new Uint8Array(0);

/** Answers latestOf for the broker. */
export class Latest {
  /** Seqs below this were stored before start: the scans read them (the table has the rest). */
  private readonly startSeq: number;
  /** Newest seq before start per topic, of the filters scanned so far. */
  private readonly stored = new Map<string, number>();
  /** The store's scan, done or under way (null: not started, or it failed). */
  private scanning: Promise<void> | null = null;

  constructor(
    private readonly options: {
      topics: TopicTable;
      tip: Tip;
      store: BrokerStore;
      sequencer: NewestSeqs;
    },
  ) {
    this.startSeq = options.sequencer.nextSeq;
  }

  /** The newest visible message of every topic matching `filter`, in seq order. */
  async latestOf(filter: Filter): Promise<LatestMessage[]> {
    return this.messagesOf(await this.newestOf(filter));
  }

  /** Each topic matching `filter` with its newest visible seq, in seq order (no payloads). */
  async newestOf(filter: Filter): Promise<LatestEntry[]> {
    await this.scanned();
    const newest = new Map<string, number>();
    for (const [topic, seq] of this.stored) if (filter.matches(topic)) newest.set(topic, seq);
    const { topics, sequencer } = this.options;
    let seqMax = 0;
    for (let id = 0; id < topics.topicCount; id++) {
      const seq = sequencer.newestSeqOf(id);
      if (seq === 0) continue;
      const topic = topics.topicName(id);
      if (!filter.matches(topic)) continue;
      newest.set(topic, seq);
      seqMax = Math.max(seqMax, seq);
    }
    // Published but not yet durable: answered once it is, never before (a crash could take it back).
    await sequencer.whenVisible(seqMax + 1);
    const entries: LatestEntry[] = [];
    for (const [topic, seq] of newest) entries.push({ topic, seq });
    return entries.sort((a, b) => a.seq - b.seq);
  }

  /** The messages of `entries` (newestOf's), in their order; one whose seq is gone is left out. */
  async messagesOf(entries: readonly LatestEntry[]): Promise<LatestMessage[]> {
    const messages: LatestMessage[] = [];
    for (const { topic, seq } of entries) {
      const message = this.fromTip(topic, seq) ?? (await this.fromStore(topic, seq));
      if (message !== null) messages.push(message);
    }
    return messages;
  }

  /**
   * The store's newest seq before start of every topic, read once: the first caller starts the
   * scan, every other caller (any filter) waits for the same one.
   */
  private scanned(): Promise<void> {
    if (this.scanning !== null) return this.scanning;
    const scan = this.scan(Filter.of("**"));
    this.scanning = scan;
    // A failed read is not remembered: the next call tries again.
    scan.catch(() => {
      if (this.scanning === scan) this.scanning = null;
    });
    return scan;
  }

  private async scan(filter: Filter): Promise<void> {
    const store = this.options.store;
    if (this.startSeq <= (store.firstSeqHeld ?? 1)) return;
    const reader = store.read(filter, { seq: store.firstSeqHeld ?? 1 }, { borrow: true });
    for (;;) {
      const batch = await reader.nextBatch();
      if (batch.length === 0) return;
      for (const message of batch) {
        if (message.seq >= this.startSeq) return;
        this.stored.set(message.topic, message.seq);
      }
    }
  }

  private fromTip(topic: string, seq: number): LatestMessage | null {
    const records = this.options.tip.records;
    if (seq < records.firstSeq || seq >= records.nextSeq) return null;
    const at = records.offsetOfSeq(seq);
    return {
      seq,
      timeUs: records.timeAt(at),
      topic,
      payload: records.payloadAt(at).slice(),
      properties: records.propertiesLengthAt(at) === 0 ? NONE : records.propertiesAt(at).slice(),
    };
  }

  private async fromStore(topic: string, seq: number): Promise<LatestMessage | null> {
    const store = this.options.store;
    if (seq < (store.firstSeqHeld ?? 1)) return null; // retention removed it
    const reader = store.read(Filter.of(topic), { seq });
    const [message] = await reader.nextBatch();
    if (message === undefined || message.seq !== seq) return null;
    return {
      seq,
      timeUs: message.timeUs,
      topic,
      payload: message.payload.slice(),
      properties: message.properties?.slice() ?? NONE,
    };
  }
}
