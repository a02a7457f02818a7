/**
 * Invariants of a simulated run, checked as events happen and after every step. The reference is
 * what the store holds: every append the broker made (seen at the broker→store port), cut back
 * after a crash to what recovery kept. Against it:
 *
 * - seqs: appends are 1, 2, 3, … with no hole; after a crash the store keeps every committed
 *   (hence every acknowledged) seq, and seqs above it may be reused (they were never visible);
 * - acks: each PUBLISH_ACK covers exactly its batch, at the seqs that hold its messages, and no
 *   seq is acknowledged twice, across crashes;
 * - subscriptions: per (re)subscription, DATA seqs strictly increase, each message equals the
 *   reference at its seq and matches the filter, no matching seq is skipped between the start and
 *   the last message, CAUGHT_UP comes at most once, and at the end of the run every matching
 *   visible message was delivered;
 * - accounting: tip pool used + free = max, index entries = ring records, ring seqs contiguous;
 *   send queues within their bound;
 * - retention: a seq is *gone* once retention removed the closed file holding it (the simulator
 *   marks it, from the files it predicted and saw removed); a gone seq may be skipped by a
 *   subscription and absent from the store, and may come back after a crash (the REMOVE record
 *   was not durable). Every seq not gone must be read back. Seqs below `goneFloor` are all gone,
 *   so a check walks only the window from there, which retention keeps bounded: a step's checks
 *   cost the same however long the run.
 *
 * A violation throws InvariantViolation(name, details); the simulator adds the seed and the step.
 */
import type { StartPosition } from "../protocol/mod.ts";
import type { TipStats } from "../tip/tip.ts";
import type { Filter } from "../topic/filter.ts";
import { partitionOf } from "../topic/topic.ts";
import type { ReferenceMessage } from "./reference_stream.ts";

/** A broken invariant. */
export class InvariantViolation extends Error {
  constructor(
    readonly invariant: string,
    readonly details: string,
  ) {
    super(`invariant ${invariant} violated: ${details}`);
  }
}

/** Throws InvariantViolation(name, details()) unless `condition`. */
export function check(condition: boolean, name: string, details: () => string): asserts condition {
  if (!condition) throw new InvariantViolation(name, details());
}

/** What a client knows of one of its subscriptions, for the checks. */
export interface SubscriptionState {
  id: number;
  filterTexts: string[];
  filter: Filter;
  /** How it was first asked for. */
  start: StartPosition;
  /** The next seq it may receive; null until SUBSCRIBED of this incarnation. */
  nextExpected: number | null;
  /** What the current SUBSCRIBE asked for ({seq} after a resubscribe). */
  askedFrom: StartPosition;
  caughtUp: boolean;
  received: number;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function describeStart(start: StartPosition): string {
  return start.kind === "seq"
    ? `seq ${start.seq}`
    : start.kind === "time"
      ? `time ${start.timeUs}`
      : start.kind;
}

/** The reference stream and the cross-client checks. */
export class Checker {
  /** reference[seq - 1]: what the store holds (or will, once committed). */
  readonly reference: ReferenceMessage[] = [];
  /** partitions[seq - 1]: the partition of the message at seq (for retention's files). */
  private readonly partitions: string[] = [];
  /** gone[seq]: 1 when retention removed the file holding seq (it may come back after a crash). */
  private gone = new Uint8Array(1024);
  /** Every seq below it is gone: checks start here. */
  goneFloor = 1;
  /**
   * The largest seq a repair reported lost: seqs a lost journal may have held, past the stream
   * the broker appended (a repair cannot know how far it went), are never given again.
   */
  private lostMaxSeq = 0;
  private readonly ackedSeqs = new Set<number>();
  ackedMaxSeq = 0;
  acksSeen = 0;
  messagesChecked = 0;
  /**
   * The oldest seq the server's tip holds now (Infinity: none, or no server). The tip's range only
   * moves up within a life, so a seq at or above it when a subscription's skip is seen was in the
   * tip when the server skipped it: it was held, even when retention removed its file (gone).
   */
  tipHeldFrom: () => number = () => Number.POSITIVE_INFINITY;

  // ---- Seqs and acks -------------------------------------------------------------------------

  /** The broker appended a message to the store. */
  onAppend(seq: number, timeUs: number, topic: string, payload: Uint8Array): void {
    check(
      seq === this.reference.length + 1,
      "seq-contiguous",
      () => `append of seq ${seq}, but the stream ends at ${this.reference.length}`,
    );
    const last = this.reference.at(-1);
    check(
      last === undefined || timeUs >= last.timeUs,
      "time-monotonic",
      () => `seq ${seq} at ${timeUs} µs, before seq ${seq - 1} at ${last?.timeUs} µs`,
    );
    this.reference.push({ seq, timeUs, topic, payload: payload.slice() });
    this.partitions[seq - 1] = partitionOf(topic);
    this.setGone(seq, false);
  }

