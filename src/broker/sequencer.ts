/**
 * Sequencer: the stage that turns PUBLISH frames into the one stream. It gives each message the
 * next seq and a publish time, appends it to the store and the tip, starts group commits, and
 * once the store says a range is durable acknowledges its publishers and moves the visible end,
 * which live fan-out then pushes to subscribers.
 *
 *   PUBLISH ─▶ intern topics ─▶ seq, time ─▶ store.append + tip.append ─▶ pending ack
 *   commitIfDue ─▶ store.commit ─▶ committed ─▶ PUBLISH_ACK ─▶ visibleSeq ─▶ fanOut(from, to)
 *
 * The visible end. A message becomes visible to subscribers only once it is durable
 * (`visibleSeq` = committed + 1), so no subscriber ever sees a seq that a crash could take back
 * and hand to another message. A storage failure is sticky: what was durable is still
 * acknowledged, the rest refused, and every later PUBLISH refused — except while the store says
 * it is `retrying` (a full disk): a PUBLISH is then refused whole, no seq taken, and later ones
 * are tried again; what was appended before waits for its commit. Whether the store takes a
 * PUBLISH is asked before it is sequenced (`store.refusal`), never answered by an append throwing
 * in the middle of its batch.
 *
 * A replica (src/replica/) does not sequence: `replicate` appends the leader's messages with the
 * leader's seqs and publish times (the clock is not read), each seq the next one, and commits and
 * fans them out like a publish; its PUBLISH frames are refused with NOT_LEADER (`leaderUrl`).
 *
 * Not here: sessions (errors and flushing go through SequencerOutput), subscriptions. Invariants:
 * visibleSeq <= nextSeq; publish times never decrease, across a restart too; a batch is sequenced
 * whole or not at all. Pure: the store and clock are ports.
 */
import type { AriaErrorCode, MessageBatch, PublishFrame } from "../protocol/mod.ts";
import { encodePublishAck } from "../protocol/mod.ts";
import { assert } from "../stdx/assert.ts";
import { COPY_VIEWS_BYTES_MAX } from "../stdx/bytes.ts";
import type { Tip } from "../tip/mod.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { BrokerStore, Clock } from "./ports.ts";
import type { SubscriberSession } from "./subscription.ts";

/** What the sequencer asks of the rest of the broker. */
export interface SequencerOutput {
  /** Writes an ERROR frame to a session (see dispatch.ts). */
  fail(
    session: SubscriberSession,
    code: AriaErrorCode,
    reason: string,
    related: { requestId: number },
  ): void;
  /** Flushes a session's frames (and stops or closes it as its queue says). */
  settle(session: SubscriberSession): void;
  /** Pushes newly visible seqs [from, to) to live subscriptions (live_fanout.ts). */
  fanOut(from: number, to: number, touched: Set<SubscriberSession>): void;
}

interface PendingAck {
  session: SubscriberSession;
  requestId: number;
  firstSeq: number;
  count: number;
}

/** What a sequencer is built from. */
export interface SequencerOptions {
  topics: TopicTable;
  tip: Tip;
  store: BrokerStore;
  clock: Clock;
  output: SequencerOutput;
  /**
   * The highest seq a PUBLISH_ACK may cover now (`--acks quorum|all`: what enough replicas hold
   * durably; src/replica/tracker.ts); absent: the store's committed seq. Visibility does not wait
   * for it: a replica reads what is durable here.
   */
  ackableSeq?: () => number;
}

/** Sequences publishes into the stream and acknowledges them once durable. */
/** Answered entries kept at the head of the ack queue before it is compacted. */
const PENDING_ACKS_COMPACT_MIN = 1024;

export class Sequencer {
  /** The seq the next published message gets. */
  nextSeq: number;
  /** Seqs below this are durable and may be delivered. */
  visibleSeq: number;
  /** True once shutdown began: publishes are refused. */
  shuttingDown = false;
  /** A replica's leader (its URL): PUBLISH is refused with NOT_LEADER naming it; null: a leader. */
  leaderUrl: string | null = null;
  readonly counters = { messagesPublished: 0, bytesPublished: 0, publishersPaused: 0 };
  private lastTimeUs = 0;
  private commitInFlight = false;
  private failure: string | null = null;
  private readonly pendingAcks: PendingAck[] = [];
  private pendingAckHead = 0;
  /** Publishing sessions not read until the store catches up (see pauseForStore). */
  private readonly pausedForStore = new Set<SubscriberSession>();
  /** Messages and payload bytes published per topic id since start. */
  private topicMessages = new Float64Array(1024);
  private topicBytesPublished = new Float64Array(1024);
  /** Newest seq published per topic id since start (0: none): retained messages (latest.ts). */
  private topicNewestSeq = new Float64Array(1024);
  /** Who waits for seqs to become visible (whenVisible), by seq. */
  private visibleWaiters: { seq: number; resolve: () => void }[] = [];
  private readonly topics: TopicTable;
  private readonly tip: Tip;
  private readonly store: BrokerStore;
  private readonly clock: Clock;
  private readonly output: SequencerOutput;
  private readonly ackableSeq: (() => number) | undefined;

