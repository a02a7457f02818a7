/**
 * SharedGroup: who gets which message of a shared group (wire30: SUBSCRIBE options DURABLE |
 * SHARED). One cursor reads the group's filter and offers each matching message here, in seq
 * order; this decides which member takes it, holds what must wait, takes acknowledgements, and
 * says which seqs are still unacknowledged (the group's durable position).
 *
 *   cursor ─offer(seq, topic)─▶ topic's queue ─▶ member = rendezvous(topic, members)
 *                                   ▲     │         ├─ topic in flight on another member: wait
 *                                   │     │         └─ member at its window / not ready: wait
 *     leave(member): its unacked ───┘     └──deliver(member, message)──▶ member's in-flight
 *     go back to the front of their topics' queues                        ◀── ack(member, seq)
 *
 * Invariants:
 * - A topic's messages are in flight on at most one member at a time, and each topic is
 *   delivered in seq order: a message goes out only when every earlier message of its topic was
 *   acknowledged or is in flight on the same member. A topic moves to another member (its
 *   rendezvous choice changed) only once its old member has acknowledged all of it.
 * - Every offered message is, at any time, exactly one of: pending (in its topic's queue), in
 *   flight on one member, or acknowledged. A member that leaves gives its in-flight messages
 *   back as pending, ahead of newer messages of their topics: nothing is lost while the group
 *   lives, and its position() keeps what is unacknowledged across a restart.
 * - A member holds at most `windowMax` messages and `windowBytesMax` bytes in flight (one message
 *   always fits); pending messages are bounded by the cursor, which reads only while `wantsMore`
 *   (count and bytes), plus what leaving members give back.
 *
 * Acknowledgements follow delivery order: acking message x acknowledges x and everything
 * delivered to that member before x (what the member had received when it sent the ACK). When
 * deliveries to a member are in seq order (always, unless a leaving member's messages were
 * given to it) that is wire30's "every message delivered with seq <= x". An ACK naming a seq no
 * message in flight has (a repeated or a rounded one) acknowledges the longest in-flight prefix
 * with seqs <= x that stops before a late message (one delivered after a higher seq): a late
 * message is acknowledged only by its own seq or a later delivery's, never by an ACK that may
 * have been sent before it arrived.
 *
 * Not here: reading the log (the group's cursor), frames, sessions, persistence. Pure: no I/O,
 * clock or randomness; member ids are the caller's numbers, the assignment a fixed hash of them.
 */