  // ---- Retention -----------------------------------------------------------------------------

  /** Whether retention removed the file holding `seq`. */
  isGone(seq: number): boolean {
    return seq < this.goneFloor || (seq < this.gone.length && this.gone[seq] === 1);
  }

  /**
   * Retention removes (or is about to remove) a closed file of `partition` holding its seqs from
   * `firstSeq` to `lastSeq` — of `topics` only, for a subtree store. Returns how many it marked
   * (listed in `marked` when given).
   */
  onRemoved(
    partition: string,
    firstSeq: number,
    lastSeq: number,
    topics: ReadonlySet<string> | null,
    marked?: number[],
  ): number {
    let count = 0;
    const last = Math.min(lastSeq, this.reference.length);
    for (let seq = Math.max(firstSeq, this.goneFloor); seq <= last; seq++) {
      if (this.partitions[seq - 1] !== partition || this.isGone(seq)) continue;
      if (topics !== null && !topics.has(this.reference[seq - 1].topic)) continue;
      this.setGone(seq, true);
      marked?.push(seq);
      count++;
    }
    while (this.goneFloor <= this.reference.length && this.gone[this.goneFloor] === 1)
      this.goneFloor++;
    return count;
  }

  /**
   * Retention meant to remove a file and kept it (no room to record the removal): the `seqs`
   * onRemoved marked for it are not gone after all.
   */
  onKept(seqs: readonly number[]): void {
    for (const seq of seqs) {
      if (seq < this.goneFloor) {
        for (let below = seq + 1; below < this.goneFloor; below++) this.setGone(below, true);
        this.goneFloor = seq;
      }
      this.setGone(seq, false);
    }
  }

  /** A repair reported seqs `first` to `last` lost: they may be missing from now on. */
  onLost(first: number, last: number): void {
    this.lostMaxSeq = Math.max(this.lostMaxSeq, last);
    for (let seq = Math.max(first, this.goneFloor); seq <= last; seq++) this.setGone(seq, true);
    while (this.goneFloor <= this.reference.length && this.gone[this.goneFloor] === 1)
      this.goneFloor++;
  }

  private setGone(seq: number, gone: boolean): void {
    if (seq >= this.gone.length) {
      if (!gone) return;
      const grown = new Uint8Array(Math.max(seq + 1, this.gone.length * 2));
      grown.set(this.gone);
      this.gone = grown;
    }
    this.gone[seq] = gone ? 1 : 0;
  }

  /**
   * `read` is a `**` read of the whole store from seq 1, whose next seq is `nextSeq`: seqs strictly
   * increase, each message equals the stream, none is gone (`recovered`: a gone one came back, as a
   * crash may undo retention), and every seq not gone below the last read, and below `completeTo`
   * (`nextSeq` when absent), is there. Walks `read` and the window from `goneFloor`, not the whole
   * stream.
   */
  checkHolds(
    read: readonly ReferenceMessage[],
    nextSeq: number,
    when: string,
    options: { recovered: boolean; completeTo?: number },
  ): void {
    const recovered = options.recovered;
    if (recovered) {
      for (const message of read) {
        if (!this.isGone(message.seq)) continue;
        if (message.seq < this.goneFloor) {
          for (let seq = message.seq + 1; seq < this.goneFloor; seq++) this.setGone(seq, true);
          this.goneFloor = message.seq;
        }
        this.setGone(message.seq, false);
      }
    }
    let expected = this.goneFloor;
    let previous = 0;
    for (const message of read) {
      const seq = message.seq;
      check(
        seq > previous,
        "store-read-once",
        () => `${when}, a ** read yields seq ${seq} after seq ${previous}`,
      );
      check(
        seq < nextSeq,
        "no-invented-seq",
        () => `${when}, a ** read yields seq ${seq}, the store's next seq is ${nextSeq}`,
      );
      const held = this.reference[seq - 1];
      check(
        held !== undefined &&
          held.topic === message.topic &&
          held.timeUs === message.timeUs &&
          bytesEqual(held.payload, message.payload),
        "store-matches-stream",
        () => `${when} seq ${seq} reads ${message.topic}, appended was ${held?.topic}`,
      );
      check(
        !this.isGone(seq),
        "retention-removes",
        () => `${when} seq ${seq} (${held.topic}) still reads, but retention removed its file`,
      );
      this.checkAllGone(expected, seq, when);
      expected = Math.max(expected, seq + 1);
      previous = seq;
    }
    this.checkAllGone(expected, options.completeTo ?? nextSeq, when);
  }

