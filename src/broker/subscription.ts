/**
 * Subscription: one position moving through the stream for one filter of one session. Its phase
 * says where the next message comes from; `nextSeq` is the one number that carries it across
 * every handoff, so no message is skipped or repeated:
 *
 *   DISK ──(nextSeq reaches the tip)──▶ TIP ──(reaches the visible end)──▶ LIVE
 *     ▲                                  │ ▲                                  │
 *     └──────(the ring moved past)───────┘ └──(client drained)── STALLED ◀────┘ (send queue full)
 *
 * Invariant: every matching message with seq < nextSeq has been written to the session, in seq
 * order, exactly once; nothing with seq >= nextSeq has.
 */
import type { Filter } from "../topic/filter.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import type { Consumer } from "./consumer_registry.ts";
import type { StoredMessageLike } from "./ports.ts";
import type { Session } from "./session.ts";

/** Where a subscription's next message comes from. */
export const Phase = {
  /** Waiting for its start to be resolved (a time start that needs the disk). */
  Resolving: 0,
  /** Reading from disk (initial recovery). */
  Disk: 1,
  /** Reading from the tip through an indexed or linear cursor (tip recovery). */
  Tip: 2,
  /** At the visible end: fan-out pushes each new message. */
  Live: 3,
  /** The session's send queue is full: waits for the client to read. */
  Stalled: 4,
  /** Unsubscribed or its session closed. */
  Closed: 5,
} as const;
/** A subscription phase. */
export type Phase = (typeof Phase)[keyof typeof Phase];

/** A reader of committed messages from disk, as the store offers it. */
export interface DiskReader {
  nextBatch(): Promise<StoredMessageLike[]>;
}

/** A session of the broker: its subscriptions are Subscriptions. */
export type SubscriberSession = Session<Subscription>;

/** One subscription's state. */
export class Subscription {
  phase: Phase = Phase.Resolving;
  /** The phase to go back to when a stall ends. */
  stalledFrom: Phase = Phase.Tip;
  caughtUpSent = false;
  diskReader: DiskReader | null = null;
  /** The undelivered rest of the reader's last batch (a stall interrupted it), or null. */
  diskBacklog: StoredMessageLike[] | null = null;
  diskBusy = false;
  /** Messages delivered, for metrics. */
  messagesDelivered = 0;
  /** Where it started when it was behind (null: it started live), and when (µs). */
  recovery: "tip" | "disk" | null = null;
  startedUs = 0;
  /** The durable consumer this subscription serves (option DURABLE), or null. */
  consumer: Consumer | null = null;

  constructor(
    readonly session: SubscriberSession,
    readonly id: number,
    readonly filter: Filter,
    readonly matcher: FilterMatcher,
    public nextSeq: number,
    /** SUBSCRIBE option PROPERTIES: its DATA frames carry each message's properties. */
    readonly withProperties = false,
  ) {}
}
