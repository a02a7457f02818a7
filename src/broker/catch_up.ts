/**
 * Catch-up: the stage that moves each subscription from where it started to the visible end
 * (its `nextSeq` carries it across every handoff):
 *
 *   start ─▶ time? ─(tip holds it)─▶ seq ─┐      (else one disk read finds the seq: RESOLVING)
 *                                         ▼
 *            DISK (store reader, batches) ─▶ TIP (tip cursor to visibleSeq) ─▶ LIVE
 *              ▲                               │ ▲                               │
 *              └──── the ring moved past ──────┘ └── drained ── STALLED ◀── backed up
 *
 * It owns the phases' sets (catching up, live) and the pump that gives each catching-up
 * subscription a bounded slice per round (CATCH_UP_SLICE_BYTES), so one reader far behind cannot
 * starve the rest, and a round at most DELIVERY_EVENT_BYTES_MAX of them all (the next round goes
 * on with those it did not reach, after other events), so a thousand readers cannot stall the
 * event loop. A stalled disk-phase subscription of a client known to read keeps its reader and the
 * rest of its batch while there are few (STALLED_DISK_READERS_KEPT_MAX), so a slow client resumes
 * without re-reading.
 * At most DISK_READERS_MAX subscriptions hold a disk reader at once (each holds read-ahead and a
 * batch): the rest of the disk phase waits for a slot in order, holding only its position.
 *
 * Clients first: a session whose client has shown it reads (Session.showsReading) is served
 * before those that have not — first in each round, first to a free disk reader — and the latter
 * hold at most DISK_READERS_UNSHOWN_MAX readers. A socket never read takes megabytes before it
 * refuses anything, so a thousand such subscribers looked healthy, went through every reader in
 * turn and left a reading subscriber behind them all.
 *
 * Not here: pushing new seqs to LIVE subscriptions (live_fanout.ts), flushing and closing sessions
 * (dispatch.ts, reached through SessionOutcomes). Pure: the store, clock and scheduler are ports.
 */
import type { Log } from "../stdx/log.ts";
import {
  CATCH_UP_FIRST_SLICE_BYTES,
  CATCH_UP_READ_BATCH_BYTES,
  CATCH_UP_READ_BUFFER_BYTES,
  CATCH_UP_SLICE_BYTES,
  DELIVERY_EVENT_BYTES_MAX,
  DISK_READERS_MAX,
  DISK_READERS_UNSHOWN_MAX,
  STALLED_DISK_READERS_KEPT_MAX,
} from "../constants.ts";
import { encodeCaughtUp, encodeSubscribed, type SubscribeFrame } from "../protocol/mod.ts";
import { assert } from "../stdx/assert.ts";
import { Histogram } from "../stdx/histogram.ts";
import type { Tip, TipRecords } from "../tip/mod.ts";
import { Filter } from "../topic/filter.ts";
import type { Delivery } from "./delivery.ts";
import type { BrokerStore, Clock, Scheduler, StoredMessageLike } from "./ports.ts";
import { Phase, type SubscriberSession, type Subscription } from "./subscription.ts";

/** Bounds (seconds) of the recovery-duration histograms. */
export const RECOVERY_SECONDS_BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60];
/** Bytes a tip slice counts per message beside its payload (its DATA message head and topic). */
const SLICE_MESSAGE_OVERHEAD_BYTES = 64;

/** The visible end: seqs below it are durable and may be delivered (the sequencer's). */
export interface VisibleEnd {
  readonly visibleSeq: number;
  /** The seq the next published message will get: where a live subscription starts. */
  readonly nextSeq: number;
}

/** What catch-up asks of the session lifecycle (dispatch.ts). */
export interface SessionOutcomes {
  /** Flushes a session's frames; stops or resumes its subscriptions; closes it when asked. */
  settle(session: SubscriberSession): void;
  /** After an event: starts a commit if one is due, then settles the session. */
  afterEvent(session: SubscriberSession): void;
  /** Reading a subscription from storage failed: drop it and tell its client. */
  subscriptionFailed(subscription: Subscription, error: unknown): void;
}

