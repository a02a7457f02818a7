/**
 * Dispatch: the stage where connection events enter the broker — sessions opened, bytes decoded
 * into frames and each frame sent to the stage that owns it, errors answered, sessions settled
 * (flushed, their subscriptions stopped or resumed) and closed.
 *
 *   open ─▶ Session ─ bytes ─▶ decoder ─▶ HELLO        handshake, WELCOME
 *                                        ├ PUBLISH      ─▶ sequencer
 *                                        ├ SUBSCRIBE    ─▶ fan-out index + catch-up start
 *                                        ├ UNSUBSCRIBE  ─▶ drop the subscription, UNSUBSCRIBED
 *                                        ├ ACK          ─▶ the durable consumer's position
 *                                        └ PING, bad bytes, frames out of place ─▶ PONG, ERROR
 *   after each event: a commit if due, then settle ─▶ flush ─▶ backed up? stall : resume
 *
 * Users. HELLO's credential goes to the sign-in stage (sign_in.ts), which may keep a session
 * pending (no frame of it read) until a token is verified or a failure's delay ran out. A
 * signed-in user's PUBLISH and SUBSCRIBE are checked against its permissions (refused whole with
 * PERMISSION_DENIED); a reload of the users (usersReplaced) applies the new permissions to open
 * sessions, dropping the subscriptions they no longer allow.
 *
 * Not here: sequencing, catch-up and fan-out themselves; the stages are reached through the small
 * interfaces below. Invariants: a session is in `sessions` from open until closeSession; a
 * closed session holds no subscription; no frame but HELLO is handled before the handshake; no
 * frame is read while a session's sign-in is pending.
 */
import type { User } from "../auth/mod.ts";
import {
  CLOSING_LINGER_US,
  CONNECTION_BUFFERED_BYTES_MAX,
  CONNECTIONS_MAX,
  CONNECTIONS_PER_ADDRESS_MAX,
  FRAME_BYTES_MAX,
  FRAME_INCOMPLETE_DEADLINE_US,
  HANDSHAKE_TIMEOUT_US,
  INPUT_BUFFERED_BYTES_MAX,
  PROTOCOL_VERSION,
  SUBSCRIPTIONS_PER_CONNECTION_MAX,
} from "../constants.ts";
import {
  type AriaErrorCode,
  type DecodeError,
  encodeError,
  encodePong,
  encodeUnsubscribed,
  encodeWelcome,
  type Frame,
  InputBudget,
  type PublishFrame,
  type SubscribeFrame,
  serverLimits,
  TopicCache,
} from "../protocol/mod.ts";
import { FilterMatcher } from "../topic/filter_matcher.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { Consumer, ConsumerRegistry } from "./consumer_registry.ts";
import type { Clock, Connection } from "./ports.ts";
import { GroupCursors } from "./group_cursor.ts";
import { REPLICA_NAME_PREFIX } from "../replica/tracker.ts";
import { QueueChunkPool, Session } from "./session.ts";
import { SignIn, type SignInOptions } from "./sign_in.ts";
import { Phase, type SubscriberSession, Subscription } from "./subscription.ts";

/** What dispatch asks of the sequencer (sequencer.ts). */
export interface Publishing {
  readonly visibleSeq: number;
  readonly shuttingDown: boolean;
  publish(session: SubscriberSession, frame: PublishFrame): void;
  commitIfDue(): void;
}

/** What dispatch asks of catch-up (catch_up.ts). */
export interface SubscriptionMoves {
  start(subscription: Subscription, start: SubscribeFrame["start"]): void;
  stall(subscription: Subscription): void;
  resumeStalled(session: SubscriberSession): void;
  drop(subscription: Subscription): void;
}

/** What dispatch asks of live fan-out (live_fanout.ts): its topic index. */
export interface FanoutIndex {
  register(subscription: Subscription): void;
  unregister(subscription: Subscription): void;
}

