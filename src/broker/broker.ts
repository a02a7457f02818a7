/**
 * Broker: the server's state machine, and the facade over its stages. It takes events — a
 * connection opened, bytes arrived, a socket drained, a connection closed, storage committed —
 * and answers with frames written to sessions. Pure: sockets, files and timers come in through
 * ports.ts. A message and a subscription each go through the stages in order, a stage per file:
 *
 *   dispatch.ts     sessions, frames in (HELLO, PUBLISH, SUBSCRIBE, UNSUBSCRIBE), errors out,
 *                   settling and closing sessions
 *   sign_in.ts      HELLO's credential ─▶ a user (a token verified off the event loop, or a
 *                   certificate subject) or a failure, counted and answered after a delay
 *   sequencer.ts    publish ─▶ seq ─▶ tip.append + store.append ─▶ commit ─▶ ack publishers
 *                                                                    └──▶ visibleSeq
 *   live_fanout.ts  visibleSeq moved ─▶ new seqs to LIVE subscriptions (shared frames per filter)
 *   catch_up.ts     subscribe ─▶ (time ─▶ seq) ─▶ DISK ─▶ TIP ─▶ LIVE; STALLED while backed up
 *   delivery.ts     the last step of every path: one message into a session, counted
 *   consumer_registry.ts  durable consumers: attach, positions moved by ACK, persisted by a port
 *   latest.ts       latestOf(filter): each matching topic's newest message (MQTT retained)
 *
 * Stages reach each other only through the small interfaces each declares for what it calls
 * (Publishing, SubscriptionMoves, FanoutIndex, SequencerOutput, SessionOutcomes, LiveSet,
 * VisibleEnd, SignInOutput);
 * the constructor below is the one place they are wired. Where two stages call each other
 * (dispatch settles what catch-up delivered; catch-up stalls what dispatch settles), the wiring
 * goes through arrow functions, so the order of construction does not matter.
 *
 * The visible end. A message becomes visible to subscribers only once it is durable
 * (`visibleSeq` = committed + 1), so no subscriber ever sees a seq that a crash could take back.
 * Back-pressure: a session whose send queue is full stops its subscriptions (STALLED); nothing more
 * is built for it. When it drains, its subscriptions catch up from the tip, or the disk if the ring
 * moved past them.
 */
import type { MessageBatch } from "../protocol/mod.ts";
import type { Log } from "../stdx/log.ts";
import type { Histogram } from "../stdx/histogram.ts";
import type { Tip } from "../tip/mod.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { Filter } from "../topic/filter.ts";
import { CatchUp, RECOVERY_SECONDS_BOUNDS } from "./catch_up.ts";
import { Delivery } from "./delivery.ts";
import { Dispatch, type DispatchOptions } from "./dispatch.ts";
import { LiveFanout } from "./live_fanout.ts";
import { Latest, type LatestEntry, type LatestMessage } from "./latest.ts";
import { type ConsumerInfo, ConsumerRegistry } from "./consumer_registry.ts";
import type { BrokerStore, Clock, Connection, ConsumerStore, Scheduler } from "./ports.ts";
import { Sequencer } from "./sequencer.ts";
import { type AckMode, ReplicaTracker } from "../replica/tracker.ts";
import { Phase, type SubscriberSession, type Subscription } from "./subscription.ts";

export { RECOVERY_SECONDS_BOUNDS };

