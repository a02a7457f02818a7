/**
 * Broker: the server's state machine. It takes events — a connection opened, bytes arrived, a
 * socket drained, a connection closed, storage committed — and answers with frames written to
 * sessions. It sequences publishes into the one stream (tip + store), acknowledges them once the
 * store says they are durable, and moves every subscription's cursor from disk to the tip to live.
 * Pure: sockets, files and timers come in through ports.ts.
 *
 * The visible end. A message becomes visible to subscribers only once it is durable
 * (`visibleSeq` = committed + 1), so no subscriber ever sees a seq that a crash could take back
 * and hand to another message.
 *
 *   publish ─▶ seq ─▶ tip.append + store.append ─▶ commit ─▶ ack publishers
 *                                                     └──▶ visibleSeq ─▶ fan-out to LIVE subs
 *   subscribe ─▶ DISK (store reader) ─▶ TIP (tip cursor to visibleSeq) ─▶ LIVE
 *
 * Back-pressure: a session whose send queue is full stops its cursors (STALLED); nothing more is
 * built for it. When it drains, its subscriptions catch up from the tip, or the disk if the ring
 * moved past them. Catch-up runs in bounded slices so one reader cannot starve the rest.
 */
import {
  CLOSING_LINGER_US,
  CONNECTION_BUFFERED_BYTES_MAX,
  CONNECTIONS_MAX,
  FRAME_BYTES_MAX,
  HANDSHAKE_TIMEOUT_US,
  PROTOCOL_VERSION,
  SUBSCRIPTIONS_PER_CONNECTION_MAX,
} from "../constants.ts";
import {
  type AriaErrorCode,
  type DecodeError,
  encodeCaughtUp,
  encodeError,
  encodePong,
  encodePublishAck,
  encodeSubscribed,
  encodeUnsubscribed,
  encodeWelcome,
  type Frame,
  type PublishFrame,
  serverLimits,
  type SubscribeFrame,
  TopicCache,
} from "../protocol/mod.ts";
import { assert } from "../stdx/assert.ts";
import { sameSecret } from "../stdx/secret.ts";
import { COPY_VIEWS_BYTES_MAX } from "../stdx/bytes.ts";
import { Histogram } from "../stdx/histogram.ts";
import type { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { FilterMatcher } from "../topic/filter_matcher.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import { Fanout } from "./fanout.ts";
import type { BrokerStore, Clock, Connection, Scheduler, StoredMessageLike } from "./ports.ts";
import { QueueChunkPool, Session } from "./session.ts";
import { SharedData } from "./shared_data.ts";
import { Phase, Subscription } from "./subscription.ts";

/** Bytes of messages one subscription may write in one catch-up slice before others get a turn. */
export const CATCH_UP_SLICE_BYTES = 256 * 1024;
/**
 * Stalled disk-phase subscriptions that keep their reader and the rest of its batch, so a slow
 * client resumes where it stopped instead of re-reading (and re-checking) every partition's
 * chunk from disk. Past this many, a stall drops its reader: memory stays bounded however many
 * subscribers stall.
 */
export const STALLED_DISK_READERS_KEPT_MAX = 64;

/** What a broker is built from. */
export interface BrokerOptions {
  topics: TopicTable;
  tip: Tip;
  store: BrokerStore;
  clock: Clock;
  scheduler: Scheduler;
  /** When set, HELLO must carry this token. */
  authToken?: string;
  connectionsMax?: number;
  /** Send-queue bytes at which a session's cursors stop (tests shrink it). */
  sendQueueBytesMax?: number;
  /** Bytes one subscription may write per catch-up slice (tests shrink it). */
  catchUpSliceBytes?: number;
}

/** Counters of a broker, for metrics. */
/** Bounds (seconds) of the recovery-duration histograms. */
export const RECOVERY_SECONDS_BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60];

export interface BrokerStats {
  connections: number;
  subscriptions: number;
  subscriptionsByPhase: Record<"resolving" | "disk" | "tip" | "live" | "stalled", number>;
  messagesPublished: number;
  bytesPublished: number;
  messagesDelivered: number;
  /** Of those, delivered live through frames encoded once for a group of equal filters. */
  messagesDeliveredShared: number;
  /** Times a publishing connection stopped being read because the store was backlogged. */
  publishersPaused: number;
  nextSeq: number;
  visibleSeq: number;
  recoveries: { disk: number; tip: number };
}

interface PendingAck {
  session: Session;
  requestId: number;
  firstSeq: number;
  count: number;
}

const PHASE_NAMES = ["resolving", "disk", "tip", "live", "stalled"] as const;