  constructor(options: SequencerOptions) {
    this.ackableSeq = options.ackableSeq;
    this.topics = options.topics;
    this.tip = options.tip;
    this.store = options.store;
    this.clock = options.clock;
    this.output = options.output;
    this.nextSeq = options.store.nextSeq;
    this.visibleSeq = options.store.committedSeq + 1;
    // Publish times never go back, across a restart too (a clock behind the stored times would
    // otherwise give new messages earlier times, and time seeks assume times never decrease).
    this.lastTimeUs = options.store.newestTimeUs;
    assert(this.visibleSeq === this.nextSeq, "Broker: the store starts with everything committed");
    // A tip refilled from the store ends where the store does; an empty one must start there too,
    // or a tip cursor would take its empty range below the visible end for "nothing to read".
    const records = this.tip.records;
    if (records.count === 0) this.tip.startAt(this.nextSeq);
    assert(records.nextSeq === this.nextSeq, "Broker: the tip ends where the store does");
    // A topic with no record left in the tip or the store gives its id back when the table is
    // full (topic_table.ts); its counts go with it.
    const store = this.store;
    this.topics.reclaimBelow(() => Math.min(records.firstSeq, store.firstSeqHeld ?? 0));
    this.topics.onReclaim((ids) => {
      for (let i = 0; i < ids.length; i++) {
        if (ids[i] >= this.topicMessages.length) continue;
        this.topicMessages[ids[i]] = 0;
        this.topicBytesPublished[ids[i]] = 0;
        this.topicNewestSeq[ids[i]] = 0;
      }
    });
  }

  /** Sequences one PUBLISH frame, or refuses it whole with an ERROR. */
  publish(session: SubscriberSession, frame: PublishFrame): void {
    const requestId = frame.requestId;
    const output = this.output;
    if (this.failure !== null)
      return output.fail(session, "ARIA_ERR_STORAGE_FAILED", this.failure, { requestId });
    if (this.shuttingDown)
      return output.fail(session, "ARIA_ERR_SHUTTING_DOWN", "server is shutting down", {
        requestId,
      });
    if (this.leaderUrl !== null)
      return output.fail(
        session,
        "ARIA_ERR_NOT_LEADER",
        `this server is a replica: publish to the leader at ${this.leaderUrl}`,
        { requestId },
      );
    // Refused before any seq is taken (storage stalled past its backlog bound): a batch that
    // starts is appended whole.
    const refusal = this.store.refusal ?? null;
    if (refusal !== null) return this.refuse(session, refusal, requestId);
    const messages = frame.messages;
    // Intern every topic first, so a batch is sequenced whole or not at all. Each with the seq it
    // is about to get, so interning a later one never reclaims the id of an earlier one.
    const topicIds = new Int32Array(messages.count);
    for (let i = 0; messages.next(); i++) {
      // The decoder validated the topics (protocol/topic_cache.ts).
      const interned = this.topics.internValidated(messages.topic, this.nextSeq + i);
      if (!interned.ok)
        return output.fail(session, "ARIA_ERR_INVALID_TOPIC", interned.reason, { requestId });
      topicIds[i] = interned.topicId;
    }
    messages.rewind();
    // The store finds each topic's entry by these ids, not by hashing its name again.
    const partitionIds = this.topics.partitionsByTopic();
    const timeUs = Math.max(this.clock.nowUs(), this.lastTimeUs);
    this.lastTimeUs = timeUs;
    const firstSeq = this.nextSeq;
    const frameBytes = messages.frame;
    for (let i = 0; messages.next(); i++) {
      // A short payload goes to the store and the tip as a range of the frame (no view per
      // message: they copy it through DataViews); a long one as one view both copy with set().
      const payloadBytes = messages.payloadBytes;
      const long = payloadBytes > COPY_VIEWS_BYTES_MAX;
      const source = long ? messages.payload : frameBytes;
      const start = long ? 0 : messages.payloadStart;
      const seq = this.nextSeq;
      // Properties (rare, at most PROPERTIES_BYTES_MAX) go as a range of the frame too.
      const propertiesStart = messages.propertiesStart;
      const propertiesBytes = messages.propertiesBytes;
      try {
        this.appendOne(
          seq,
          timeUs,
          messages.topic,
          topicIds[i],
          partitionIds[topicIds[i]],
          source,
          start,
          payloadBytes,
          frameBytes,
          propertiesStart,
          propertiesBytes,
        );
      } catch (error) {
        // The store stopped in the background (a segment close or an fsync failed) before any
        // commit said so. Its failure is sticky and set between events, so this is the batch's
        // first message and nothing was sequenced.
        assert(i === 0, "Broker.publish: the store fails between events, never inside a batch");
        return this.refuse(session, error, requestId);
      }
    }
    this.counters.messagesPublished += messages.count;
    this.pendingAcks.push({ session, requestId, firstSeq, count: messages.count });
    if (this.store.backlogged) this.pauseForStore(session);
  }