/** What catch-up is built from. */
export interface CatchUpOptions {
  tip: Tip;
  store: BrokerStore;
  clock: Clock;
  scheduler: Scheduler;
  delivery: Delivery;
  visible: VisibleEnd;
  sessions: SessionOutcomes;
  /** Bytes one subscription may write per catch-up slice (tests shrink it). */
  sliceBytes?: number;
  /** Bytes all subscriptions may write in one pump round (tests shrink it). */
  roundBytes?: number;
  /** Disk readers held at once (tests shrink it). */
  diskReadersMax?: number;
  /** Where stalls and resumes are logged (at debug: a slow client stalls often). */
  log?: Log;
}

/** Moves every subscription from its start to LIVE, and back when it falls behind. */
export class CatchUp {
  /** Subscriptions at the visible end: live fan-out pushes to them. */
  readonly live = new Set<Subscription>();
  /** How long subscriptions took from SUBSCRIBED to CAUGHT_UP, by where they started. */
  readonly recoverySeconds = {
    tip: new Histogram(RECOVERY_SECONDS_BOUNDS),
    disk: new Histogram(RECOVERY_SECONDS_BOUNDS),
  };
  /** Subscriptions that started behind, by where from. */
  readonly recoveries = { disk: 0, tip: 0 };
  private readonly catchingUp = new Set<Subscription>();
  /** Stalled subscriptions holding a disk reader (at most STALLED_DISK_READERS_KEPT_MAX). */
  private readonly stalledReaders = new Set<Subscription>();
  /** Subscriptions holding a disk reader (at most diskReadersMax). */
  private readonly readers = new Set<Subscription>();
  /** Disk-phase subscriptions waiting for a reader, in order: they hold only their position. */
  private readonly diskWaiting = new Set<Subscription>();
  /** Readers opened small, for clients that had not shown they read (see openReader). */
  private readonly smallReaders = new WeakSet<object>();
  private readonly diskReadersMax: number;
  private pumpScheduled = false;
  private readonly tip: Tip;
  private readonly records: TipRecords;
  private readonly store: BrokerStore;
  private readonly clock: Clock;
  private readonly scheduler: Scheduler;
  private readonly delivery: Delivery;
  private readonly visible: VisibleEnd;
  private readonly sessions: SessionOutcomes;
  private readonly sliceBytes: number;
  private readonly roundBytes: number;
  private readonly log: Log | undefined;

  constructor(options: CatchUpOptions) {
    this.tip = options.tip;
    this.records = options.tip.records;
    this.store = options.store;
    this.clock = options.clock;
    this.scheduler = options.scheduler;
    this.delivery = options.delivery;
    this.visible = options.visible;
    this.sessions = options.sessions;
    this.sliceBytes = options.sliceBytes ?? CATCH_UP_SLICE_BYTES;
    this.roundBytes = options.roundBytes ?? DELIVERY_EVENT_BYTES_MAX;
    this.diskReadersMax = options.diskReadersMax ?? DISK_READERS_MAX;
    this.log = options.log;
  }

  /** Starts a new subscription where its SUBSCRIBE says. */
  start(subscription: Subscription, start: SubscribeFrame["start"]): void {
    if (start.kind === "time") {
      this.resolveTime(subscription, start.timeUs);
      return;
    }
    // Live: after every message sequenced so far, durable or not (one published before the
    // SUBSCRIBE is not the subscription's, even when its commit is still running).
    const from =
      start.kind === "live" ? this.visible.nextSeq : start.kind === "earliest" ? 1 : start.seq;
    this.begin(subscription, from);
  }