/** The server's state machine. */
export class Broker {
  private readonly topics: TopicTable;
  private readonly tip: Tip;
  private readonly store: BrokerStore;
  private readonly clock: Clock;
  private readonly scheduler: Scheduler;
  private readonly sessions = new Map<number, Session>();
  private readonly fanout = new Fanout();
  private readonly live = new Set<Subscription>();
  private readonly catchingUp = new Set<Subscription>();
  /** Send-queue chunks shared by every session. */
  private readonly queueChunks = new QueueChunkPool();
  /** Stalled subscriptions holding a disk reader (at most STALLED_DISK_READERS_KEPT_MAX). */
  private readonly stalledReaders = new Set<Subscription>();
  private readonly pendingAcks: PendingAck[] = [];
  private pendingAckHead = 0;
  private readonly topicBytes: Uint8Array[] = [];
  private readonly topicCache = new TopicCache();
  private readonly encoder = new TextEncoder();
  private nextSessionId = 1;
  private nextSeq: number;
  /** Seqs below this are durable and may be delivered. */
  private visibleSeq: number;
  private lastTimeUs = 0;
  private commitInFlight = false;
  private pumpScheduled = false;
  private failure: string | null = null;
  private shuttingDown = false;
  private readonly counters = {
    messagesPublished: 0,
    bytesPublished: 0,
    messagesDelivered: 0,
    messagesDeliveredShared: 0,
    publishersPaused: 0,
    diskRecoveries: 0,
    tipRecoveries: 0,
  };
  /** Publishing sessions not read until the store catches up (see pauseForStore). */
  private readonly pausedForStore = new Set<Session>();
  /** Live fan-out's frames encoded once per filter, and the members of the group being served. */
  private readonly sharedData = new SharedData();
  private readonly sharedMembers: Subscription[] = [];
  private readonly topicUtf8Of = (topicId: number): Uint8Array => this.topicUtf8(topicId);
  /** Messages and payload bytes published per topic id since start. */
  private topicMessages = new Float64Array(1024);
  private topicBytesPublished = new Float64Array(1024);
  /** How long subscriptions took from SUBSCRIBED to CAUGHT_UP, by where they started. */
  readonly recoverySeconds = {
    tip: new Histogram(RECOVERY_SECONDS_BOUNDS),
    disk: new Histogram(RECOVERY_SECONDS_BOUNDS),
  };

  constructor(private readonly options: BrokerOptions) {
    this.topics = options.topics;
    this.tip = options.tip;
    this.store = options.store;
    this.clock = options.clock;
    this.scheduler = options.scheduler;
    this.nextSeq = options.store.nextSeq;
    this.visibleSeq = options.store.committedSeq + 1;
    // Publish times never go back, across a restart too (a clock behind the stored times would
    // otherwise give new messages earlier times, and time seeks assume times never decrease).
    this.lastTimeUs = options.store.newestTimeUs;
    assert(this.visibleSeq === this.nextSeq, "Broker: the store starts with everything committed");
    // A tip refilled from the store ends where the store does; an empty one must start there too,
    // or a cursor would take its empty range below the visible end for "nothing to read".
    if (this.tip.ring.count === 0) this.tip.ring.startAt(this.nextSeq);
    assert(this.tip.ring.nextSeq === this.nextSeq, "Broker: the tip ends where the store does");
  }

  // ---- Events ------------------------------------------------------------------------------

  /** A connection opened; returns its session id (the connection is closed when over the limit). */
  open(connection: Connection): number {
    const session = new Session(
      this.nextSessionId++,
      connection,
      this.topicCache,
      this.options.sendQueueBytesMax ?? CONNECTION_BUFFERED_BYTES_MAX,
      this.queueChunks,
    );
    session.openedUs = this.clock.nowUs();
    if (
      this.sessions.size >= (this.options.connectionsMax ?? CONNECTIONS_MAX) ||
      this.shuttingDown
    ) {
      const code = this.shuttingDown ? "ARIA_ERR_SHUTTING_DOWN" : "ARIA_ERR_TOO_MANY_CONNECTIONS";
      this.fail(
        session,
        code,
        this.shuttingDown
          ? "server is shutting down"
          : `server holds ${this.sessions.size} connections, the limit`,
      );
      session.flush();
      connection.close();
      return session.id;
    }
    this.sessions.set(session.id, session);
    return session.id;
  }

