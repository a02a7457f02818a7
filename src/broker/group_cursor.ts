/**
 * Group cursors: how a shared group (SUBSCRIBE options DURABLE | SHARED) is served. Each group
 * has one cursor — an ordinary Subscription of its filter, moved DISK → TIP → LIVE by catch-up
 * and live fan-out like any other — whose session is not a connection but a GroupSession: the
 * messages delivered to it are copied and offered to the group's SharedGroup (shared_group.ts),
 * which gives each to one member. Members are Subscriptions of client sessions that catch-up and
 * fan-out never see: they get their messages only from here.
 *
 *   catch-up / fan-out ─▶ delivery ─▶ GroupSession.addData ─▶ copy ─▶ SharedGroup.offer
 *                                                                       │ deliver(member)
 *   member's session ◀── DATA of the member's subscription id ◀─────────┘
 *   ACK (member) ─▶ SharedGroup.ack ─▶ position = lowest unacknowledged ─▶ ConsumerRegistry.ack
 *
 * Back-pressure: the cursor's session is "backed up" while the group wants no more (its pending
 * messages reached their bound, or it has no member), so catch-up stalls it exactly as it stalls
 * a slow client, and resumes it when an ACK or a join makes room. A member whose own session is
 * backed up is marked not ready and gets nothing more until its connection drains.
 *
 * The stored position (ConsumerRecord.nextSeq) is the group's lowest unacknowledged seq, moved
 * as ACKs come. Once per write interval while it reads, and when the last member leaves (or the
 * server stops), the record also lists the unacknowledged seqs below the read position
 * (ConsumerRecord.group), and the next start delivers only those and what follows. After a crash
 * the last position written holds: what was acknowledged within the last interval comes again
 * (at least once, never a gap).
 *
 * Not here: the assignment rules (shared_group.ts), frames (session.ts), attaching consumers
 * (consumer_registry.ts, dispatch.ts). Pure: the broker's stages come in as ports.
 */
import { CONSUMERS_WRITE_INTERVAL_MS, GROUP_POSITION_SEQS_MAX } from "../constants.ts";
import { encodeSubscribed, type SubscribeFrame, type TopicCache } from "../protocol/mod.ts";
import { assert } from "../stdx/assert.ts";
import type { Filter } from "../topic/filter.ts";
import { FilterMatcher } from "../topic/filter_matcher.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { Consumer, ConsumerRegistry } from "./consumer_registry.ts";
import type { Clock, Connection } from "./ports.ts";
import { Session } from "./session.ts";
import { type GroupAckResult, type GroupMessage, SharedGroup } from "./shared_group.ts";
import { Phase, type SubscriberSession, Subscription } from "./subscription.ts";

/** A message the group holds (pending or in flight): copies, since the ring moves on. */
export interface HeldMessage extends GroupMessage {
  readonly timeUs: number;
  /** The topic's UTF-8 bytes. */
  readonly topic: Uint8Array;
  readonly payload: Uint8Array;
  /** Its properties (empty: none). */
  readonly properties: Uint8Array;
}

/** What group cursors need of the broker (dispatch hands them its stages). */
export interface GroupPorts {
  topics: TopicTable;
  topicCache: TopicCache;
  clock: Clock;
  consumers: ConsumerRegistry;
  /** Catch-up: starts the cursor, resumes it when the group wants more, forgets it. */
  moves: {
    start(subscription: Subscription, start: SubscribeFrame["start"]): void;
    resumeStalled(session: SubscriberSession): void;
    drop(subscription: Subscription): void;
  };
  /** Live fan-out's topic index. */
  fanout: {
    register(subscription: Subscription): void;
    unregister(subscription: Subscription): void;
  };
  /** Flushes a member's session (dispatch.settle). */
  settle(session: SubscriberSession): void;
}

/** The cursor's subscription id inside its GroupSession. */
const CURSOR_SUBSCRIPTION_ID = 1;
/** A GroupSession's id: no client session has it (theirs start at 1). */
const GROUP_SESSION_ID = 0;
const NO_PROPERTIES = new Uint8Array(0);