  /** Starts a subscription at `fromSeq`: SUBSCRIBED, then the phase that holds it. */
  private begin(subscription: Subscription, fromSeq: number): void {
    const session = subscription.session;
    const visibleSeq = this.visible.visibleSeq;
    subscription.nextSeq = Math.max(1, fromSeq);
    session.endData();
    const records = this.records;
    const oldest = records.count > 0 ? Math.min(records.firstSeq, visibleSeq) : visibleSeq;
    encodeSubscribed(session.writer, {
      subscriptionId: subscription.id,
      firstSeq: subscription.nextSeq,
    });
    subscription.consumer?.began(subscription.nextSeq);
    subscription.startedUs = this.clock.nowUs();
    if (subscription.nextSeq >= visibleSeq) {
      this.goLive(subscription);
    } else if (subscription.nextSeq >= oldest) {
      this.recoveries.tip++;
      subscription.recovery = "tip";
      this.toTip(subscription);
      // The first messages leave with SUBSCRIBED at the end of this event; the pump goes on.
      this.tipSlice(subscription, CATCH_UP_FIRST_SLICE_BYTES);
    } else {
      this.recoveries.disk++;
      subscription.recovery = "disk";
      this.toDisk(subscription);
    }
  }

  /**
   * A time start: the tip answers when it reaches back far enough, else one disk read finds the
   * seq.
   */
  private resolveTime(subscription: Subscription, timeUs: number): void {
    if (this.tip.holdsFromTime(timeUs)) {
      this.begin(subscription, Math.min(this.tip.seqAtTime(timeUs), this.visible.visibleSeq));
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
          this.sessions.afterEvent(subscription.session);
        },
        (error) => this.sessions.subscriptionFailed(subscription, error),
      );
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

  /** Sends a subscription to catch up from the tip (also when the ring moved past it, live). */
  toTip(subscription: Subscription): void {
    this.live.delete(subscription);
    subscription.phase = Phase.Tip;
    this.dropDiskReader(subscription);
    this.catchingUp.add(subscription);
    this.schedulePump();
  }

  private toDisk(subscription: Subscription): void {
    this.live.delete(subscription);
    this.catchingUp.add(subscription);
    subscription.phase = Phase.Disk;
    if (this.mayOpenReader(subscription)) this.openReader(subscription);
    else {
      // It waits with a position only: its session's writer need not stay grown meanwhile.
      this.diskWaiting.add(subscription);
      subscription.session.shrinkWriter();
    }
    this.schedulePump();
  }

  /** True when `subscription` may take a disk reader now (see the head comment: clients first). */
  private mayOpenReader(subscription: Subscription): boolean {
    if (this.readers.size >= this.diskReadersMax) return false;
    if (subscription.session.showsReading) return true;
    let unshown = 0;
    for (const holder of this.readers) if (!holder.session.showsReading) unshown++;
    return unshown < DISK_READERS_UNSHOWN_MAX;
  }

  /**
   * Opens a disk reader at the subscription's position. Borrowed payloads: diskBatch copies each
   * into the session's frames before the next batch. Its size follows what the client has shown:
   * a client that reads gets the store's batches and read-ahead (a whole-stream replay needs
   * them); one that has not shown it yet gets a slice per batch and a small read-ahead, since what
   * a reader holds is its batch and the buffers the batch points into (diskSlice upgrades it).
   */
  private openReader(subscription: Subscription): void {
    const reading = subscription.session.showsReading;
    const reader = this.store.read(
      subscription.filter,
      { seq: subscription.nextSeq },
      reading
        ? { borrow: true, firstBatchBytesMax: CATCH_UP_FIRST_SLICE_BYTES }
        : {
            borrow: true,
            batchBytesMax: CATCH_UP_READ_BATCH_BYTES,
            bufferBytes: CATCH_UP_READ_BUFFER_BYTES,
            firstBatchBytesMax: CATCH_UP_FIRST_SLICE_BYTES,
          },
    );
    if (!reading) this.smallReaders.add(reader);
    subscription.diskReader = reader;
    this.readers.add(subscription);
  }