/** What dispatch is built from (with how HELLO signs in: sign_in.ts). */
export interface DispatchOptions extends SignInOptions {
  topics: TopicTable;
  clock: Clock;
  publishing: Publishing;
  moves: SubscriptionMoves;
  fanout: FanoutIndex;
  connectionsMax?: number;
  /** Connections one source address may hold (CONNECTIONS_PER_ADDRESS_MAX; tests shrink it). */
  connectionsPerAddressMax?: number;
  /** Send-queue bytes at which a session's subscriptions stop (tests shrink it). */
  sendQueueBytesMax?: number;
  /** How long a begun frame may take to arrive whole (tests shrink it). */
  frameDeadlineUs?: number;
  /** Bytes of incomplete frames all sessions may hold (tests shrink it). */
  inputBytesMax?: number;
  /** The durable consumers (SUBSCRIBE option DURABLE, ACK). */
  consumers: ConsumerRegistry;
  /** Replicas following this server (DURABLE `$replica/<node-id>`; src/replica/tracker.ts). */
  replicas?: ReplicaPort;
}

/** What dispatch asks of the replica tracker (src/replica/tracker.ts). */
export interface ReplicaPort {
  refusal(clientName: string, filter: readonly string[], name?: string): string | null;
  /** `startSeq`: where the replica's SUBSCRIBE starts (its next seq or its newest held). */
  attach(name: string, subscription: Subscription, startSeq?: number): void;
  detach(subscription: Subscription): void;
  /** True when the ACK was a replica's (recorded). */
  ack(subscription: Subscription, seq: number): boolean;
}

/** What an ERROR concerns (a request, a subscription) and whether it ends the session. */
export type ErrorRelated = { fatal?: boolean; requestId?: number; subscriptionId?: number };

/** Sessions, frames in, errors out. */
export class Dispatch {
  /** Open sessions by id. */
  readonly sessions = new Map<number, SubscriberSession>();
  /** Open sessions per source address (connections that say theirs). */
  private readonly perAddress = new Map<string, number>();
  /** HELLO's credential to a user; failed sign-ins counted there. */
  readonly signIn: SignIn;
  /** Send-queue chunks shared by every session. */
  private readonly queueChunks = new QueueChunkPool();
  private readonly topicCache = new TopicCache();
  /** Incomplete frames' bytes, shared by every session's decoder. */
  private readonly inputBudget: InputBudget;
  private nextSessionId = 1;
  private readonly publishing: Publishing;
  private readonly moves: SubscriptionMoves;
  private readonly fanout: FanoutIndex;
  private readonly consumers: ConsumerRegistry;
  /** The shared groups being served (group_cursor.ts). */
  readonly groups: GroupCursors;

  constructor(private readonly options: DispatchOptions) {
    this.consumers = options.consumers;
    this.publishing = options.publishing;
    this.moves = options.moves;
    this.fanout = options.fanout;
    this.groups = new GroupCursors({
      topics: options.topics,
      topicCache: this.topicCache,
      clock: options.clock,
      consumers: options.consumers,
      moves: options.moves,
      fanout: options.fanout,
      settle: (session) => this.settle(session),
    });
    this.inputBudget = new InputBudget(options.inputBytesMax ?? INPUT_BUFFERED_BYTES_MAX);
    this.signIn = new SignIn(options, {
      clock: options.clock,
      welcome: (session, clientName, user) => this.welcome(session, clientName, user),
      fail: (session, code, reason, related) => this.fail(session, code, reason, related),
      readOn: (session, held) => this.readOn(session, held),
      afterEvent: (session) => this.afterEvent(session),
    });
  }

  // ---- Events ------------------------------------------------------------------------------

  /** A connection opened; returns its session id (the connection is closed when over the limit). */
  open(connection: Connection): number {
    const session: SubscriberSession = new Session(
      this.nextSessionId++,
      connection,
      this.topicCache,
      this.options.sendQueueBytesMax ?? CONNECTION_BUFFERED_BYTES_MAX,
      this.queueChunks,
      this.inputBudget,
    );
    session.openedUs = this.options.clock.nowUs();
    const shuttingDown = this.publishing.shuttingDown;
    const address = countedAddress(connection.remoteAddress);
    const fromAddress = address === undefined ? 0 : (this.perAddress.get(address) ?? 0);
    const perAddressMax = this.options.connectionsPerAddressMax ?? CONNECTIONS_PER_ADDRESS_MAX;
    const refusal = shuttingDown
      ? "server is shutting down"
      : this.sessions.size >= (this.options.connectionsMax ?? CONNECTIONS_MAX)
        ? `server holds ${this.sessions.size} connections, the limit`
        : fromAddress >= perAddressMax
          ? `${address} holds ${fromAddress} connections, the limit for one address`
          : null;
    if (refusal !== null) {
      const code = shuttingDown ? "ARIA_ERR_SHUTTING_DOWN" : "ARIA_ERR_TOO_MANY_CONNECTIONS";
      this.fail(session, code, refusal);
      session.flush();
      connection.close();
      return session.id;
    }
    if (address !== undefined) this.perAddress.set(address, fromAddress + 1);
    this.sessions.set(session.id, session);
    this.options.log?.info("connection opened", {
      session: session.id,
      address: connection.remoteAddress,
    });
    return session.id;
  }