/** What a broker is built from. */
export interface BrokerOptions {
  topics: TopicTable;
  tip: Tip;
  store: BrokerStore;
  clock: Clock;
  scheduler: Scheduler;
  /** When set, HELLO must carry this token. */
  authToken?: string;
  /** Users, failed sign-in throttle and timer of signing in (see dispatch.ts). */
  signIn?: Pick<DispatchOptions, "users" | "throttle" | "scheduleAfter">;
  /** Where connections opened and closed, failed sign-ins and stalls are logged (absent: nowhere). */
  log?: Log;
  connectionsMax?: number;
  /** Connections one source address may hold (tests shrink it). */
  connectionsPerAddressMax?: number;
  /** Send-queue bytes at which a session's subscriptions stop (tests shrink it). */
  sendQueueBytesMax?: number;
  /** Bytes one subscription may write per catch-up slice (tests shrink it). */
  catchUpSliceBytes?: number;
  /** Bytes of DATA one event builds for all sessions together (tests shrink it). */
  eventBytesMax?: number;
  /** Disk readers held at once by all subscriptions (tests shrink it). */
  diskReadersMax?: number;
  /** How long a begun frame may take to arrive whole (tests shrink it). */
  frameDeadlineUs?: number;
  /** Bytes of incomplete frames all connections may hold (tests shrink it). */
  inputBytesMax?: number;
  /** Where durable consumers' positions persist (absent: in memory only, lost at a restart). */
  consumerStore?: ConsumerStore;
  /** Durable consumers the server keeps (CONSUMERS_MAX; tests shrink it). */
  consumersMax?: number;
  /** When a PUBLISH is acknowledged: `leader` (default), `quorum` or `all` (docs/cluster.md). */
  acks?: AckMode;
  /** A replica not caught up within the last this long leaves the ISR (µs). */
  isrMaxLagUs?: number;
  /** The replicas `--acks quorum` counts, seen or not (absent: those seen since start). */
  replicasExpected?: number;
  /** This server's node id when it has one (a replica): it refuses to follow itself. */
  nodeId?: string;
}

/** Counters of a broker, for metrics. */
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
  /** Failed sign-ins (a missing or wrong token or certificate) since start (absent in fakes). */
  authFailures?: number;
}

const PHASE_NAMES = ["resolving", "disk", "tip", "live", "stalled"] as const;

/** How far one subscription is behind the visible end (Broker.largestLags). */
export interface SubscriptionLag {
  session: number;
  subscription: number;
  /** Its filter's entries, comma-separated. */
  filter: string;
  phase: (typeof PHASE_NAMES)[number];
  /** Seqs between its position and the visible end (not all of them match it). */
  seqsBehind: number;
}

/** The server's state machine. */
export class Broker {
  /** How long subscriptions took from SUBSCRIBED to CAUGHT_UP, by where they started. */
  readonly recoverySeconds: { tip: Histogram; disk: Histogram };
  /** Open sessions by id (dispatch's table; the simulator reads it to check queue bounds). */
  private readonly sessions: Map<number, SubscriberSession>;
  private readonly delivery: Delivery;
  private readonly sequencer: Sequencer;
  private readonly catchUp: CatchUp;
  private readonly fanout: LiveFanout;
  private readonly dispatch: Dispatch;
  private readonly consumers: ConsumerRegistry;
  private readonly latest: Latest;
  /** The replicas following this broker (src/replica/tracker.ts). */
  readonly replicas: ReplicaTracker;

  constructor(options: BrokerOptions) {
    const { topics, tip, store, clock } = options;
    this.consumers = new ConsumerRegistry(
      options.consumerStore,
      options.consumersMax,
      store.nextSeq,
    );
    const sessionOutcomes = {
      settle: (session: SubscriberSession) => this.dispatch.settle(session),
      afterEvent: (session: SubscriberSession) => this.dispatch.afterEvent(session),
      subscriptionFailed: (subscription: Subscription, error: unknown) =>
        this.dispatch.subscriptionFailed(subscription, error),
    };
    const records = tip.records;
    this.replicas = new ReplicaTracker(
      {
        get durableSeq() {
          return store.committedSeq;
        },
        timeOfSeq: (seq) =>
          records.count > 0 && seq >= records.firstSeq && seq < records.nextSeq
            ? records.timeAt(records.offsetOfSeq(seq))
            : null,
        nowUs: () => clock.nowUs(),
      },
      {
        log: options.log,
        acks: options.acks,
        isrMaxLagUs: options.isrMaxLagUs,
        replicasExpected: options.replicasExpected,
        nodeId: options.nodeId,
        onAckable: () => this.sequencer.acksMayAdvance(),
      },
    );
    this.sequencer = new Sequencer({
      topics,
      tip,
      store,
      clock,
      ackableSeq:
        options.acks === undefined || options.acks === "leader"
          ? undefined
          : () => this.replicas.ackableSeq(),
      output: {
        fail: (session, code, reason, related) =>
          this.dispatch.fail(session, code, reason, related),
        settle: sessionOutcomes.settle,
        fanOut: (from, to, touched) => this.fanout.fanOut(from, to, touched),
      },
    });
    this.delivery = new Delivery(topics, tip.records);
    this.catchUp = new CatchUp({
      tip,
      store,
      clock,
      scheduler: options.scheduler,
      delivery: this.delivery,
      visible: this.sequencer,
      sessions: sessionOutcomes,
      sliceBytes: options.catchUpSliceBytes,
      roundBytes: options.eventBytesMax,
      diskReadersMax: options.diskReadersMax,
      log: options.log,
    });
    this.fanout = new LiveFanout(tip.records, this.delivery, this.catchUp, options.eventBytesMax);
    this.dispatch = new Dispatch({
      topics,
      clock,
      publishing: this.sequencer,
      moves: this.catchUp,
      fanout: this.fanout,
      authToken: options.authToken,
      ...options.signIn,
      log: options.log,
      connectionsMax: options.connectionsMax,
      connectionsPerAddressMax: options.connectionsPerAddressMax,
      sendQueueBytesMax: options.sendQueueBytesMax,
      frameDeadlineUs: options.frameDeadlineUs,
      inputBytesMax: options.inputBytesMax,
      consumers: this.consumers,
      replicas: this.replicas,
    });
    this.sessions = this.dispatch.sessions;
    this.recoverySeconds = this.catchUp.recoverySeconds;
    this.latest = new Latest({ topics, tip, store, sequencer: this.sequencer });
  }