  private dropDiskReader(subscription: Subscription): void {
    subscription.diskReader = null;
    subscription.diskBacklog = null;
    this.stalledReaders.delete(subscription);
    this.diskWaiting.delete(subscription);
    if (!this.readers.delete(subscription)) return;
    // A slot freed: the longest-waiting disk-phase subscription of a reading client takes it,
    // else the longest-waiting one that may.
    for (const readingFirst of [true, false]) {
      for (const waiting of this.diskWaiting) {
        if (this.readers.size >= this.diskReadersMax) return;
        if (waiting.session.showsReading !== readingFirst || !this.mayOpenReader(waiting)) continue;
        this.diskWaiting.delete(waiting);
        this.openReader(waiting);
        this.schedulePump();
      }
    }
  }

  /** Forgets a closed subscription (its phase is already CLOSED). */
  drop(subscription: Subscription): void {
    this.dropDiskReader(subscription);
    this.live.delete(subscription);
    this.catchingUp.delete(subscription);
  }

  /** Stops a subscription whose session is backed up, remembering where to go on from. */
  stall(subscription: Subscription): void {
    if (subscription.phase === Phase.Stalled || subscription.phase === Phase.Closed) return;
    subscription.stalledFrom = subscription.phase === Phase.Disk ? Phase.Disk : Phase.Tip;
    this.diskWaiting.delete(subscription);
    if (subscription.diskReader !== null) {
      // Only a client known to read is likely to come back for the rest of its batch.
      if (
        subscription.session.showsReading &&
        this.stalledReaders.size < STALLED_DISK_READERS_KEPT_MAX
      )
        this.stalledReaders.add(subscription);
      else this.dropDiskReader(subscription);
    }
    this.live.delete(subscription);
    this.catchingUp.delete(subscription);
    subscription.phase = Phase.Stalled;
    this.log?.debug("subscription stalled: its client is not reading", {
      session: subscription.session.id,
      subscription: subscription.id,
      nextSeq: subscription.nextSeq,
    });
  }