/** A connection that takes every byte and goes nowhere: the cursor's control frames end here. */
const NOWHERE: Connection = {
  write: (bytes) => bytes.length,
  close: () => {},
};

/** 32-bit FNV-1a of a topic's bytes: the key the group assigns by (stable across restarts). */
export function topicKey(topic: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < topic.length; i++) hash = Math.imul(hash ^ topic[i]!, 0x01000193);
  return hash >>> 0;
}

/**
 * The cursor's session: what catch-up and fan-out deliver to it goes to the group, and it is
 * "backed up" while the group wants no more.
 */
export class GroupSession extends Session<Subscription> {
  constructor(
    readonly cursor: GroupCursor,
    topicCache: TopicCache,
  ) {
    super(GROUP_SESSION_ID, NOWHERE, topicCache);
    this.handshaken = true;
  }

  override addData(
    _subscriptionId: number,
    seq: number,
    timeUs: number,
    topic: Uint8Array,
    source: Uint8Array,
    start: number,
    length: number,
    properties: Uint8Array | null = null,
    propertiesStart = 0,
    propertiesBytes = 0,
  ): void {
    this.cursor.take({
      seq,
      topicId: topicKey(topic),
      timeUs,
      topic,
      payload: source.slice(start, start + length),
      properties:
        properties === null || propertiesBytes === 0
          ? NO_PROPERTIES
          : properties.slice(propertiesStart, propertiesStart + propertiesBytes),
    });
  }

  /** Frames encoded for a set of equal filters: none taken, so fan-out delivers one by one. */
  override addSharedFrames(): number {
    return 0;
  }

  override get backedUp(): boolean {
    return !this.cursor.wantsMore;
  }

  override get drained(): boolean {
    return this.cursor.wantsMore;
  }

  /** The group is a reader: served first by catch-up, like a client known to read. */
  override get showsReading(): boolean {
    return true;
  }

  /** Catch-up and fan-out settle the cursor's session after a round: the members' go out then. */
  override flush(): void {
    super.flush();
    this.cursor.flushMembers();
  }
}

/** One shared group being served: its cursor, its SharedGroup, its members. */
export class GroupCursor {
  readonly session: GroupSession;
  readonly subscription: Subscription;
  private readonly group: SharedGroup<HeldMessage>;
  private readonly members = new Map<number, Subscription>();
  private readonly memberIds = new Map<Subscription, number>();
  private nextMemberId = 0;
  private readonly touched = new Set<SubscriberSession>();
  /** The seq each member was sent last. */
  private readonly lastSeqSent = new Map<number, number>();
  /** Members marked not ready (their session backed up). */
  private readonly notReady = new Set<number>();
  /** When the whole position (with the unacknowledged seqs) was last stored, µs. */
  private wholePositionSavedUs = 0;

  constructor(
    readonly consumer: Consumer,
    filter: Filter,
    private readonly ports: GroupPorts,
  ) {
    this.group = new SharedGroup<HeldMessage>((id, message) => this.deliver(id, message), {
      bytesOf: (message) =>
        (message as HeldMessage).payload.length + (message as HeldMessage).properties.length,
      // A stored group position (its read seq never past the store's end: consumer_registry.ts).
      start:
        consumer.group === null
          ? undefined
          : { nextSeq: consumer.group.readSeq, unackedSeqs: [...consumer.group.unackedSeqs] },
    });
    this.session = new GroupSession(this, ports.topicCache);
    this.subscription = new Subscription(
      this.session,
      CURSOR_SUBSCRIPTION_ID,
      filter,
      new FilterMatcher(ports.topics, filter),
      0,
      true,
    );
    // catch-up's begin gives a new consumer its position (the first seq) through this. The
    // cursor never attached: it is never dropped through dispatch (a failure fails the members).
    this.subscription.consumer = consumer;
    this.session.subscriptions.set(CURSOR_SUBSCRIPTION_ID, this.subscription);
  }

  /** True while the cursor should read on. */
  get wantsMore(): boolean {
    return this.group.wantsMore;
  }

  /** Members now. */
  get memberCount(): number {
    return this.members.size;
  }