  /**
   * The newest visible message of every topic matching `filter` (MQTT's retained messages), in
   * seq order, with copies of their payloads and properties (latest.ts).
   */
  latestOf(filter: Filter): Promise<LatestMessage[]> {
    return this.latest.latestOf(filter);
  }

  /** Each topic matching `filter` with its newest visible seq, in seq order (latest.ts). */
  newestOf(filter: Filter): Promise<LatestEntry[]> {
    return this.latest.newestOf(filter);
  }

  /** The messages of newestOf's `entries`, copies; one retention removed is left out. */
  latestMessagesOf(entries: readonly LatestEntry[]): Promise<LatestMessage[]> {
    return this.latest.messagesOf(entries);
  }

  // ---- Events ------------------------------------------------------------------------------

  /** A connection opened; returns its session id (the connection is closed when over the limit). */
  open(connection: Connection): number {
    return this.dispatch.open(connection);
  }

  /** Bytes arrived on session `sessionId`. */
  receive(sessionId: number, bytes: Uint8Array): void {
    this.dispatch.receive(sessionId, bytes);
  }

  /** The connection of session `sessionId` can take more bytes. */
  writable(sessionId: number): void {
    this.dispatch.writable(sessionId);
  }

  /**
   * Ends connections that hold a slot for nothing (the runtime calls this every second or so):
   * one that sent no HELLO within HANDSHAKE_TIMEOUT_US gets a fatal HANDSHAKE_REQUIRED (idle
   * connections had filled every slot, a token set or not); one closing after a fatal error whose
   * peer does not read it is closed CLOSING_LINGER_US after this first saw it closing.
   */
  expire(nowUs: number): void {
    this.dispatch.expire(nowUs);
    this.replicas.reviewAll();
  }

  /** Counts a failed sign-in made elsewhere (a bearer token the admin app refused). */
  countAuthFailure(): void {
    this.dispatch.signIn.failures++;
  }

  /** The users were reloaded (--users on SIGHUP): open sessions take the new permissions. */
  usersReplaced(): void {
    this.dispatch.usersReplaced();
  }

  /** The connection of session `sessionId` closed. */
  closed(sessionId: number): void {
    this.dispatch.closed(sessionId);
  }

  // ---- Replica (src/replica/) ---------------------------------------------------------------

  /** Makes this broker a replica of `leaderUrl`: its PUBLISH frames are refused with NOT_LEADER. */
  follow(leaderUrl: string): void {
    this.sequencer.leaderUrl = leaderUrl;
  }