import {
  GROUP_MEMBER_INFLIGHT_BYTES_MAX,
  GROUP_MEMBER_INFLIGHT_MAX,
  GROUP_PENDING_BYTES_MAX,
  GROUP_PENDING_MAX,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";

/** What the group needs of a message: its seq and its topic's id. */
export interface GroupMessage {
  readonly seq: number;
  readonly topicId: number;
}

/**
 * A group's durable position: every matching seq below `nextSeq` is acknowledged except
 * `unackedSeqs` (ascending, each < nextSeq). A restart reads from the first of them (or from
 * nextSeq) and delivers only those and what follows nextSeq.
 */
export interface GroupPosition {
  nextSeq: number;
  unackedSeqs: number[];
}

/** The outcome of an ACK: how many messages it acknowledged, or why it is refused. */
export type GroupAckResult = { ok: true; acked: number } | { ok: false; reason: string };

/** Settings of a group; the defaults are the server's limits. */
export interface SharedGroupOptions {
  /** Messages a member holds unacknowledged at most (GROUP_MEMBER_INFLIGHT_MAX). */
  windowMax?: number;
  /** Pending messages beyond which `wantsMore` is false (GROUP_PENDING_MAX). */
  pendingMax?: number;
  /** A message's bytes, for the byte bounds below (absent: bytes are not counted). */
  bytesOf?: (message: GroupMessage) => number;
  /** Bytes a member holds in flight at most, though one message always fits (…_INFLIGHT_BYTES_MAX). */
  windowBytesMax?: number;
  /** Pending bytes beyond which `wantsMore` is false (GROUP_PENDING_BYTES_MAX). */
  pendingBytesMax?: number;
  /** Where a group that existed before starts (its stored position); absent: a new group. */
  start?: GroupPosition;
}

/** A FIFO of messages: an array and the index of its head, compacted as the head moves. */
class Queue<M> {
  private items: M[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }
  at(index: number): M {
    return this.items[this.head + index]!;
  }
  peek(): M {
    return this.items[this.head]!;
  }
  push(item: M): void {
    this.items.push(item);
  }
  shift(): M {
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as M;
    if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
  /** Puts `items` ahead of the queue's contents, in their order. */
  prepend(items: M[]): void {
    this.items = items.concat(this.items.slice(this.head));
    this.head = 0;
  }
  toArray(): M[] {
    return this.items.slice(this.head);
  }
}

/** One member: its in-flight messages in delivery order. */
interface Member<M> {
  readonly id: number;
  readonly inFlight: Queue<M>;
  /** False while the member's session cannot take more (its send queue is backed up). */
  ready: boolean;
  /** Bytes of its in-flight messages (bytesOf). */
  inFlightBytes: number;
  /** The highest seq ever delivered to it: an ACK above it names nothing it received. */
  seqDeliveredMax: number;
  /** In-flight seqs delivered after a higher one (given back by a leaving member). */
  readonly lateSeqs: Set<number>;
}

/** One topic with messages pending or in flight. */
interface TopicState<M> {
  readonly topicId: number;
  readonly queue: Queue<M>;
  /** The member its in-flight messages are on (-1: none in flight). */
  owner: number;
  inFlightCount: number;
  /** The rendezvous choice, valid while `preferredEpoch` is the group's membership epoch. */
  preferred: number;
  preferredEpoch: number;
}

/** Rendezvous weight of `memberId` for `topicId`: a fixed 32-bit mix of both (murmur3's finalizer). */
export function rendezvousWeight(topicId: number, memberId: number): number {
  let h = Math.imul(topicId ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(memberId + 1, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The members of one shared group and the assignment of its messages to them. */
export class SharedGroup<M extends GroupMessage> {
  readonly windowMax: number;
  readonly pendingMax: number;
  readonly windowBytesMax: number;
  readonly pendingBytesMax: number;
  private readonly bytesOf: (message: GroupMessage) => number;
  private readonly members = new Map<number, Member<M>>();
  private memberIds: number[] = [];
  /** Bumped at each join and leave: cached rendezvous choices older than it are stale. */
  private epoch = 0;
  private readonly topics = new Map<number, TopicState<M>>();
  /** Topics whose queue is not empty, oldest first. */
  private readonly pendingTopics = new Set<TopicState<M>>();
  private pending = 0;
  private pendingBytes = 0;
  private inFlight = 0;
  /** The cursor's position: every matching seq below it was offered. */
  private readSeq: number;
  /** A restarted group: seqs below `restoredNextSeq` go out only if listed from `restoredIndex`. */
  private readonly restored: number[];
  private restoredIndex = 0;
  private readonly restoredNextSeq: number;

  /**
   * `deliver` hands a message to a member's session; it must not call back into the group, except
   * `setReady(member, false)` when that session just backed up.
   */
  constructor(
    private readonly deliver: (memberId: number, message: M) => void,
    options: SharedGroupOptions = {},
  ) {
    this.windowMax = options.windowMax ?? GROUP_MEMBER_INFLIGHT_MAX;
    this.pendingMax = options.pendingMax ?? GROUP_PENDING_MAX;
    this.windowBytesMax = options.windowBytesMax ?? GROUP_MEMBER_INFLIGHT_BYTES_MAX;
    this.pendingBytesMax = options.pendingBytesMax ?? GROUP_PENDING_BYTES_MAX;
    this.bytesOf = options.bytesOf ?? (() => 0);
    assert(this.windowMax >= 1 && this.pendingMax >= 1, "a group can hold a message");
    const start = options.start ?? { nextSeq: 0, unackedSeqs: [] };
    for (let i = 0; i < start.unackedSeqs.length; i++) {
      const seq = start.unackedSeqs[i]!;
      assert(seq < start.nextSeq, "an unacknowledged seq lies below the position");
      assert(i === 0 || start.unackedSeqs[i - 1]! < seq, "unacknowledged seqs ascend");
    }
    this.restored = start.unackedSeqs.slice();
    this.restoredNextSeq = start.nextSeq;
    this.readSeq = 0;
  }

  /** The seq the group's cursor reads from first: its oldest unacknowledged message, or after. */
  get cursorStartSeq(): number {
    return this.restored.length > 0 ? this.restored[0]! : this.restoredNextSeq;
  }

  /** True while the cursor should read and offer more: a member exists and few messages wait. */
  get wantsMore(): boolean {
    return (
      this.members.size > 0 &&
      this.pending < this.pendingMax &&
      this.pendingBytes < this.pendingBytesMax
    );
  }

  /** Members now. */
  get memberCount(): number {
    return this.members.size;
  }

  /** Messages read but not given to a member. */
  get pendingCount(): number {
    return this.pending;
  }

  /** Bytes of the pending messages (bytesOf). */
  get pendingBytesHeld(): number {
    return this.pendingBytes;
  }

  /** Messages delivered and not acknowledged, over every member. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  /** Messages `memberId` holds unacknowledged (0 for an unknown member). */
  inFlightOf(memberId: number): number {
    return this.members.get(memberId)?.inFlight.length ?? 0;
  }

  /** True when `memberId` is a member. */
  has(memberId: number): boolean {
    return this.members.has(memberId);
  }

  /** Adds a member; topics whose rendezvous choice it becomes move to it once drained. */
  join(memberId: number): void {
    assert(!this.members.has(memberId), "a member joins once");
    this.members.set(memberId, {
      id: memberId,
      inFlight: new Queue<M>(),
      ready: true,
      inFlightBytes: 0,
      seqDeliveredMax: -1,
      lateSeqs: new Set(),
    });
    this.memberIds.push(memberId);
    this.epoch++;
    this.drainAll();
  }

  /** Removes a member: its unacknowledged messages go to the others, ahead of newer ones. */
  leave(memberId: number): void {
    const member = this.members.get(memberId);
    assert(member !== undefined, "only a member leaves");
    this.members.delete(memberId);
    this.memberIds = this.memberIds.filter((id) => id !== memberId);
    this.epoch++;
    const returned = new Map<TopicState<M>, M[]>();
    const messages = member.inFlight.toArray();
    for (let i = 0; i < messages.length; i++) {
      const topic = this.topics.get(messages[i]!.topicId)!;
      assert(topic.owner === memberId, "a topic is in flight on one member");
      let list = returned.get(topic);
      if (list === undefined) returned.set(topic, (list = []));
      list.push(messages[i]!);
    }
    for (const [topic, list] of returned) {
      assert(list.length === topic.inFlightCount, "all of a topic's in-flight was on its owner");
      topic.owner = -1;
      topic.inFlightCount = 0;
      topic.queue.prepend(list);
      this.pendingTopics.add(topic);
    }
    this.pending += messages.length;
    this.pendingBytes += member.inFlightBytes;
    this.inFlight -= messages.length;
    this.drainAll();
  }

  /** Marks a member able (or not) to take messages now, e.g. while its session is backed up. */
  setReady(memberId: number, ready: boolean): void {
    const member = this.members.get(memberId);
    assert(member !== undefined, "only a member is ready");
    const was = member.ready;
    member.ready = ready;
    if (ready && !was) this.drainAll();
  }

  /**
   * Offers the cursor's next matching message (seqs ascend). Returns false when the message was
   * acknowledged before a restart (it is not delivered again), true when it was taken.
   */
  offer(message: M): boolean {
    assert(message.seq >= this.readSeq, "the cursor offers seqs in order, once");
    this.readSeq = message.seq + 1;
    if (message.seq < this.restoredNextSeq) {
      this.skipRestoredBelow(message.seq);
      if (this.restored[this.restoredIndex] !== message.seq) return false;
      this.restoredIndex++;
    }
    let topic = this.topics.get(message.topicId);
    if (topic === undefined) {
      topic = {
        topicId: message.topicId,
        queue: new Queue<M>(),
        owner: -1,
        inFlightCount: 0,
        preferred: -1,
        preferredEpoch: -1,
      };
      this.topics.set(message.topicId, topic);
    }
    topic.queue.push(message);
    this.pending++;
    this.pendingBytes += this.bytesOf(message);
    this.pendingTopics.add(topic);
    this.drainTopic(topic);
    return true;
  }

  /**
   * The cursor read every matching message below `nextSeq` (it may skip a range with no match).
   * A restored unacknowledged seq below it that never came is gone from the log (retention).
   */
  readTo(nextSeq: number): void {
    if (nextSeq <= this.readSeq) return;
    this.readSeq = nextSeq;
    this.skipRestoredBelow(nextSeq);
  }

  /** Acknowledges `seq` for `memberId` and what the member received before it (see the header). */
  ack(memberId: number, seq: number): GroupAckResult {
    const member = this.members.get(memberId);
    assert(member !== undefined, "only a member acknowledges");
    if (seq > member.seqDeliveredMax) {
      return { ok: false, reason: `seq ${seq} was not delivered to this subscription` };
    }
    const inFlight = member.inFlight;
    let count = 0;
    for (let i = inFlight.length - 1; i >= 0; i--) {
      if (inFlight.at(i).seq === seq) {
        count = i + 1;
        break;
      }
    }
    if (count === 0) {
      const late = member.lateSeqs;
      while (count < inFlight.length) {
        const held = inFlight.at(count).seq;
        if (held > seq || late.has(held)) break;
        count++;
      }
    }
    for (let i = 0; i < count; i++) {
      const message = inFlight.shift();
      member.lateSeqs.delete(message.seq);
      member.inFlightBytes -= this.bytesOf(message);
      const topic = this.topics.get(message.topicId)!;
      topic.inFlightCount--;
      if (topic.inFlightCount === 0) {
        topic.owner = -1;
        if (topic.queue.length === 0) this.topics.delete(topic.topicId);
      }
    }
    this.inFlight -= count;
    if (count > 0) this.drainAll();
    return { ok: true, acked: count };
  }

  /** The lowest seq not acknowledged (pending, in flight, or restored), or the read position. */
  lowestUnackedSeq(): number {
    let low = Math.max(this.readSeq, this.restoredNextSeq);
    if (this.restoredIndex < this.restored.length) low = this.restored[this.restoredIndex]!;
    for (const topic of this.pendingTopics) low = Math.min(low, topic.queue.peek().seq);
    for (const member of this.members.values()) {
      for (let i = 0; i < member.inFlight.length; i++) {
        low = Math.min(low, member.inFlight.at(i).seq);
      }
    }
    return low;
  }

  /** The durable position: what a restarted group must still deliver. */
  position(): GroupPosition {
    const unacked: number[] = this.restored.slice(this.restoredIndex);
    for (const topic of this.topics.values()) {
      const queued = topic.queue;
      for (let i = 0; i < queued.length; i++) unacked.push(queued.at(i).seq);
    }
    for (const member of this.members.values()) {
      for (let i = 0; i < member.inFlight.length; i++) unacked.push(member.inFlight.at(i).seq);
    }
    unacked.sort((a, b) => a - b);
    return { nextSeq: Math.max(this.readSeq, this.restoredNextSeq), unackedSeqs: unacked };
  }

  private skipRestoredBelow(seq: number): void {
    const restored = this.restored;
    while (this.restoredIndex < restored.length && restored[this.restoredIndex]! < seq) {
      this.restoredIndex++;
    }
  }

  /** The member a topic belongs to now by rendezvous hashing (-1 without members). */
  private preferredOf(topic: TopicState<M>): number {
    if (topic.preferredEpoch === this.epoch) return topic.preferred;
    let best = -1;
    let bestWeight = -1;
    const ids = this.memberIds;
    for (let i = 0; i < ids.length; i++) {
      const weight = rendezvousWeight(topic.topicId, ids[i]!);
      if (weight > bestWeight || (weight === bestWeight && ids[i]! < best)) {
        best = ids[i]!;
        bestWeight = weight;
      }
    }
    topic.preferred = best;
    topic.preferredEpoch = this.epoch;
    return best;
  }

  /** Delivers a topic's queue head by head while its member can take them. */
  private drainTopic(topic: TopicState<M>): void {
    const queue = topic.queue;
    while (queue.length > 0) {
      const target = this.preferredOf(topic);
      if (target === -1) return;
      // In flight on another member: the topic moves only once that member acknowledged it all.
      if (topic.inFlightCount > 0 && topic.owner !== target) return;
      const member = this.members.get(target)!;
      if (!member.ready || member.inFlight.length >= this.windowMax) return;
      const bytes = this.bytesOf(queue.peek());
      if (member.inFlightBytes > 0 && member.inFlightBytes + bytes > this.windowBytesMax) return;
      const message = queue.shift();
      this.pending--;
      this.pendingBytes -= bytes;
      this.inFlight++;
      member.inFlight.push(message);
      member.inFlightBytes += bytes;
      if (message.seq > member.seqDeliveredMax) member.seqDeliveredMax = message.seq;
      else member.lateSeqs.add(message.seq);
      topic.owner = target;
      topic.inFlightCount++;
      this.deliver(target, message);
    }
    this.pendingTopics.delete(topic);
  }

  private drainAll(): void {
    if (this.members.size === 0) return;
    for (const topic of this.pendingTopics) this.drainTopic(topic);
  }
}
