/**
 * Live fan-out: the stage that pushes newly visible seqs to the subscriptions at the visible end
 * (phase LIVE). The sequencer calls fanOut(from, to) each time a commit moves the visible end;
 * this stage owns the topic → subscriptions index (fanout.ts) and the shared-frame encoder
 * (shared_data.ts).
 *
 *   commit ─▶ fanOut(from, to)
 *               ├─ ring dropped `from`? ──▶ every live subscription back to TIP (catch-up)
 *               ├─ groups of equal filters ──▶ frames encoded once, copied per member
 *               ├─ the rest, seq by seq ──▶ index.of(topic) ──▶ delivery.fromTip
 *               │                                  └─ session backed up ──▶ stall (catch-up)
 *               └─ event's byte budget spent ──▶ those still behind back to TIP (catch-up)
 *
 * One fan-out builds at most `eventBytesMax` of DATA for all sessions together (a thousand
 * subscribers of one large commit would otherwise hold the event loop for seconds): the
 * subscriptions it did not reach go on from the tip, in catch-up's rounds, between other events.
 *
 * Not here: which subscriptions are live or how they get there (catch_up.ts owns the phases and
 * the live set; this stage reads it and asks it to move subscriptions through LiveSet).
 * Invariant: after fanOut(from, to) every LIVE subscription has nextSeq >= to, and every matching
 * seq in [from, to) was delivered to it once, or it was stalled or sent back to the tip at the
 * first seq it missed.
 */
import { DELIVERY_EVENT_BYTES_MAX } from "../constants.ts";
import type { TipRecords } from "../tip/mod.ts";
import type { Delivery } from "./delivery.ts";
import { Fanout } from "./fanout.ts";
import { SharedData } from "./shared_data.ts";
import { Phase, type SubscriberSession, type Subscription } from "./subscription.ts";

/** Bytes a message counts against the event's budget beside its payload (DATA head and topic). */
const MESSAGE_OVERHEAD_BYTES = 64;

/** What live fan-out asks of catch-up: the live set, and moving a subscription off it. */
export interface LiveSet {
  /** The subscriptions at the visible end (phase LIVE). */
  readonly live: ReadonlySet<Subscription>;
  /** Sends a subscription back to catch up from the tip. */
  toTip(subscription: Subscription): void;
  /** Stops a subscription whose session is backed up. */
  stall(subscription: Subscription): void;
}

/** Pushes newly visible seqs to LIVE subscriptions. */
export class LiveFanout {
  /** Every subscription by topic id, whatever its phase (added at SUBSCRIBE). */
  private readonly index = new Fanout();
  /** Live fan-out's frames encoded once per filter, and the members of the group being served. */
  private readonly sharedData = new SharedData();
  private readonly sharedMembers: Subscription[] = [];
  /** Bytes of DATA the current fanOut may still build. */
  private budgetBytes = 0;

  constructor(
    private readonly records: TipRecords,
    private readonly delivery: Delivery,
    private readonly liveSet: LiveSet,
    /** Bytes of DATA one fanOut builds at most (tests shrink it). */
    private readonly eventBytesMax: number = DELIVERY_EVENT_BYTES_MAX,
  ) {}

  /** Adds a new subscription to the topic index. */
  register(subscription: Subscription): void {
    this.index.add(subscription);
  }

  /** Removes a closed subscription from the topic index. */
  unregister(subscription: Subscription): void {
    this.index.remove(subscription);
  }

  /**
   * Pushes the newly visible seqs [from, to) to LIVE subscriptions, batching per session: first
   * to the groups of subscriptions with equal filters (frames encoded once per group), then one
   * message at a time to the rest, from the lowest seq one of them still needs. Adds every
   * session written to to `touched`.
   */
  fanOut(from: number, to: number, touched: Set<SubscriberSession>): void {
    const live = this.liveSet.live;
    if (live.size === 0) return;
    const records = this.records;
    if (from < records.firstSeq) {
      // The ring already dropped some of them: every live subscription catches up (tip, or disk).
      for (const subscription of [...live]) this.liveSet.toTip(subscription);
      return;
    }
    this.budgetBytes = this.eventBytesMax;
    this.fanOutShared(from, to, touched);
    let loopFrom = to;
    for (const subscription of live)
      loopFrom = Math.min(loopFrom, Math.max(from, subscription.nextSeq));
    // Every live subscription has had [from, doneSeq) once this loop ends.
    let doneSeq = to;
    if (loopFrom < to) {
      let at = records.offsetOfSeq(loopFrom);
      for (let seq = loopFrom; seq < to; seq++) {
        if (this.budgetBytes <= 0) {
          doneSeq = seq;
          break;
        }
        const subscriptions = this.index.of(records.topicAt(at));
        for (let i = 0; i < subscriptions.length; i++) {
          const subscription = subscriptions[i];
          if (subscription.phase !== Phase.Live || seq < subscription.nextSeq) continue;
          if (subscription.session.backedUp) {
            // A slow client: it stops at this seq and catches up from the tip once drained,
            // so one large group commit cannot queue past the session's limit.
            subscription.nextSeq = seq;
            this.liveSet.stall(subscription);
            touched.add(subscription.session);
            continue;
          }
          this.delivery.fromTip(subscription, at);
          this.budgetBytes -= records.payloadLengthAt(at) + MESSAGE_OVERHEAD_BYTES;
          touched.add(subscription.session);
        }
        if (seq + 1 < to) at = records.after(at);
      }
    }
    if (doneSeq === to && this.budgetBytes > 0) {
      for (const subscription of live) subscription.nextSeq = Math.max(subscription.nextSeq, to);
      return;
    }
    // The budget ran out: whoever is still behind goes on from the tip, after other events.
    for (const subscription of [...live]) {
      subscription.nextSeq = Math.max(subscription.nextSeq, doneSeq);
      if (subscription.nextSeq < to) this.liveSet.toTip(subscription);
    }
  }

  /**
   * Delivers [from, to) to each group of two or more live subscriptions with equal filters, at
   * `from` and not backed up, through frames encoded once per round (shared_data.ts). A member
   * whose session would pass its limit stops at the first seq of the frame it could not take
   * (its nextSeq), and the per-message loop of fanOut delivers and stalls it from there.
   */
  private fanOutShared(from: number, to: number, touched: Set<SubscriberSession>): void {
    const records = this.records;
    const members = this.sharedMembers;
    for (const group of this.index.groups()) {
      if (this.budgetBytes <= 0) return;
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
      const position = { seq: from, at: records.offsetOfSeq(from) };
      while (position.seq < to && members.length > 0) {
        shared.encode(records, position, to, {
          matcher: members[0].matcher,
          topicUtf8: this.delivery.topicUtf8Of,
          withProperties: members[0].withProperties,
        });
        for (let m = members.length - 1; m >= 0; m--) {
          const subscription = members[m];
          if (this.budgetBytes <= 0) {
            // Left for the tip (fanOut sends it there): nothing of this round was copied to it.
            members[m] = members[members.length - 1];
            members.pop();
            continue;
          }
          const copied = subscription.session.addSharedFrames(subscription.id, shared);
          let messages = 0;
          for (let i = 0; i < copied; i++) {
            messages += shared.messages(i);
            this.budgetBytes -= shared.frame(i).length;
          }
          this.delivery.shared(subscription, messages);
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
}