  /**
   * Appends one message as seq `seq` (= nextSeq) to the store, then the tip, and counts it; a
   * store that throws (it stopped in the background) leaves nothing changed. The payload is
   * `payloadBytes` at `start` of `source`, the properties a range of `frame`.
   */
  private appendOne(
    seq: number,
    timeUs: number,
    topic: string,
    topicId: number,
    partitionId: number,
    source: Uint8Array,
    start: number,
    payloadBytes: number,
    frame: Uint8Array,
    propertiesStart: number,
    propertiesBytes: number,
  ): void {
    this.store.append(
      seq,
      timeUs,
      topic,
      source,
      start,
      payloadBytes,
      frame,
      propertiesStart,
      propertiesBytes,
      topicId,
      partitionId,
    );
    this.nextSeq++;
    this.tip.append(
      topicId,
      seq,
      timeUs,
      source,
      start,
      payloadBytes,
      frame,
      propertiesStart,
      propertiesBytes,
    );
    this.countTopic(topicId, payloadBytes, seq);
    this.counters.bytesPublished += payloadBytes;
  }

  /**
   * Appends a leader's DATA batch (a replica: src/replica/) with the leader's seqs and publish
   * times; commitIfDue then makes it durable and visible as a publish would be. Returns null, or
   * why nothing of the batch was appended: its first seq is not `nextSeq` (a gap or a repeat),
   * its seqs are not consecutive, a time goes back, a topic is refused, or the store refuses.
   * Checked whole before the first append, so a batch is appended whole or not at all.
   */
  replicate(messages: MessageBatch): string | null {
    if (this.failure !== null) return this.failure;
    if (this.shuttingDown) return "server is shutting down";
    const refusal = this.store.refusal ?? null;
    if (refusal !== null) return `the store refuses appends: ${refusal.message}`;
    const topicIds = new Int32Array(messages.count);
    let timeUs = this.lastTimeUs;
    messages.rewind();
    for (let i = 0; messages.next(); i++) {
      const expected = this.nextSeq + i;
      if (messages.seq !== expected)
        return `seq ${messages.seq} arrived where seq ${expected} was next`;
      if (messages.timeUs < timeUs)
        return `seq ${messages.seq}: publish time ${messages.timeUs} µs is before ${timeUs} µs`;
      timeUs = messages.timeUs;
      const interned = this.topics.internValidated(messages.topic, expected);
      if (!interned.ok) return `seq ${messages.seq}: ${interned.reason}`;
      topicIds[i] = interned.topicId;
    }
    messages.rewind();
    const frameBytes = messages.frame;
    const partitionIds = this.topics.partitionsByTopic(); // as in publish
    for (let i = 0; messages.next(); i++) {
      const { seq, payloadStart, payloadBytes, propertiesStart, propertiesBytes } = messages;
      try {
        this.appendOne(
          seq,
          messages.timeUs,
          messages.topic,
          topicIds[i],
          partitionIds[topicIds[i]],
          frameBytes,
          payloadStart,
          payloadBytes,
          frameBytes,
          propertiesStart,
          propertiesBytes,
        );
      } catch (error) {
        assert(i === 0, "Broker.replicate: the store fails between events, never inside a batch");
        this.storageFailed(error);
        return this.failure;
      }
      this.lastTimeUs = messages.timeUs;
    }
    this.counters.messagesPublished += messages.count;
    return null;
  }

