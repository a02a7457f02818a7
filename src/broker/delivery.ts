/**
 * Delivery: the last step of every path a message takes to a subscriber — one message written to
 * one subscription's session, and counted. Catch-up (tip and disk) and live fan-out all end here,
 * so they share these counters and the topic names' UTF-8 bytes, encoded once per topic id (and
 * dropped when the table reclaims the id).
 *
 *   tip record (position) ──fromTip───┐
 *   stored message ─────────fromStore─┼─▶ session.addData ─▶ DATA frame of subscription id
 *   shared frames (counted) ─shared───┘
 *
 * Not here: which messages a subscription gets (catch_up.ts, live_fanout.ts) or when its session
 * is flushed. Zero-copy: payloads go to the frame writer as ranges of the ring or of the store's
 * buffers; nothing is allocated per message. Pure.
 */
import type { TipRecords } from "../tip/mod.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { StoredMessageLike } from "./ports.ts";
import type { Subscription } from "./subscription.ts";

const NO_PROPERTIES = new Uint8Array(0);

/** Writes messages into subscriptions' sessions and counts them. */
export class Delivery {
  /** Messages delivered, by every path. */
  messagesDelivered = 0;
  /** Of those, delivered live through frames encoded once for a group of equal filters. */
  messagesDeliveredShared = 0;
  private readonly topicBytes: (Uint8Array | undefined)[] = [];
  private readonly encoder = new TextEncoder();
  /** topicUtf8 as a function value (for SharedData.encode), made once. */
  readonly topicUtf8Of = (topicId: number): Uint8Array => this.topicUtf8(topicId);

  constructor(
    private readonly topics: TopicTable,
    private readonly records: TipRecords,
  ) {
    topics.onReclaim((ids) => {
      for (let i = 0; i < ids.length; i++) this.topicBytes[ids[i]] = undefined;
    });
  }

  /** The UTF-8 bytes of topic `topicId`'s name (encoded on first use). */
  topicUtf8(topicId: number): Uint8Array {
    return (this.topicBytes[topicId] ??= this.encoder.encode(this.topics.topicName(topicId)));
  }

  /** Delivers the tip record at `position` to `subscription`. */
  fromTip(subscription: Subscription, position: number): void {
    const records = this.records;
    const topic = this.topicUtf8(records.topicAt(position));
    records.deliverAt(
      position,
      subscription.session,
      subscription.id,
      topic,
      subscription.withProperties,
    );
    subscription.messagesDelivered++;
    this.messagesDelivered++;
  }

  /** Delivers a message read from the store to `subscription` (copying a borrowed payload). */
  fromStore(subscription: Subscription, message: StoredMessageLike): void {
    // A borrowing read hands the topic's bytes out (its reader keeps them per topic): no lookup of
    // the name per message (a whole-stream replay over 10,000 topics spent a third of its time
    // there and in decoding the names, docs/benchmarks.md#performance-second-round-issue-32).
    const topic = message.topicUtf8 ?? this.storedTopicUtf8(message);
    const session = subscription.session;
    const properties = subscription.withProperties ? (message.properties ?? NO_PROPERTIES) : null;
    const propertiesBytes = properties === null ? 0 : properties.length;
    // A borrowing read gives a range of its buffer; a copying one the payload itself.
    const borrowed = message.source !== undefined;
    session.addData(
      subscription.id,
      message.seq,
      message.timeUs,
      topic,
      borrowed ? (message.source as Uint8Array) : message.payload,
      borrowed ? (message.start as number) : 0,
      borrowed ? (message.length as number) : message.payload.length,
      properties,
      0,
      propertiesBytes,
    );
    subscription.messagesDelivered++;
    this.messagesDelivered++;
  }

  /** The UTF-8 bytes of a stored message's topic, through the topic table. */
  private storedTopicUtf8(message: StoredMessageLike): Uint8Array {
    const interned = this.topics.intern(message.topic, message.seq);
    // A stored topic is valid; it is refused only when the table is full (TOPICS_MAX): then its
    // name is encoded for this message alone, and the reader still gets it.
    return interned.ok ? this.topicUtf8(interned.topicId) : this.encoder.encode(message.topic);
  }

  /** Counts `messages` delivered to `subscription` through shared frames (already copied). */
  shared(subscription: Subscription, messages: number): void {
    subscription.messagesDelivered += messages;
    this.messagesDelivered += messages;
    this.messagesDeliveredShared += messages;
  }
}