  /** Bytes arrived on session `sessionId`. */
  receive(sessionId: number, bytes: Uint8Array): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined || session.closing) return;
    const decoder = session.decoder;
    decoder.push(bytes);
    for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
      if (frame.kind === "decode_error") this.decodeFailed(session, frame);
      else this.handle(session, frame);
      if (session.closing) break;
    }
    this.afterEvent(session);
  }

  /** The connection of session `sessionId` can take more bytes. */
  writable(sessionId: number): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return;
    session.drain();
    if (session.closing && session.queuedBytes === 0) {
      this.closeSession(session);
      return;
    }
    if (session.drained) this.resumeStalled(session);
  }

  /**
   * Ends connections that hold a slot for nothing (the runtime calls this every second or so):
   * one that sent no HELLO within HANDSHAKE_TIMEOUT_US gets a fatal HANDSHAKE_REQUIRED (idle
   * connections had filled every slot, a token set or not); one closing after a fatal error whose
   * peer does not read it is closed CLOSING_LINGER_US after this first saw it closing.
   */
  expire(nowUs: number): void {
    for (const session of [...this.sessions.values()]) {
      if (
        !session.handshaken &&
        !session.closing &&
        nowUs - session.openedUs >= HANDSHAKE_TIMEOUT_US
      ) {
        this.fail(
          session,
          "ARIA_ERR_HANDSHAKE_REQUIRED",
          `no HELLO within ${HANDSHAKE_TIMEOUT_US / 1e6} s`,
          { fatal: true },
        );
        this.afterEvent(session);
        continue;
      }
      if (!session.closing || session.closed) continue;
      if (session.closingSeenUs < 0) session.closingSeenUs = nowUs;
      else if (nowUs - session.closingSeenUs >= CLOSING_LINGER_US) this.closeSession(session);
    }
  }

  /** The connection of session `sessionId` closed. */
  closed(sessionId: number): void {
    const session = this.sessions.get(sessionId);
    if (session !== undefined) this.closeSession(session);
  }

  /**
   * Graceful shutdown: refuse new work, wait for storage to commit what was appended, acknowledge
   * it, then close every session with a SHUTTING_DOWN error.
   */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    while (this.store.committedSeq < this.nextSeq - 1 && this.failure === null) {
      try {
        await this.store.commit();
      } catch (error) {
        this.storageFailed(error);
      }
      this.committed();
    }
    for (const session of [...this.sessions.values()]) {
      this.fail(session, "ARIA_ERR_SHUTTING_DOWN", "server is shutting down");
      session.flush();
      this.closeSession(session);
    }
  }

  /** Counters for metrics. */
  stats(): BrokerStats {
    const byPhase = { resolving: 0, disk: 0, tip: 0, live: 0, stalled: 0 };
    let subscriptions = 0;
    for (const session of this.sessions.values()) {
      for (const subscription of session.subscriptions.values()) {
        subscriptions++;
        if (subscription.phase !== Phase.Closed) byPhase[PHASE_NAMES[subscription.phase]]++;
      }
    }
    return {
      connections: this.sessions.size,
      subscriptions,
      subscriptionsByPhase: byPhase,
      messagesPublished: this.counters.messagesPublished,
      bytesPublished: this.counters.bytesPublished,
      messagesDelivered: this.counters.messagesDelivered,
      messagesDeliveredShared: this.counters.messagesDeliveredShared,
      publishersPaused: this.counters.publishersPaused,
      nextSeq: this.nextSeq,
      visibleSeq: this.visibleSeq,
      recoveries: { disk: this.counters.diskRecoveries, tip: this.counters.tipRecoveries },
    };
  }

  /** Messages and payload bytes published per topic since this broker started. */
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

  private countTopic(topicId: number, bytes: number): void {
    if (topicId >= this.topicMessages.length) {
      let length = this.topicMessages.length;
      while (length <= topicId) length *= 2;
      const messages = new Float64Array(length);
      messages.set(this.topicMessages);
      const topicBytes = new Float64Array(length);
      topicBytes.set(this.topicBytesPublished);
      this.topicMessages = messages;
      this.topicBytesPublished = topicBytes;
    }
    this.topicMessages[topicId]++;
    this.topicBytesPublished[topicId] += bytes;
  }

  // ---- Frames ------------------------------------------------------------------------------

  private handle(session: Session, frame: Frame): void {
    if (frame.kind === "hello")
      return this.hello(session, frame.version, frame.clientName, frame.authToken);
    if (!session.handshaken)
      return this.fail(
        session,
        "ARIA_ERR_HANDSHAKE_REQUIRED",
        `${frame.kind} before the HELLO handshake`,
        { fatal: true },
      );
    switch (frame.kind) {
      case "publish":
        return this.publish(session, frame);
      case "subscribe":
        return this.subscribe(session, frame);
      case "unsubscribe":
        return this.unsubscribe(session, frame.subscriptionId);
      case "ping":
        session.endData();
        return encodePong(session.writer, { token: frame.token });
      case "pong":
        return;
      default:
        return this.fail(
          session,
          "ARIA_ERR_UNEXPECTED_FRAME",
          `${frame.kind} is a server frame; clients may not send it`,
        );
    }
  }

  private hello(
    session: Session,
    version: number,
    clientName: string,
    authToken: string | null,
  ): void {
    if (session.handshaken)
      return this.fail(session, "ARIA_ERR_UNEXPECTED_FRAME", "a second HELLO on one connection");
    if (version !== PROTOCOL_VERSION) {
      return this.fail(
        session,
        "ARIA_ERR_UNSUPPORTED_VERSION",
        `protocol version ${version}; this server speaks ${PROTOCOL_VERSION}`,
        { fatal: true },
      );
    }
    const expected = this.options.authToken;
    if (
      expected !== undefined &&
      expected !== "" &&
      (authToken === null || !sameSecret(authToken, expected))
    ) {
      return this.fail(
        session,
        "ARIA_ERR_AUTH_FAILED",
        authToken === null ? "this server requires an auth token" : "wrong auth token",
        { fatal: true },
      );
    }
    session.handshaken = true;
    session.clientName = clientName;
    encodeWelcome(session.writer, {
      version: PROTOCOL_VERSION,
      limits: serverLimits(),
      nextSeq: this.visibleSeq,
    });
  }

  private publish(session: Session, frame: PublishFrame): void {
    const requestId = frame.requestId;
    if (this.failure !== null)
      return this.fail(session, "ARIA_ERR_STORAGE_FAILED", this.failure, { requestId });
    if (this.shuttingDown)
      return this.fail(session, "ARIA_ERR_SHUTTING_DOWN", "server is shutting down", { requestId });
    const messages = frame.messages;
    // Intern every topic first, so a batch is sequenced whole or not at all.
    const topicIds = new Int32Array(messages.count);
    for (let i = 0; messages.next(); i++) {
      const interned = this.topics.intern(messages.topic);
      if (!interned.ok)
        return this.fail(session, "ARIA_ERR_INVALID_TOPIC", interned.reason, { requestId });
      topicIds[i] = interned.topicId;
    }
    messages.rewind();
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
      try {
        this.store.append(seq, timeUs, messages.topic, source, start, payloadBytes);
      } catch (error) {
        // The store stopped in the background (a segment close or an fsync failed) before any
        // commit said so. Its failure is sticky and set between events, so this is the batch's
        // first message and nothing was sequenced.
        assert(i === 0, "Broker.publish: the store fails between events, never inside a batch");
        this.storageFailed(error);
        return this.fail(session, "ARIA_ERR_STORAGE_FAILED", this.failure ?? "storage failed", {
          requestId,
        });
      }
      this.nextSeq++;
      this.tip.append(topicIds[i], seq, timeUs, source, start, payloadBytes);
      this.countTopic(topicIds[i], payloadBytes);
      this.counters.bytesPublished += payloadBytes;
    }
    this.counters.messagesPublished += messages.count;
    this.pendingAcks.push({ session, requestId, firstSeq, count: messages.count });
    if (this.store.backlogged) this.pauseForStore(session);
  }

  /**
   * The store is behind on sorting (its journals or unsorted records are past their bound):
   * stop reading this publisher, so TCP back-pressure reaches it instead of the journals growing
   * without end. Frames already received are still handled. Every paused session is read again
   * once the store has caught up.
   */
  private pauseForStore(session: Session): void {
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

  private subscribe(session: Session, frame: SubscribeFrame): void {
    const id = frame.subscriptionId;
    if (session.subscriptions.has(id))
      return this.fail(
        session,
        "ARIA_ERR_DUPLICATE_SUBSCRIPTION",
        `subscription ${id} already exists on this connection`,
        { subscriptionId: id },
      );
    if (session.subscriptions.size >= SUBSCRIPTIONS_PER_CONNECTION_MAX) {
      return this.fail(
        session,
        "ARIA_ERR_TOO_MANY_SUBSCRIPTIONS",
        `a connection may hold ${SUBSCRIPTIONS_PER_CONNECTION_MAX} subscriptions`,
        { subscriptionId: id },
      );
    }
    const matcher = new FilterMatcher(this.topics, frame.filter);
    const start = frame.start;
    const subscription = new Subscription(session, id, frame.filter, matcher, this.visibleSeq);
    session.subscriptions.set(id, subscription);
    this.fanout.add(subscription);
    if (start.kind === "time") {
      this.resolveTime(subscription, start.timeUs);
      return;
    }
    const from =
      start.kind === "live" ? this.visibleSeq : start.kind === "earliest" ? 1 : start.seq;
    this.begin(subscription, from);
  }

  /** Starts a subscription's cursor at `fromSeq`: SUBSCRIBED, then the phase that holds it. */
  private begin(subscription: Subscription, fromSeq: number): void {
    const session = subscription.session;
    subscription.nextSeq = Math.max(1, fromSeq);
    session.endData();
    const oldest =
      this.tip.ring.count > 0 ? Math.min(this.tip.ring.firstSeq, this.visibleSeq) : this.visibleSeq;
    encodeSubscribed(session.writer, {
      subscriptionId: subscription.id,
      firstSeq: subscription.nextSeq,
    });
    subscription.startedUs = this.clock.nowUs();
    if (subscription.nextSeq >= this.visibleSeq) {
      this.goLive(subscription);
    } else if (subscription.nextSeq >= oldest) {
      this.counters.tipRecoveries++;
      subscription.recovery = "tip";
      this.toTip(subscription);
    } else {
      this.counters.diskRecoveries++;
      subscription.recovery = "disk";
      this.toDisk(subscription);
    }
  }

  /** A time start: the tip answers when it reaches back far enough, else one disk read finds the seq. */
  private resolveTime(subscription: Subscription, timeUs: number): void {
    const ring = this.tip.ring;
    // Strictly later than the oldest time the ring holds: seqs already evicted may share that
    // time (a PUBLISH batch's messages all do), and those are on disk only.
    if (ring.count > 0 && ring.timeAt(ring.tail) < timeUs) {
      this.begin(subscription, Math.min(this.tip.seqAtTime(timeUs), this.visibleSeq));
      return;
    }
    subscription.phase = Phase.Resolving;
    const committed = this.store.committedSeq;
    this.store
      .read(Filter.of("**"), { timeUs })
      .nextBatch()
      .then(
        (batch) => {
          if (subscription.phase === Phase.Closed) return;
          this.begin(subscription, batch.length > 0 ? batch[0].seq : committed + 1);
          this.afterEvent(subscription.session);
        },
        (error) => this.subscriptionFailed(subscription, error),
      );
  }

  private unsubscribe(session: Session, id: number): void {
    const subscription = session.subscriptions.get(id);
    if (subscription === undefined)
      return this.fail(
        session,
        "ARIA_ERR_UNKNOWN_SUBSCRIPTION",
        `no subscription ${id} on this connection`,
        { subscriptionId: id },
      );
    this.dropSubscription(subscription);
    session.endData();
    encodeUnsubscribed(session.writer, { subscriptionId: id });
  }

  // ---- Storage -----------------------------------------------------------------------------

  /** After every event: start a commit for what was appended; flush the session's frames. */
  private afterEvent(session: Session | null): void {
    if (
      !this.commitInFlight &&
      this.store.committedSeq < this.nextSeq - 1 &&
      this.failure === null
    ) {
      this.commitInFlight = true;
      this.store.commit().then(
        () => {
          this.commitInFlight = false;
          this.committed();
          this.afterEvent(null);
        },
        (error) => {
          this.commitInFlight = false;
          this.storageFailed(error);
        },
      );
    }
    if (session !== null) this.settle(session);
  }

  /** Storage made more durable: acknowledge publishers, move the visible end, fan out. */
  private committed(): void {
    const committedSeq = this.store.committedSeq;
    const touched = new Set<Session>();
    while (this.pendingAckHead < this.pendingAcks.length) {
      const ack = this.pendingAcks[this.pendingAckHead];
      if (ack.firstSeq + ack.count - 1 > committedSeq) break;
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
    if (this.pendingAckHead === this.pendingAcks.length) {
      this.pendingAcks.length = 0;
      this.pendingAckHead = 0;
    }
    const from = this.visibleSeq;
    if (committedSeq + 1 > from) {
      this.visibleSeq = committedSeq + 1;
      this.fanOut(from, this.visibleSeq, touched);
    }
    for (const session of touched) this.settle(session);
  }

  private storageFailed(error: unknown): void {
    // What is durable still counts: acknowledged and delivered (a failure may come after the
    // store committed part of what was waiting), the rest refused.
    if (this.failure === null) this.committed();
    this.failure = `storage failed: ${error instanceof Error ? error.message : String(error)}`;
    for (; this.pendingAckHead < this.pendingAcks.length; this.pendingAckHead++) {
      const ack = this.pendingAcks[this.pendingAckHead];
      if (ack.session.closed) continue;
      this.fail(ack.session, "ARIA_ERR_STORAGE_FAILED", this.failure, { requestId: ack.requestId });
      this.settle(ack.session);
    }
  }

  // ---- Delivery ----------------------------------------------------------------------------

  /**
   * Pushes the newly visible seqs [from, to) to LIVE subscriptions, batching per session: first
   * to the groups of subscriptions with equal filters (frames encoded once per group), then one
   * message at a time to the rest, from the lowest seq one of them still needs.
   */
  private fanOut(from: number, to: number, touched: Set<Session>): void {
    if (this.live.size === 0) return;
    const ring = this.tip.ring;
    if (from < ring.firstSeq) {
      // The ring already dropped some of them: every live cursor catches up through the tip or disk.
      for (const subscription of [...this.live]) this.toTip(subscription);
      this.schedulePump();
      return;
    }
    this.fanOutShared(from, to, touched);
    let loopFrom = to;
    for (const subscription of this.live)
      loopFrom = Math.min(loopFrom, Math.max(from, subscription.nextSeq));
    if (loopFrom < to) {
      let at = ring.offsetOfSeq(loopFrom);
      for (let seq = loopFrom; seq < to; seq++) {
        const subscriptions = this.fanout.of(ring.topicAt(at));
        for (let i = 0; i < subscriptions.length; i++) {
          const subscription = subscriptions[i];
          if (subscription.phase !== Phase.Live || seq < subscription.nextSeq) continue;
          if (subscription.session.backedUp) {
            // A slow client: its cursor stops at this seq and catches up from the tip once drained,
            // so one large group commit cannot queue past the session's limit.
            subscription.nextSeq = seq;
            this.stall(subscription);
            touched.add(subscription.session);
            continue;
          }
          this.deliverFromRing(subscription, at);
          touched.add(subscription.session);
        }
        if (seq + 1 < to) at = ring.after(at);
      }
    }
    for (const subscription of this.live) subscription.nextSeq = Math.max(subscription.nextSeq, to);
  }

  /**
   * Delivers [from, to) to each group of two or more live subscriptions with equal filters, at
   * `from` and not backed up, through frames encoded once per round (shared_data.ts). A member
   * whose session would pass its limit stops at the first seq of the frame it could not take
   * (its nextSeq), and the per-message loop of fanOut delivers and stalls it from there.
   */
  private fanOutShared(from: number, to: number, touched: Set<Session>): void {
    const ring = this.tip.ring;
    const members = this.sharedMembers;
    for (const group of this.fanout.groups()) {
      members.length = 0;
      for (const subscription of group) {
        if (
          subscription.phase === Phase.Live &&
          subscription.nextSeq <= from &&
          !subscription.session.backedUp
        )
          members.push(subscription);
      }
      if (members.length < 2) continue;
      const shared = this.sharedData;
      const position = { seq: from, at: ring.offsetOfSeq(from) };
      while (position.seq < to && members.length > 0) {
        shared.encode(ring, position, to, {
          matcher: members[0].matcher,
          topicUtf8: this.topicUtf8Of,
        });
        for (let m = members.length - 1; m >= 0; m--) {
          const subscription = members[m];
          const copied = subscription.session.addSharedFrames(subscription.id, shared);
          let messages = 0;
          for (let i = 0; i < copied; i++) messages += shared.messages(i);
          subscription.messagesDelivered += messages;
          this.counters.messagesDelivered += messages;
          this.counters.messagesDeliveredShared += messages;
          touched.add(subscription.session);
          if (copied === shared.frameCount) {
            subscription.nextSeq = shared.endSeq;
          } else {
            subscription.nextSeq = shared.firstSeq(copied);
            members[m] = members[members.length - 1];
            members.pop();
          }
        }
        position.seq = shared.endSeq;
        position.at = shared.endAt;
      }
    }
  }

  private deliverFromRing(subscription: Subscription, at: number): void {
    const ring = this.tip.ring;
    const topicId = ring.topicAt(at);
    const payloadStart = at + 24;
    subscription.session.addData(
      subscription.id,
      ring.seqAt(at),
      ring.timeAt(at),
      this.topicUtf8(topicId),
      ring.bytes,
      payloadStart,
      ring.payloadLengthAt(at),
    );
    subscription.messagesDelivered++;
    this.counters.messagesDelivered++;
  }

  private topicUtf8(topicId: number): Uint8Array {
    return (this.topicBytes[topicId] ??= this.encoder.encode(this.topics.topicName(topicId)));
  }

  private goLive(subscription: Subscription): void {
    this.catchingUp.delete(subscription);
    subscription.phase = Phase.Live;
    this.dropDiskReader(subscription);
    this.live.add(subscription);
    if (!subscription.caughtUpSent) {
      subscription.caughtUpSent = true;
      if (subscription.recovery !== null)
        this.recoverySeconds[subscription.recovery].observe(
          (this.clock.nowUs() - subscription.startedUs) / 1e6,
        );
      subscription.session.endData();
      encodeCaughtUp(subscription.session.writer, {
        subscriptionId: subscription.id,
        nextSeq: subscription.nextSeq,
      });
    }
  }

  private toTip(subscription: Subscription): void {
    this.live.delete(subscription);
    subscription.phase = Phase.Tip;
    this.dropDiskReader(subscription);
    this.catchingUp.add(subscription);
    this.schedulePump();
  }

  private dropDiskReader(subscription: Subscription): void {
    subscription.diskReader = null;
    subscription.diskBacklog = null;
    this.stalledReaders.delete(subscription);
  }

  private toDisk(subscription: Subscription): void {
    this.live.delete(subscription);
    this.catchingUp.add(subscription);
    subscription.phase = Phase.Disk;
    // Borrowed payloads: diskBatch copies each into the session's frames before the next batch.
    subscription.diskReader = this.store.read(
      subscription.filter,
      { seq: subscription.nextSeq },
      { borrow: true },
    );
    this.schedulePump();
  }

  private stall(subscription: Subscription): void {
    if (subscription.phase === Phase.Stalled || subscription.phase === Phase.Closed) return;
    subscription.stalledFrom = subscription.phase === Phase.Disk ? Phase.Disk : Phase.Tip;
    if (subscription.diskReader !== null) {
      if (this.stalledReaders.size < STALLED_DISK_READERS_KEPT_MAX)
        this.stalledReaders.add(subscription);
      else this.dropDiskReader(subscription);
    }
    this.live.delete(subscription);
    this.catchingUp.delete(subscription);
    subscription.phase = Phase.Stalled;
  }

  private resumeStalled(session: Session): void {
    let resumed = false;
    for (const subscription of session.subscriptions.values()) {
      if (subscription.phase !== Phase.Stalled) continue;
      resumed = true;
      this.stalledReaders.delete(subscription);
      if (subscription.stalledFrom === Phase.Disk && subscription.diskReader !== null) {
        subscription.phase = Phase.Disk;
        this.catchingUp.add(subscription);
      } else {
        this.toTip(subscription);
      }
    }
    if (resumed) this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    this.scheduler.soon(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** One round of catch-up: each catching-up subscription gets a bounded slice. */
  private pump(): void {
    const touched = new Set<Session>();
    for (const subscription of [...this.catchingUp]) {
      const session = subscription.session;
      // Hand the socket what earlier slices built, so "backed up" means the client is slow,
      // not that this round wrote a lot.
      session.flush();
      if (session.backedUp) {
        this.stall(subscription);
        continue;
      }
      if (subscription.phase === Phase.Tip) this.tipSlice(subscription);
      else if (subscription.phase === Phase.Disk && !subscription.diskBusy)
        this.diskSlice(subscription);
      touched.add(session);
    }
    for (const session of touched) this.settle(session);
    for (const subscription of this.catchingUp) {
      if (subscription.phase === Phase.Tip) {
        this.schedulePump();
        break;
      }
    }
  }

  /** Delivers up to a slice of a subscription's backlog from the tip. */
  private tipSlice(subscription: Subscription): void {
    if (subscription.nextSeq >= this.visibleSeq) {
      this.goLive(subscription);
      return;
    }
    const read = this.tip.read(subscription.matcher, subscription.nextSeq, {
      endSeq: this.visibleSeq,
    });
    if (!read.ok) {
      this.toDisk(subscription);
      return;
    }
    const cursor = read.cursor;
    const session = subscription.session;
    let bytes = 0;
    const sliceBytes = this.options.catchUpSliceBytes ?? CATCH_UP_SLICE_BYTES;
    while (bytes < sliceBytes && !session.backedUp) {
      if (!cursor.next()) {
        if (cursor.fellBehind) {
          subscription.nextSeq = cursor.resumeSeq;
          this.toDisk(subscription);
        } else {
          subscription.nextSeq = Math.max(subscription.nextSeq, this.visibleSeq);
          this.goLive(subscription);
        }
        return;
      }
      this.deliverFromRing(subscription, cursor.offset);
      bytes += this.tip.ring.payloadLengthAt(cursor.offset) + 64;
      subscription.nextSeq = cursor.resumeSeq;
    }
    if (session.backedUp) this.stall(subscription);
  }

  /** Asks the disk for a subscription's next batch; delivers it when it comes. */
  private diskSlice(subscription: Subscription): void {
    const reader = subscription.diskReader;
    assert(reader !== null, "diskSlice: a disk-phase subscription has a reader");
    const backlog = subscription.diskBacklog;
    if (backlog !== null) {
      // The rest of the batch a stall interrupted (borrowed payloads: no nextBatch call since).
      subscription.diskBacklog = null;
      this.diskBatch(subscription, backlog, -1);
      return;
    }
    subscription.diskBusy = true;
    const committedBefore = this.store.committedSeq;
    // A stall may drop this reader while its batch is in flight, and a resume give the
    // subscription another, which the pump skips meanwhile: that batch (or failure) then concerns
    // nothing, and the subscription is pumped again.
    const replaced = () => {
      if (subscription.diskReader === reader) return false;
      if (subscription.phase === Phase.Disk) this.schedulePump();
      return true;
    };
    reader.nextBatch().then(
      (batch) => {
        subscription.diskBusy = false;
        if (subscription.phase === Phase.Closed || replaced()) return;
        this.diskBatch(subscription, batch, committedBefore);
        this.settle(subscription.session);
      },
      (error) => {
        subscription.diskBusy = false;
        if (replaced()) return;
        this.subscriptionFailed(subscription, error);
      },
    );
  }

  private diskBatch(
    subscription: Subscription,
    batch: StoredMessageLike[],
    committedBefore: number,
  ): void {
    const session = subscription.session;
    for (let i = 0; i < batch.length; i++) {
      const message = batch[i];
      if (message.seq < subscription.nextSeq) continue;
      if (session.backedUp) {
        // A slow client: keep the rest of the batch for when it drains (stall() may drop it and
        // the reader; a fresh reader then resumes from nextSeq).
        subscription.diskBacklog = i === 0 ? batch : batch.slice(i);
        break;
      }
      const interned = this.topics.intern(message.topic);
      assert(interned.ok, "diskBatch: stored topics are valid");
      const topic = this.topicUtf8(interned.topicId);
      if (message.source !== undefined)
        session.addData(
          subscription.id,
          message.seq,
          message.timeUs,
          topic,
          message.source,
          message.start as number,
          message.length as number,
        );
      else
        session.addData(
          subscription.id,
          message.seq,
          message.timeUs,
          topic,
          message.payload,
          0,
          message.payload.length,
        );
      subscription.messagesDelivered++;
      this.counters.messagesDelivered++;
      subscription.nextSeq = message.seq + 1;
    }
    // An empty batch: nothing more matches up to what was committed when it was asked for.
    if (batch.length === 0)
      subscription.nextSeq = Math.max(subscription.nextSeq, committedBefore + 1);
    const ring = this.tip.ring;
    const tipHolds = subscription.nextSeq >= (ring.count > 0 ? ring.firstSeq : this.visibleSeq);
    if (subscription.phase === Phase.Stalled) return;
    if (tipHolds || subscription.nextSeq >= this.visibleSeq) this.toTip(subscription);
    else if (session.backedUp) this.stall(subscription);
    else this.schedulePump();
  }

  // ---- Sessions ----------------------------------------------------------------------------

  /** Flushes a session's frames; stops its cursors when its queue is full; closes it when asked. */
  private settle(session: Session): void {
    if (session.closed) return;
    session.flush();
    if (session.queuedBytes > 2 * session.queueBytesMax + FRAME_BYTES_MAX) {
      // Only control frames grow the queue past the cursor limit: a client that publishes but
      // never reads its acks. It cannot be served without unbounded memory.
      this.closeSession(session);
      return;
    }
    if (session.backedUp) {
      for (const subscription of session.subscriptions.values()) {
        if (subscription.phase === Phase.Live || subscription.phase === Phase.Tip)
          this.stall(subscription);
      }
    } else if (session.drained) {
      // The socket took everything: no drain event will come, so stalled cursors go on now.
      this.resumeStalled(session);
    }
    if (session.closing && session.queuedBytes === 0) this.closeSession(session);
  }

  private fail(
    session: Session,
    code: AriaErrorCode,
    reason: string,
    related: { fatal?: boolean; requestId?: number; subscriptionId?: number } = {},
  ): void {
    session.endData();
    const relatedKind =
      related.requestId !== undefined
        ? "request"
        : related.subscriptionId !== undefined
          ? "subscription"
          : "none";
    // These close the session whatever the caller says: the frame says so too (a client that
    // read them as not fatal reconnected into the same refusal at once).
    const fatal =
      related.fatal === true ||
      code === "ARIA_ERR_SHUTTING_DOWN" ||
      code === "ARIA_ERR_TOO_MANY_CONNECTIONS";
    encodeError(session.writer, {
      code,
      fatal,
      reason,
      relatedKind,
      relatedId: related.requestId ?? related.subscriptionId ?? 0,
    });
    if (fatal) session.closing = true;
  }

  private decodeFailed(session: Session, error: DecodeError): void {
    session.endData();
    // Before the handshake nothing is read on past bad bytes (docs/protocol.md: any frame but
    // HELLO first is a fatal HANDSHAKE_REQUIRED; bad bytes are no better).
    const fatal = error.fatal || !session.handshaken;
    encodeError(session.writer, { ...error, fatal });
    if (fatal) session.closing = true;
  }

  private subscriptionFailed(subscription: Subscription, error: unknown): void {
    if (subscription.phase === Phase.Closed) return;
    const session = subscription.session;
    this.dropSubscription(subscription);
    this.fail(
      session,
      "ARIA_ERR_STORAGE_FAILED",
      `reading subscription ${subscription.id} from disk failed: ${error instanceof Error ? error.message : String(error)}`,
      { subscriptionId: subscription.id },
    );
    this.settle(session);
  }

  private dropSubscription(subscription: Subscription): void {
    subscription.phase = Phase.Closed;
    this.dropDiskReader(subscription);
    subscription.session.subscriptions.delete(subscription.id);
    this.fanout.remove(subscription);
    this.live.delete(subscription);
    this.catchingUp.delete(subscription);
  }

  private closeSession(session: Session): void {
    if (session.closed) return;
    for (const subscription of [...session.subscriptions.values()])
      this.dropSubscription(subscription);
    session.closed = true;
    session.release();
    this.sessions.delete(session.id);
    session.connection.close();
  }
}