  /** While the store is behind on its background work, when it has caught up; else null. */
  storeBacklog(): Promise<void> | null {
    return this.store.backlogged ? this.store.whenCaughtUp() : null;
  }

  /**
   * A replica with nothing appended begins at its leader's oldest held seq `seq`: the store
   * records it durably, then the next seq, the visible end and the empty tip move there.
   */
  async beginAt(seq: number): Promise<void> {
    const store = this.store;
    if (store.beginAt === undefined) throw new Error("this store cannot begin past seq 1");
    assert(this.nextSeq === 1 && this.tip.records.count === 0, "Sequencer.beginAt: not empty");
    await store.beginAt(seq);
    this.nextSeq = this.visibleSeq = store.nextSeq;
    this.tip.startAt(this.nextSeq);
  }

  /** The last seq durable in the store (a replica reports it to its leader). */
  get durableSeq(): number {
    return this.store.committedSeq;
  }

  /**
   * Refuses a PUBLISH the store would not take: only it while the store retries (a full disk),
   * else the failure is sticky and every later PUBLISH is refused too.
   */
  private refuse(session: SubscriberSession, error: unknown, requestId: number): void {
    const output = this.output;
    if (this.store.retrying === true) {
      const reason = error instanceof Error ? error.message : String(error);
      return output.fail(session, "ARIA_ERR_STORAGE_FAILED", reason, { requestId });
    }
    this.storageFailed(error);
    return output.fail(session, "ARIA_ERR_STORAGE_FAILED", this.failure ?? "storage failed", {
      requestId,
    });
  }

  /** Starts a group commit when messages wait for one and none is in flight (after every event). */
  commitIfDue(): void {
    if (this.commitInFlight || this.store.committedSeq >= this.nextSeq - 1 || this.failure !== null)
      return;
    this.commitInFlight = true;
    this.store.commit().then(
      () => {
        this.commitInFlight = false;
        this.committed();
        this.commitIfDue();
      },
      (error) => {
        this.commitInFlight = false;
        this.storageFailed(error);
      },
    );
  }

  /** Commits and acknowledges everything appended (shutdown: publishes are already refused). */
  async drain(): Promise<void> {
    this.shuttingDown = true;
    while (this.store.committedSeq < this.nextSeq - 1 && this.failure === null) {
      try {
        await this.store.commit();
      } catch (error) {
        this.storageFailed(error);
      }
      this.committed();
    }
  }

  /** Messages and payload bytes published per topic since this broker started (topics held). */
  topicVolumes(): { topic: string; bytes: number; messages: number }[] {
    const rows = [];
    const count = Math.min(this.topics.topicCount, this.topicMessages.length);
    for (let id = 0; id < count; id++) {
      if (this.topicMessages[id] > 0)
        rows.push({
          topic: this.topics.topicName(id),
          bytes: this.topicBytesPublished[id],
          messages: this.topicMessages[id],
        });
    }
    return rows;
  }

  /** Newest seq published to topic `topicId` since this broker started; 0 when none. */
  newestSeqOf(topicId: number): number {
    return topicId < this.topicNewestSeq.length ? this.topicNewestSeq[topicId] : 0;
  }

  /** Resolves once every seq below `seq` is visible (durable), or at once when it is. */
  whenVisible(seq: number): Promise<void> {
    if (seq <= this.visibleSeq || this.failure !== null) return Promise.resolve();
    return new Promise((resolve) => this.visibleWaiters.push({ seq, resolve }));
  }

  private countTopic(topicId: number, bytes: number, seq: number): void {
    if (topicId >= this.topicMessages.length) {
      let length = this.topicMessages.length;
      while (length <= topicId) length *= 2;
      this.topicMessages = grownArray(this.topicMessages, length);
      this.topicBytesPublished = grownArray(this.topicBytesPublished, length);
      this.topicNewestSeq = grownArray(this.topicNewestSeq, length);
    }
    this.topicMessages[topicId]++;
    this.topicBytesPublished[topicId] += bytes;
    this.topicNewestSeq[topicId] = seq;
  }