  /** The member subscriptions now. */
  memberList(): Subscription[] {
    return [...this.members.values()];
  }

  /** Starts reading at `start` (once, with the first member). */
  start(start: SubscribeFrame["start"]): void {
    this.ports.fanout.register(this.subscription);
    this.ports.moves.start(this.subscription, start);
  }

  /**
   * Stops reading: the cursor leaves catch-up and fan-out (the group's last member left). The
   * stored record lists what is unacknowledged, so the next start delivers only that again.
   */
  stop(): void {
    this.saveWholePosition();
    this.subscription.phase = Phase.Closed;
    this.ports.moves.drop(this.subscription);
    this.ports.fanout.unregister(this.subscription);
    this.subscription.matcher.close();
  }

  /** A member subscription joins: SUBSCRIBED to it, then messages as the group assigns them. */
  join(member: Subscription): void {
    const id = this.nextMemberId++;
    this.members.set(id, member);
    this.memberIds.set(member, id);
    member.phase = Phase.Resolving; // never catch-up's nor fan-out's: the group feeds it
    member.session.endData();
    // Its first message is the group's oldest unacknowledged one, or the cursor's next.
    const held = this.group.pendingCount + this.group.inFlightCount > 0;
    const firstSeq = Math.max(1, held ? this.group.lowestUnackedSeq() : this.subscription.nextSeq);
    encodeSubscribed(member.session.writer, { subscriptionId: member.id, firstSeq });
    // A member's nextSeq only tells metrics how far behind it is: as far as the group's cursor.
    member.nextSeq = this.subscription.nextSeq;
    this.group.join(id);
    this.afterChange();
  }

  /** A member leaves (UNSUBSCRIBE, its connection closed): its unacknowledged messages move. */
  leave(member: Subscription): void {
    const id = this.memberIds.get(member);
    assert(id !== undefined, "only a member leaves");
    this.members.delete(id);
    this.memberIds.delete(member);
    this.notReady.delete(id);
    this.lastSeqSent.delete(id);
    this.group.leave(id);
    this.afterChange();
  }

  /** ACK from a member. */
  ack(member: Subscription, seq: number): GroupAckResult {
    const id = this.memberIds.get(member);
    assert(id !== undefined, "only a member acknowledges");
    const result = this.group.ack(id, seq);
    if (result.ok && result.acked > 0) {
      this.savePosition();
      this.afterChange();
    }
    return result;
  }

  /** A member's session drained: it may take messages again. */
  ready(member: Subscription): void {
    const id = this.memberIds.get(member);
    if (id === undefined || !this.notReady.delete(id)) return;
    this.group.setReady(id, true);
    this.afterChange();
  }

  /** A message the cursor read (GroupSession.addData). */
  take(message: HeldMessage): void {
    this.group.offer(message);
  }

  /**
   * Hands what was written to members' sessions to their connections; a member that was full only
   * until its socket took the bytes is ready again (no drain event would come for it).
   */
  flushMembers(): void {
    for (const member of this.members.values()) member.nextSeq = this.subscription.nextSeq;
    while (this.touched.size > 0) {
      const sessions = [...this.touched];
      this.touched.clear();
      for (const session of sessions) if (!session.closed) this.ports.settle(session);
      for (const id of [...this.notReady]) {
        const member = this.members.get(id);
        if (member?.session.backedUp) continue;
        this.notReady.delete(id);
        if (member !== undefined) this.group.setReady(id, true);
      }
    }
  }

  /**
   * The group's stored position moves up to its lowest unacknowledged seq (never back); once per
   * write interval it is the whole position, with the unacknowledged seqs above it, so a crash
   * delivers again what was unacknowledged or acknowledged within the last interval, not all
   * that lies above the lowest unacknowledged seq.
   */
  private savePosition(): void {
    if (this.consumer.nextSeq === 0) return; // not begun: catch-up's begin sets it
    const nowUs = this.ports.clock.nowUs();
    if (nowUs - this.wholePositionSavedUs >= CONSUMERS_WRITE_INTERVAL_MS * 1000) {
      this.wholePositionSavedUs = nowUs;
      this.saveWholePosition();
      return;
    }
    const lowest = this.group.lowestUnackedSeq();
    if (lowest > this.consumer.nextSeq) this.ports.consumers.ack(this.consumer, lowest - 1, nowUs);
  }