  /** Every seq in [from, to) is gone: a ** read that skipped them lost nothing. */
  private checkAllGone(from: number, to: number, when: string): void {
    for (let seq = from; seq < to; seq++)
      check(
        this.isGone(seq),
        "store-complete",
        () =>
          `${when}, a ** read skips seq ${seq} (${this.reference[seq - 1]?.topic}), which retention did not remove`,
      );
  }

  /** A publisher got PUBLISH_ACK for a batch. */
  onAck(
    client: string,
    requestId: number,
    sent: readonly { topic: string; payload: Uint8Array }[],
    firstSeq: number,
    count: number,
  ): void {
    this.acksSeen++;
    check(
      count === sent.length,
      "ack-covers-batch",
      () => `${client} request ${requestId}: ${sent.length} messages, ack for ${count}`,
    );
    for (let i = 0; i < count; i++) {
      const seq = firstSeq + i;
      check(
        !this.ackedSeqs.has(seq),
        "ack-unique",
        () => `${client} request ${requestId}: seq ${seq} was already acknowledged`,
      );
      const held = this.reference[seq - 1];
      check(
        held !== undefined &&
          held.topic === sent[i].topic &&
          bytesEqual(held.payload, sent[i].payload),
        "ack-matches-stream",
        () =>
          `${client} request ${requestId}: seq ${seq} holds ${held === undefined ? "nothing" : held.topic}, sent ${sent[i].topic}`,
      );
      this.ackedSeqs.add(seq);
    }
    this.ackedMaxSeq = Math.max(this.ackedMaxSeq, firstSeq + count - 1);
  }

  /**
   * The store reopened after a crash with `nextSeq`, and holds `stored` (all of it, seq order).
   * `committedBefore` was durable under the policy when the process died.
   */
  afterRecovery(
    nextSeq: number,
    committedBefore: number,
    stored: readonly ReferenceMessage[],
  ): void {
    check(
      nextSeq - 1 >= this.ackedMaxSeq,
      "acked-survives",
      () =>
        `recovery ends the stream at ${nextSeq - 1}, but seq ${this.ackedMaxSeq} was acknowledged`,
    );
    check(
      nextSeq - 1 >= committedBefore,
      "committed-survives",
      () => `recovery ends the stream at ${nextSeq - 1}, but ${committedBefore} was committed`,
    );
    check(
      nextSeq - 1 <= Math.max(this.reference.length, this.lostMaxSeq),
      "no-invented-seq",
      () =>
        `recovery ends the stream at ${nextSeq - 1}, only ${this.reference.length} were appended${this.lostMaxSeq > 0 ? ` and seqs up to ${this.lostMaxSeq} reported lost` : ""}`,
    );
    this.checkHolds(stored, nextSeq, "after recovery", { recovered: true });
    // Lost seqs were never acknowledged nor visible: the next life may give them to new messages.
    // A store whose next seq passes the stream (seqs a repair reported lost) leaves holes: gone.
    const appended = this.reference.length;
    this.reference.length = nextSeq - 1;
    this.partitions.length = nextSeq - 1;
    for (let seq = appended + 1; seq < nextSeq; seq++) this.setGone(seq, true);
    this.goneFloor = Math.min(this.goneFloor, nextSeq);
  }

  // ---- Subscriptions -------------------------------------------------------------------------

  /** SUBSCRIBED arrived for `sub` with `firstSeq`. */
  onSubscribed(client: string, sub: SubscriptionState, firstSeq: number): void {
    check(
      sub.nextExpected === null,
      "subscribed-once",
      () => `${client} sub ${sub.id}: a second SUBSCRIBED`,
    );
    const asked = sub.askedFrom;
    if (asked.kind === "seq")
      check(
        firstSeq === Math.max(1, asked.seq),
        "start-seq",
        () => `${client} sub ${sub.id}: asked from seq ${asked.seq}, SUBSCRIBED at ${firstSeq}`,
      );
    if (asked.kind === "earliest")
      check(
        firstSeq === 1,
        "start-earliest",
        () => `${client} sub ${sub.id}: earliest starts at ${firstSeq}`,
      );
    if (asked.kind === "time") {
      // The message before the start, past those retention removed, is older than the time.
      let beforeSeq = firstSeq - 1;
      while (beforeSeq >= this.goneFloor && this.isGone(beforeSeq)) beforeSeq--;
      const before = beforeSeq < this.goneFloor ? undefined : this.reference[beforeSeq - 1];
      check(
        before === undefined || before.timeUs < asked.timeUs,
        "start-time",
        () =>
          `${client} sub ${sub.id}: from time ${asked.timeUs} starts at ${firstSeq}, but seq ${beforeSeq} has time ${before?.timeUs}`,
      );
    }
    sub.nextExpected = firstSeq;
    sub.caughtUp = false;
  }