  /**
   * The store is behind on sorting (its journals or unsorted records are past their bound):
   * stop reading this publisher, so TCP back-pressure reaches it instead of the journals growing
   * without end. Frames already received are still handled. Every paused session is read again
   * once the store has caught up.
   */
  private pauseForStore(session: SubscriberSession): void {
    const connection = session.connection;
    if (connection.pause === undefined || this.pausedForStore.has(session)) return;
    connection.pause();
    this.pausedForStore.add(session);
    this.counters.publishersPaused++;
    if (this.pausedForStore.size > 1) return;
    void this.store.whenCaughtUp().then(() => {
      for (const paused of this.pausedForStore) if (!paused.closed) paused.connection.resume?.();
      this.pausedForStore.clear();
    });
  }

  /** Replicas reported more durable, or the in-sync set changed: acknowledge what may be now. */
  acksMayAdvance(): void {
    if (this.failure === null && this.pendingAckHead < this.pendingAcks.length) this.committed();
  }

  /**
   * Storage made more durable: acknowledge publishers (up to what the replicas hold, under
   * `--acks quorum|all`), move the visible end, fan out.
   */
  private committed(): void {
    const committedSeq = this.store.committedSeq;
    const ackable =
      this.ackableSeq === undefined ? committedSeq : Math.min(committedSeq, this.ackableSeq());
    const touched = new Set<SubscriberSession>();
    while (this.pendingAckHead < this.pendingAcks.length) {
      const ack = this.pendingAcks[this.pendingAckHead];
      if (ack.firstSeq + ack.count - 1 > ackable) break;
      this.pendingAckHead++;
      if (ack.session.closed) continue;
      ack.session.endData();
      encodePublishAck(ack.session.writer, {
        requestId: ack.requestId,
        firstSeq: ack.firstSeq,
        count: ack.count,
      });
      touched.add(ack.session);
    }
    this.dropAnswered();
    const from = this.visibleSeq;
    if (committedSeq + 1 > from) {
      this.visibleSeq = committedSeq + 1;
      this.output.fanOut(from, this.visibleSeq, touched);
      if (this.visibleWaiters.length > 0) this.wakeVisible();
    }
    for (const session of touched) this.output.settle(session);
  }

  /**
   * Forgets the acknowledged prefix of `pendingAcks`: at once when nothing waits, else once it is
   * most of the queue (a queue that never empties — a publish waiting at every commit, acks held
   * for replicas — would otherwise keep every acknowledged publish and its session).
   */
  private dropAnswered(): void {
    if (this.pendingAckHead === this.pendingAcks.length) {
      this.pendingAcks.length = 0;
      this.pendingAckHead = 0;
    } else if (this.pendingAckHead >= PENDING_ACKS_COMPACT_MIN) {
      if (this.pendingAckHead * 2 >= this.pendingAcks.length) {
        this.pendingAcks.splice(0, this.pendingAckHead);
        this.pendingAckHead = 0;
      }
    }
  }

  /** Publishes waiting for their PUBLISH_ACK, and the answered ones still kept (bounded). */
  get pendingAckCounts(): { waiting: number; kept: number } {
    return {
      waiting: this.pendingAcks.length - this.pendingAckHead,
      kept: this.pendingAcks.length,
    };
  }

  private wakeVisible(): void {
    const waiting = this.visibleWaiters;
    this.visibleWaiters = [];
    for (const waiter of waiting) {
      if (waiter.seq <= this.visibleSeq || this.failure !== null) waiter.resolve();
      else this.visibleWaiters.push(waiter);
    }
  }

  private storageFailed(error: unknown): void {
    // What is durable still counts: acknowledged and delivered (a failure may come after the
    // store committed part of what was waiting), the rest refused.
    if (this.failure === null) this.committed();
    this.failure = `storage failed: ${error instanceof Error ? error.message : String(error)}`;
    this.wakeVisible(); // nothing more becomes visible: waiters answer with what is
    for (; this.pendingAckHead < this.pendingAcks.length; this.pendingAckHead++) {
      const ack = this.pendingAcks[this.pendingAckHead];
      if (ack.session.closed) continue;
      this.output.fail(ack.session, "ARIA_ERR_STORAGE_FAILED", this.failure, {
        requestId: ack.requestId,
      });
      this.output.settle(ack.session);
    }
  }
}

/** A copy of `from` in an array of `length` elements. */
function grownArray(from: Float64Array, length: number): Float64Array<ArrayBuffer> {
  const grown = new Float64Array(length);
  grown.set(from);
  return grown;
}