  /** A session drained: its stalled subscriptions go on from the disk reader they kept, or tip. */
  resumeStalled(session: SubscriberSession): void {
    let resumed = false;
    for (const subscription of session.subscriptions.values()) {
      if (subscription.phase !== Phase.Stalled) continue;
      resumed = true;
      this.log?.debug("subscription resumed", {
        session: session.id,
        subscription: subscription.id,
        nextSeq: subscription.nextSeq,
      });
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

  /**
   * One round of catch-up: each catching-up subscription gets a bounded slice, until the round's
   * bytes are spent; a subscription served goes to the back, so the next round starts with those
   * this one did not reach.
   */
  private pump(): void {
    const touched = new Set<SubscriberSession>();
    let roundBytes = 0;
    // Clients that have shown they read first, each group in its turn order.
    const order: Subscription[] = [];
    for (const subscription of this.catchingUp)
      if (subscription.session.showsReading) order.push(subscription);
    for (const subscription of this.catchingUp)
      if (!subscription.session.showsReading) order.push(subscription);
    for (const subscription of order) {
      if (roundBytes >= this.roundBytes) break;
      if (this.catchingUp.delete(subscription)) this.catchingUp.add(subscription);
      const session = subscription.session;
      // Hand the socket what earlier slices built, so "backed up" means the client is slow,
      // not that this round wrote a lot.
      session.flush();
      if (session.backedUp) {
        this.stall(subscription);
        continue;
      }
      if (subscription.phase === Phase.Tip) roundBytes += this.tipSlice(subscription);
      else if (
        subscription.phase === Phase.Disk &&
        !subscription.diskBusy &&
        subscription.diskReader !== null
      )
        this.diskSlice(subscription);
      touched.add(session);
    }
    for (const session of touched) this.sessions.settle(session);
    if (roundBytes >= this.roundBytes) {
      this.schedulePump();
      return;
    }
    for (const subscription of this.catchingUp) {
      if (subscription.phase === Phase.Tip) {
        this.schedulePump();
        break;
      }
    }
  }

  /**
   * Delivers up to a slice (`sliceBytes`) of a subscription's backlog from the tip; returns the
   * bytes counted.
   */
  private tipSlice(subscription: Subscription, sliceBytes = this.sliceBytes): number {
    const visibleSeq = this.visible.visibleSeq;
    if (subscription.nextSeq >= visibleSeq) {
      this.goLive(subscription);
      return 0;
    }
    const read = this.tip.read(subscription.matcher, subscription.nextSeq, { endSeq: visibleSeq });
    if (!read.ok) {
      this.toDisk(subscription);
      return 0;
    }
    const cursor = read.cursor;
    const session = subscription.session;
    const records = this.records;
    let bytes = 0;
    while (bytes < sliceBytes && !session.backedUp) {
      if (!cursor.next()) {
        if (cursor.fellBehind) {
          subscription.nextSeq = cursor.resumeSeq;
          this.toDisk(subscription);
        } else {
          subscription.nextSeq = Math.max(subscription.nextSeq, this.visible.visibleSeq);
          this.goLive(subscription);
        }
        return bytes;
      }
      this.delivery.fromTip(subscription, cursor.offset);
      bytes += records.payloadLengthAt(cursor.offset) + SLICE_MESSAGE_OVERHEAD_BYTES;
      subscription.nextSeq = cursor.resumeSeq;
    }
    if (session.backedUp) this.stall(subscription);
    return bytes;
  }

  /** Asks the disk for a subscription's next batch; delivers it when it comes. */
  private diskSlice(subscription: Subscription): void {
    let reader = subscription.diskReader;
    assert(reader !== null, "diskSlice: a disk-phase subscription has a reader");
    const backlog = subscription.diskBacklog;
    if (backlog !== null) {
      // The rest of the batch a stall interrupted (borrowed payloads: no nextBatch call since).
      subscription.diskBacklog = null;
      this.diskBatch(subscription, backlog, -1);
      return;
    }
    if (this.smallReaders.has(reader) && subscription.session.showsReading) {
      // Its client has shown it reads since: the store's batches and read-ahead from here on
      // (nothing of the small reader's last batch is borrowed any more).
      reader = this.store.read(
        subscription.filter,
        { seq: subscription.nextSeq },
        { borrow: true },
      );
      subscription.diskReader = reader;
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
        this.sessions.settle(subscription.session);
      },
      (error) => {
        subscription.diskBusy = false;
        if (replaced()) return;
        this.sessions.subscriptionFailed(subscription, error);
      },
    );
  }

  private diskBatch(
    subscription: Subscription,
    batch: StoredMessageLike[],
    committedBefore: number,
  ): void {
    const session = subscription.session;
    const records = this.records;
    const tipFirst = records.count > 0 ? records.firstSeq : this.visible.visibleSeq;
    for (let i = 0; i < batch.length; i++) {
      const message = batch[i];
      if (message.seq < subscription.nextSeq) continue;
      // The tip holds every seq from its oldest on: seqs the store skipped there are left to it
      // (retention may have removed their files while the tip still holds them, and those are
      // held messages), so the disk hands over at the first message that would skip them.
      if (message.seq > subscription.nextSeq && message.seq > tipFirst) {
        subscription.nextSeq = Math.max(subscription.nextSeq, tipFirst);
        break;
      }
      if (session.backedUp) {
        // A slow client: keep the rest of the batch for when it drains (stall() may drop it and
        // the reader; a fresh reader then resumes from nextSeq).
        subscription.diskBacklog = i === 0 ? batch : batch.slice(i);
        break;
      }
      this.delivery.fromStore(subscription, message);
      subscription.nextSeq = message.seq + 1;
    }
    const visibleSeq = this.visible.visibleSeq;
    // An empty batch: nothing more matches up to what was committed when it was asked for, but
    // the tip's seqs are left to the tip (as above).
    if (batch.length === 0)
      subscription.nextSeq = Math.max(
        subscription.nextSeq,
        Math.min(committedBefore + 1, tipFirst),
      );
    const tipHolds = subscription.nextSeq >= tipFirst;
    if (subscription.phase === Phase.Stalled) return;
    if (tipHolds || subscription.nextSeq >= visibleSeq) this.toTip(subscription);
    else if (session.backedUp) this.stall(subscription);
    else this.schedulePump();
  }
}