  /** Bytes arrived on session `sessionId`. */
  receive(sessionId: number, bytes: Uint8Array): void {
    const session = this.sessions.get(sessionId);
    if (session === undefined || session.closing) return;
    if (this.signIn.isPending(session)) return this.signIn.hold(session, bytes);
    session.decoder.push(bytes);
    this.readFrames(session);
    this.afterEvent(session);
  }

  /** Handles the frames the decoder holds, until it is empty, the session closes or signs in. */
  private readFrames(session: SubscriberSession): void {
    const decoder = session.decoder;
    let frames = 0;
    for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
      frames++;
      if (frame.kind === "decode_error") this.decodeFailed(session, frame);
      else this.handle(session, frame);
      if (session.closing || this.signIn.isPending(session)) break;
    }
    // The deadline runs from when a frame began to arrive: a frame completed here restarts it.
    if (decoder.bufferedBytes === 0) session.partialFrameSinceUs = -1;
    else if (frames > 0 || session.partialFrameSinceUs < 0)
      session.partialFrameSinceUs = this.options.clock.nowUs();
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
    if (session.drained) {
      this.moves.resumeStalled(session);
      this.groups.drained(session);
    }
  }

  /** Ends connections that hold a slot for nothing (see Broker.expire). */
  expire(nowUs: number): void {
    for (const session of [...this.sessions.values()]) {
      // A pending sign-in ends by itself (a verification, or a failure's bounded delay).
      if (this.signIn.isPending(session)) continue;
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
      const deadlineUs = this.options.frameDeadlineUs ?? FRAME_INCOMPLETE_DEADLINE_US;
      if (
        !session.closing &&
        session.partialFrameSinceUs >= 0 &&
        nowUs - session.partialFrameSinceUs >= deadlineUs
      ) {
        this.fail(
          session,
          "ARIA_ERR_MALFORMED_FRAME",
          `a frame began arriving ${((nowUs - session.partialFrameSinceUs) / 1e6).toFixed(1)} s ago and is still incomplete (${session.decoder.bufferedBytes} bytes); frames must arrive whole within ${deadlineUs / 1e6} s`,
          { fatal: true },
        );
        session.decoder.release();
        session.partialFrameSinceUs = -1;
        this.afterEvent(session);
        continue;
      }
      if (!session.closing || session.closed) continue;
      if (session.closingSeenUs < 0) session.closingSeenUs = nowUs;
      else if (nowUs - session.closingSeenUs >= CLOSING_LINGER_US)
        this.closeSession(session, "lingered after its fatal error without reading");
    }
  }

  /** The connection of session `sessionId` closed. */
  closed(sessionId: number): void {
    const session = this.sessions.get(sessionId);
    if (session !== undefined) this.closeSession(session);
  }

  /** Closes every session with a SHUTTING_DOWN error (the last step of a graceful shutdown). */
  closeAll(): void {
    for (const session of [...this.sessions.values()]) {
      this.fail(session, "ARIA_ERR_SHUTTING_DOWN", "server is shutting down");
      session.flush();
      this.closeSession(session);
    }
  }

  // ---- Frames ------------------------------------------------------------------------------

  private handle(session: SubscriberSession, frame: Frame): void {
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
        if (session.user !== null && !this.publishAllowed(session, session.user, frame)) return;
        return this.publishing.publish(session, frame);
      case "subscribe":
        return this.subscribe(session, frame);
      case "unsubscribe":
        return this.unsubscribe(session, frame.subscriptionId);
      case "ack":
        return this.ack(session, frame.subscriptionId, frame.seq);
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
    session: SubscriberSession,
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
    this.signIn.hello(session, clientName, authToken);
  }

  private welcome(session: SubscriberSession, clientName: string, user: User | null): void {
    session.handshaken = true;
    session.clientName = clientName;
    session.user = user;
    encodeWelcome(session.writer, {
      version: PROTOCOL_VERSION,
      limits: serverLimits(),
      nextSeq: this.publishing.visibleSeq,
    });
  }

  /** Reads on after a sign-in answered: what the decoder holds, then the chunks held meanwhile. */
  private readOn(session: SubscriberSession, held: Uint8Array[]): void {
    if (!session.closing && !this.signIn.isPending(session)) this.readFrames(session);
    while (held.length > 0 && !session.closing && !this.signIn.isPending(session)) {
      session.decoder.push(held.shift() as Uint8Array);
      this.readFrames(session);
    }
    this.afterEvent(session);
  }

  /** True when `user` may publish every topic of `frame`; else answers PERMISSION_DENIED. */
  private publishAllowed(session: SubscriberSession, user: User, frame: PublishFrame): boolean {
    const messages = frame.messages;
    const topics = this.options.topics;
    let checked = "";
    let refused: string | null = null;
    while (messages.next()) {
      const topic = messages.topic;
      // A batch's messages share one string per topic: a run of one topic is checked once.
      if (topic === checked) continue;
      checked = topic;
      if (!user.permissions.mayPublish(topic, topics)) {
        refused = topic;
        break;
      }
    }
    messages.rewind();
    if (refused === null) return true;
    this.fail(
      session,
      "ARIA_ERR_PERMISSION_DENIED",
      `user "${user.name}" may not publish to "${refused}"`,
      { requestId: frame.requestId },
    );
    return false;
  }

  /**
   * The users were reloaded: each session's user is the one of that name now, and keeps only
   * the subscriptions its permissions still allow; a session whose user is gone ends.
   */
  usersReplaced(): void {
    const users = this.options.users;
    if (users === undefined) return;
    for (const session of [...this.sessions.values()]) {
      const before = session.user;
      if (before === null || session.closing) continue;
      const user = users.user(before.name);
      if (user === undefined) {
        this.fail(session, "ARIA_ERR_AUTH_FAILED", `user "${before.name}" was removed`, {
          fatal: true,
        });
      } else {
        session.user = user;
        for (const subscription of [...session.subscriptions.values()]) {
          const refused = user.permissions.subscribeRefusal(subscription.filter);
          if (refused === null) continue;
          this.dropSubscription(subscription);
          this.fail(
            session,
            "ARIA_ERR_PERMISSION_DENIED",
            `user "${user.name}" may no longer subscribe to "${refused}": subscription ${subscription.id} ended`,
            { subscriptionId: subscription.id },
          );
        }
      }
      this.settle(session);
    }
  }

  private subscribe(session: SubscriberSession, frame: SubscribeFrame): void {
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
    const user = session.user;
    const refused = user === null ? null : user.permissions.subscribeRefusal(frame.filter);
    if (refused !== null)
      return this.fail(
        session,
        "ARIA_ERR_PERMISSION_DENIED",
        `user "${user?.name}" may not subscribe to "${refused}" (a filter is refused whole, never narrowed)`,
        { subscriptionId: id },
      );
    let consumer: Consumer | null = null;
    let start = frame.start;
    // A replica (aria serve --follow) starts where it says and reports its durable seq by ACK.
    const replica = frame.durable?.startsWith(REPLICA_NAME_PREFIX) === true;
    if (replica) {
      const replicas = this.options.replicas;
      const refusal =
        replicas === undefined
          ? "this server takes no replicas"
          : replicas.refusal(session.clientName, frame.filter.toStrings(), frame.durable);
      if (refusal !== null)
        return this.fail(session, "ARIA_ERR_PERMISSION_DENIED", refusal, { subscriptionId: id });
    } else if (frame.durable !== undefined) {
      const durable = this.durable(session, frame, frame.durable);
      if (durable === null) return;
      consumer = durable.consumer;
      start = durable.start;
    }
    const matcher = new FilterMatcher(this.options.topics, frame.filter);
    const visibleSeq = this.publishing.visibleSeq;
    const subscription = new Subscription(
      session,
      id,
      frame.filter,
      matcher,
      visibleSeq,
      frame.properties === true,
    );
    subscription.consumer = consumer;
    session.subscriptions.set(id, subscription);
    if (replica)
      this.options.replicas?.attach(
        frame.durable as string,
        subscription,
        start.kind === "seq" ? start.seq : undefined,
      );
    // A shared group's member: the group's cursor reads, the group gives it its share.
    if (consumer?.shared) return this.groups.join(subscription, consumer, start);
    this.fanout.register(subscription);
    this.moves.start(subscription, start);
  }

  /**
   * A durable SUBSCRIBE: the consumer attached and where it starts (a known consumer after its
   * position, never past the visible end; a new one where the SUBSCRIBE says), or null: refused.
   */
  private durable(
    session: SubscriberSession,
    frame: SubscribeFrame,
    name: string,
  ): { consumer: Consumer; start: SubscribeFrame["start"] } | null {
    const id = frame.subscriptionId;
    // The names the MQTT door makes are its own: a native client could take an MQTT session's.
    if (reservedConsumerName(name) && session.connection.door !== "mqtt")
      return (
        this.fail(
          session,
          "ARIA_ERR_PERMISSION_DENIED",
          `durable consumer names starting mqtt/ or $share/ are the MQTT door's; use another name`,
          { subscriptionId: id },
        ),
        null
      );
    const attached = this.consumers.attach(name, frame.filter, {
      shared: frame.shared === true,
      nowUs: this.options.clock.nowUs(),
      user: session.user?.name ?? null,
    });
    if (!attached.ok)
      return (this.fail(session, attached.code, attached.reason, { subscriptionId: id }), null);
    const consumer = attached.consumer;
    if (consumer.nextSeq === 0) return { consumer, start: frame.start };
    // A store that lost unsynced seqs in a crash (fsync not always) gives them again: the
    // position must not be past them, or the new messages with those seqs would be skipped.
    const seq = Math.max(1, Math.min(consumer.nextSeq, this.publishing.visibleSeq));
    return { consumer, start: { kind: "seq", seq } };
  }

  /** ACK: a durable subscription processed everything delivered up to `seq`. */
  private ack(session: SubscriberSession, id: number, seq: number): void {
    const subscription = session.subscriptions.get(id);
    if (subscription === undefined)
      return this.fail(
        session,
        "ARIA_ERR_UNKNOWN_SUBSCRIPTION",
        `ACK for subscription ${id}, which is not open on this connection`,
        { subscriptionId: id },
      );
    const group = this.groups.of(subscription);
    if (group !== undefined) {
      // A member acknowledges what it was given, in the order given (shared_group.ts).
      const acked = group.ack(subscription, seq);
      if (!acked.ok)
        this.fail(
          session,
          "ARIA_ERR_MALFORMED_FRAME",
          `ACK of subscription ${id}: ${acked.reason}`,
          {
            subscriptionId: id,
          },
        );
      return;
    }
    const consumer = subscription.consumer;
    if (seq < subscription.nextSeq && this.options.replicas?.ack(subscription, seq) === true)
      return;
    if (consumer === null)
      return this.fail(
        session,
        "ARIA_ERR_MALFORMED_FRAME",
        `ACK for subscription ${id}, which is not durable (only DURABLE subscriptions acknowledge)`,
        { subscriptionId: id },
      );
    // Every matching seq below nextSeq was delivered; nothing at or above it was.
    if (seq >= subscription.nextSeq)
      return this.fail(
        session,
        "ARIA_ERR_MALFORMED_FRAME",
        `ACK seq ${seq} of subscription ${id} is above the last seq delivered to it (${subscription.nextSeq - 1}); the position stays at ${consumer.nextSeq}`,
        { subscriptionId: id },
      );
    this.consumers.ack(consumer, seq, this.options.clock.nowUs());
  }

  private unsubscribe(session: SubscriberSession, id: number): void {
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

  // ---- Sessions ----------------------------------------------------------------------------

  /** After every event: start a commit for what was appended; flush the session's frames. */
  afterEvent(session: SubscriberSession): void {
    this.publishing.commitIfDue();
    this.settle(session);
  }

  /** Flushes a session's frames; stops its subscriptions on a full queue; closes it when asked. */
  settle(session: SubscriberSession): void {
    if (session.closed) return;
    session.flush();
    if (session.queuedBytes > 2 * session.queueBytesMax + FRAME_BYTES_MAX) {
      // Only control frames grow the queue past the stall limit: a client that publishes but
      // never reads its acks. It cannot be served without unbounded memory.
      this.closeSession(session);
      return;
    }
    if (session.backedUp) {
      for (const subscription of session.subscriptions.values()) {
        if (subscription.phase === Phase.Live || subscription.phase === Phase.Tip)
          this.moves.stall(subscription);
      }
    } else if (session.drained) {
      // The socket took everything: no drain event will come, so stalled subscriptions go on now.
      this.moves.resumeStalled(session);
    }
    if (session.closing && session.queuedBytes === 0) this.closeSession(session);
  }

  /** Writes an ERROR frame; a fatal one closes the session once it is written. */
  fail(
    session: SubscriberSession,
    code: AriaErrorCode,
    reason: string,
    related: ErrorRelated = {},
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
    if (fatal) {
      session.closing = true;
      session.closeReason ??= `${code}: ${reason}`;
    }
  }

  private decodeFailed(session: SubscriberSession, error: DecodeError): void {
    session.endData();
    // Before the handshake nothing is read on past bad bytes (docs/protocol.md: any frame but
    // HELLO first is a fatal HANDSHAKE_REQUIRED; bad bytes are no better).
    const fatal = error.fatal || !session.handshaken;
    encodeError(session.writer, { ...error, fatal });
    if (fatal) {
      session.closing = true;
      session.closeReason ??= `${error.code}: ${error.reason}`;
    }
  }

  /** Reading a subscription from storage failed: drop it and tell its client. */
  subscriptionFailed(subscription: Subscription, error: unknown): void {
    if (subscription.phase === Phase.Closed) return;
    // A shared group's cursor: every member fails (the last one leaving stops the cursor).
    const group = this.groups.cursorOf(subscription);
    if (group !== undefined) {
      for (const member of group.memberList()) this.subscriptionFailed(member, error);
      return;
    }
    const session = subscription.session;
    this.dropSubscription(subscription);
    const message = error instanceof Error ? error.message : String(error);
    this.fail(
      session,
      "ARIA_ERR_STORAGE_FAILED",
      `reading subscription ${subscription.id} from disk failed: ${message}`,
      { subscriptionId: subscription.id },
    );
    this.settle(session);
  }

  private dropSubscription(subscription: Subscription): void {
    this.groups.leave(subscription);
    subscription.phase = Phase.Closed;
    this.moves.drop(subscription);
    subscription.session.subscriptions.delete(subscription.id);
    this.fanout.unregister(subscription);
    // Out of the topic table's filter index: new topics no longer look at it.
    subscription.matcher.close();
    this.options.replicas?.detach(subscription);
    if (subscription.consumer !== null) {
      this.consumers.detach(subscription.consumer);
      subscription.consumer = null;
    }
  }

  private closeSession(session: SubscriberSession, how = "closed by the client"): void {
    if (session.closed) return;
    this.options.log?.info("connection closed", {
      session: session.id,
      user: session.user?.name,
      client: session.clientName === "" ? undefined : session.clientName,
      address: session.connection.remoteAddress,
      reason: session.closeReason ?? how,
    });
    for (const subscription of [...session.subscriptions.values()])
      this.dropSubscription(subscription);
    session.closed = true;
    this.signIn.forget(session);
    session.release();
    this.sessions.delete(session.id);
    const address = countedAddress(session.connection.remoteAddress);
    if (address !== undefined) {
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
    }
    session.connection.close();
  }
}

/**
 * The address a connection counts against (CONNECTIONS_PER_ADDRESS_MAX), or undefined: none said,
 * or loopback — this machine's own clients (benchmarks, local tools) may take every slot.
 */
function countedAddress(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  return /^(127\.|::1$|::ffff:127\.)/.test(address) ? undefined : address;
}

/** True for the durable consumer names the MQTT door makes (src/mqtt/session_consumers.ts). */
function reservedConsumerName(name: string): boolean {
  return name.startsWith("mqtt/") || name.startsWith("$share/");
}