  /**
   * Appends a leader's DATA batch with the leader's seqs and times and starts its commit (it
   * becomes visible to this broker's subscribers once durable here); null, or why nothing of it
   * was appended (Sequencer.replicate).
   */
  replicate(messages: MessageBatch): string | null {
    const refused = this.sequencer.replicate(messages);
    if (refused === null) this.sequencer.commitIfDue();
    return refused;
  }

  /** While the store is behind on its background work (append no more), when it caught up. */
  storeBacklog(): Promise<void> | null {
    return this.sequencer.storeBacklog();
  }

  /** An empty replica begins at `seq`, its leader's oldest held seq (Sequencer.beginAt). */
  beginAt(seq: number): Promise<void> {
    return this.sequencer.beginAt(seq);
  }

  /** The seq the next message gets (a replica: the leader's seq it needs next). */
  get nextSeq(): number {
    return this.sequencer.nextSeq;
  }

  /** The last seq durable here. */
  get durableSeq(): number {
    return this.sequencer.durableSeq;
  }

  /** Publishes waiting for their PUBLISH_ACK, and the queue's entries kept (answered ones too). */
  get pendingAckCounts(): { waiting: number; kept: number } {
    return this.sequencer.pendingAckCounts;
  }

  /** Resolves once every seq below `seq` is durable and visible here (or storage failed). */
  whenVisible(seq: number): Promise<void> {
    return this.sequencer.whenVisible(seq);
  }

  /**
   * Graceful shutdown: refuse new work, wait for storage to commit what was appended, acknowledge
   * it, then close every session with a SHUTTING_DOWN error.
   */
  async shutdown(): Promise<void> {
    await this.sequencer.drain();
    this.dispatch.closeAll();
  }

  // ---- Metrics -----------------------------------------------------------------------------

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
    const published = this.sequencer.counters;
    return {
      connections: this.sessions.size,
      subscriptions,
      subscriptionsByPhase: byPhase,
      messagesPublished: published.messagesPublished,
      bytesPublished: published.bytesPublished,
      messagesDelivered: this.delivery.messagesDelivered,
      messagesDeliveredShared: this.delivery.messagesDeliveredShared,
      publishersPaused: published.publishersPaused,
      nextSeq: this.sequencer.nextSeq,
      visibleSeq: this.sequencer.visibleSeq,
      recoveries: { disk: this.catchUp.recoveries.disk, tip: this.catchUp.recoveries.tip },
      authFailures: this.dispatch.signIn.failures,
    };
  }

  /**
   * The `count` subscriptions furthest behind the visible end (seqs behind, largest first), for
   * metrics: a reader falling behind shows before it stalls. One pass, a sorted array of `count`.
   */
  largestLags(count: number): SubscriptionLag[] {
    const largest: SubscriptionLag[] = [];
    if (count <= 0) return largest;
    const visibleSeq = this.sequencer.visibleSeq;
    for (const session of this.sessions.values()) {
      for (const subscription of session.subscriptions.values()) {
        if (subscription.phase === Phase.Closed) continue;
        const seqsBehind = Math.max(0, visibleSeq - subscription.nextSeq);
        if (largest.length === count && seqsBehind <= largest[count - 1].seqsBehind) continue;
        const lag: SubscriptionLag = {
          session: session.id,
          subscription: subscription.id,
          filter: subscription.filter.toStrings().join(","),
          phase: PHASE_NAMES[subscription.phase],
          seqsBehind,
        };
        let at = largest.length === count ? count - 1 : largest.length;
        while (at > 0 && largest[at - 1].seqsBehind < seqsBehind) {
          largest[at] = largest[at - 1];
          at--;
        }
        largest[at] = lag;
      }
    }
    return largest;
  }

  // ---- Durable consumers -------------------------------------------------------------------

  /** The durable consumers, by name (the admin API's GET /api/consumers). */
  consumerList(): ConsumerInfo[] {
    return this.consumers.list(this.sequencer.visibleSeq);
  }

  /** Removes durable consumer `name`: "unknown", "busy" (a subscription of it is open), "removed". */
  removeConsumer(name: string): "removed" | "unknown" | "busy" {
    return this.consumers.remove(name);
  }

  /** Messages and payload bytes published per topic since this broker started. */
  topicVolumes(): { topic: string; bytes: number; messages: number }[] {
    return this.sequencer.topicVolumes();
  }
}