  /** Stores the lowest unacknowledged seq and the unacknowledged seqs above it (if they fit). */
  private saveWholePosition(): void {
    const position = this.group.position();
    if (position.unackedSeqs.length > GROUP_POSITION_SEQS_MAX) {
      const lowest = this.group.lowestUnackedSeq();
      if (this.consumer.nextSeq !== 0 && lowest > this.consumer.nextSeq)
        this.ports.consumers.ack(this.consumer, lowest - 1, this.ports.clock.nowUs());
      return;
    }
    this.ports.consumers.saveGroup(this.consumer, {
      readSeq: position.nextSeq,
      unackedSeqs: position.unackedSeqs,
    });
  }

  /** After a join, leave, ACK or drain: flush what moved; let the cursor read on if it may. */
  private afterChange(): void {
    this.flushMembers();
    if (this.group.wantsMore && this.subscription.phase === Phase.Stalled)
      this.ports.moves.resumeStalled(this.session);
  }

  private deliver(id: number, message: HeldMessage): void {
    const member = this.members.get(id)!;
    const session = member.session;
    const properties = member.withProperties ? message.properties : null;
    // A DATA frame's seqs ascend: a message given back by a leaving member, below what this one
    // was sent last, starts a frame of its own.
    if (message.seq <= (this.lastSeqSent.get(id) ?? 0)) session.endData();
    this.lastSeqSent.set(id, message.seq);
    session.addData(
      member.id,
      message.seq,
      message.timeUs,
      message.topic,
      message.payload,
      0,
      message.payload.length,
      properties,
      0,
      properties === null ? 0 : properties.length,
    );
    member.messagesDelivered++;
    this.touched.add(session);
    if (session.backedUp && !this.notReady.has(id)) {
      this.notReady.add(id);
      this.group.setReady(id, false);
    }
  }
}

/** Every shared group being served (those with a member), by consumer name. */
export class GroupCursors {
  private readonly cursors = new Map<string, GroupCursor>();
  private readonly memberships = new Map<Subscription, GroupCursor>();

  constructor(private readonly ports: GroupPorts) {}

  /** The group `member` belongs to, or undefined: not a shared group's member. */
  of(member: Subscription): GroupCursor | undefined {
    return this.memberships.get(member);
  }

  /** The group whose cursor `subscription` is, or undefined. */
  cursorOf(subscription: Subscription): GroupCursor | undefined {
    return subscription.session instanceof GroupSession ? subscription.session.cursor : undefined;
  }

  /** The group of consumer `name` being served, or undefined. */
  named(name: string): GroupCursor | undefined {
    return this.cursors.get(name);
  }

  /**
   * `member` (attached to shared consumer `consumer`) joins its group; the group's cursor starts
   * at `start` when it is the first member.
   */
  join(member: Subscription, consumer: Consumer, start: SubscribeFrame["start"]): void {
    assert(consumer.shared, "a shared consumer's member");
    let cursor = this.cursors.get(consumer.name);
    const first = cursor === undefined;
    if (cursor === undefined) {
      cursor = new GroupCursor(consumer, member.filter, this.ports);
      this.cursors.set(consumer.name, cursor);
    }
    this.memberships.set(member, cursor);
    if (first) cursor.start(start);
    cursor.join(member);
  }

  /** `member` leaves its group (a no-op for any other subscription); the last one stops it. */
  leave(member: Subscription): void {
    const cursor = this.memberships.get(member);
    if (cursor === undefined) return;
    this.memberships.delete(member);
    cursor.leave(member);
    if (cursor.memberCount === 0) {
      cursor.stop();
      this.cursors.delete(cursor.consumer.name);
    }
  }

  /** A session drained: its members may take messages again. */
  drained(session: SubscriberSession): void {
    for (const subscription of session.subscriptions.values())
      this.memberships.get(subscription)?.ready(subscription);
  }
}