  /** One DATA message for `sub`. */
  onData(
    client: string,
    sub: SubscriptionState,
    seq: number,
    topic: string,
    payload: Uint8Array,
  ): void {
    this.messagesChecked++;
    const name = `${client} sub ${sub.id} [${sub.filterTexts.join(" ")}] from ${describeStart(sub.askedFrom)}`;
    const expected = sub.nextExpected;
    check(
      expected !== null,
      "data-after-subscribed",
      () => `${name}: DATA seq ${seq} before SUBSCRIBED`,
    );
    check(
      seq >= expected,
      "sub-in-order",
      () => `${name}: seq ${seq} after seq ${expected - 1} (duplicate or reordered)`,
    );
    const held = this.reference[seq - 1];
    check(
      held !== undefined,
      "data-in-stream",
      () => `${name}: seq ${seq} beyond the stream's end ${this.reference.length}`,
    );
    check(
      held.topic === topic && bytesEqual(held.payload, payload),
      "data-matches-stream",
      () =>
        `${name}: seq ${seq} is ${topic} (${payload.length} B), the stream holds ${held.topic} (${held.payload.length} B)`,
    );
    check(
      sub.filter.matches(topic),
      "data-matches-filter",
      () => `${name}: seq ${seq} topic ${topic}`,
    );
    this.noGap(name, sub.filter, expected, seq);
    sub.nextExpected = seq + 1;
    sub.received++;
  }

  /** CAUGHT_UP for `sub` at `nextSeq`. */
  onCaughtUp(client: string, sub: SubscriptionState, nextSeq: number): void {
    const name = `${client} sub ${sub.id} [${sub.filterTexts.join(" ")}] from ${describeStart(sub.askedFrom)}`;
    check(!sub.caughtUp, "caught-up-once", () => `${name}: a second CAUGHT_UP`);
    const expected = sub.nextExpected;
    check(
      expected !== null && nextSeq >= expected,
      "caught-up-seq",
      () => `${name}: CAUGHT_UP at ${nextSeq}, but seq ${(expected ?? 0) - 1} was delivered`,
    );
    this.noGap(name, sub.filter, expected, Math.min(nextSeq, this.reference.length + 1));
    sub.caughtUp = true;
    sub.nextExpected = nextSeq;
  }

  /** End of run: every matching seq below `visibleSeq` was delivered. */
  complete(client: string, sub: SubscriptionState, visibleSeq: number): void {
    const name = `${client} sub ${sub.id} [${sub.filterTexts.join(" ")}] from ${describeStart(sub.askedFrom)}`;
    check(sub.nextExpected !== null, "sub-complete", () => `${name}: never SUBSCRIBED`);
    check(
      sub.caughtUp,
      "sub-complete",
      () =>
        `${name}: never CAUGHT_UP (next expected ${sub.nextExpected}, visible end ${visibleSeq})`,
    );
    this.noGap(
      name,
      sub.filter,
      sub.nextExpected,
      Math.min(visibleSeq, this.reference.length + 1),
      "sub-complete",
    );
  }

  private noGap(
    name: string,
    filter: Filter,
    fromSeq: number,
    toSeq: number,
    invariant = "sub-no-gap",
  ): void {
    const tipFrom = this.tipHeldFrom();
    for (let seq = Math.max(fromSeq, Math.min(this.goneFloor, tipFrom)); seq < toSeq; seq++) {
      const held = this.reference[seq - 1];
      check(
        held === undefined || (this.isGone(seq) && seq < tipFrom) || !filter.matches(held.topic),
        invariant,
        () =>
          `${name}: seq ${seq} (${held.topic}) was skipped (got up to ${fromSeq - 1}, next delivered ${toSeq})`,
      );
    }
  }

  // ---- Accounting ----------------------------------------------------------------------------

  /** The tip's pool and indexes balance. */
  tip(stats: TipStats): void {
    check(
      stats.poolBlocksUsed + stats.poolBlocksFree === stats.poolBlocksMax,
      "tip-pool-balance",
      () =>
        `used ${stats.poolBlocksUsed} + free ${stats.poolBlocksFree} != max ${stats.poolBlocksMax}`,
    );
    check(
      stats.indexEntriesLive === stats.records,
      "tip-index-balance",
      () => `${stats.indexEntriesLive} index entries for ${stats.records} ring records`,
    );
    check(
      stats.bytesUsed <= stats.capacityBytes,
      "tip-within-capacity",
      () => `${stats.bytesUsed} B used of ${stats.capacityBytes}`,
    );
    check(
      stats.records === 0 || stats.nextSeq - stats.firstSeq === stats.records,
      "tip-contiguous",
      () => `ring holds ${stats.records} records for seqs [${stats.firstSeq}, ${stats.nextSeq})`,
    );
  }
}
