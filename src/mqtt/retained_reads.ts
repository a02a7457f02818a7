/**
 * RetainedReads: the retained messages an MQTT session's subscriptions are owed (MQTT's retained
 * messages are each topic's newest message below the subscription's first seq). Lists them from
 * the door's RetainedSource, reads them a batch at a time under the session's back-pressure, and
 * turns each read batch into the session's outgoing messages (retainedOutgoing).
 *
 * Does not send nor hold messages, nor know the window: the session (mqtt_session.ts) says
 * whether there is room (RetainedHost) and takes the read messages into its held queue.
 *
 * Invariants: one read per subscription at a time (a new one replaces the one before; a listing
 * under way lists again for the new one when it ends); a subscription that ended, or a session
 * that closes, gets nothing more; a message with an empty payload is no retained message.
 */
import { MQTT_RETAINED_BATCH } from "./mqtt_limits.ts";
import type { QoS } from "./packets.ts";
import { expiryLeft } from "./session_codes.ts";
import type {
  Outgoing,
  RetainedMessage,
  RetainedRead,
  SessionDoor,
  SubscriptionState,
} from "./session_types.ts";
import { type ClientOrigin, decodeStoredProperties } from "./stored_properties.ts";
import type { TopicMapping } from "./topic_mapping.ts";

/** What RetainedReads asks of its session. */
export interface RetainedHost {
  /** The client id (for the log). */
  clientId(): string;
  /** True once the session closes: nothing more is read. */
  stopped(): boolean;
  /** True while `state` is the session's open subscription of its native id. */
  isOpen(state: SubscriptionState): boolean;
  /** True while the session takes a batch more (socket and held room, a window's worth). */
  hasRoom(): boolean;
  /** A batch of retained messages read for `state`, below `beforeSeq`. */
  deliver(state: SubscriptionState, beforeSeq: number, messages: readonly RetainedMessage[]): void;
}

/** The retained messages being read for one session's subscriptions. */
export class RetainedReads {
  /** Subscriptions with retained messages being read (more() goes through these only). */
  private readonly reading = new Set<SubscriptionState>();

  constructor(
    private readonly door: SessionDoor,
    private readonly host: RetainedHost,
  ) {}

  /**
   * The newest message of each topic the subscription matches, below `beforeSeq` (what comes
   * from there on, it gets live), as retained messages. A topic whose newest message has an
   * empty payload has none (MQTT's way of clearing a retained message).
   */
  start(state: SubscriptionState, beforeSeq: number): void {
    if (this.door.retained === undefined) return;
    // One read per subscription: this one replaces (cancels) the one before; a listing under
    // way lists again for this one when it ends.
    const listing = state.retainedRead?.list === null;
    state.retainedRead = { beforeSeq, list: null, next: 0, reading: false };
    this.reading.add(state);
    if (!listing) this.list(state);
  }

  private list(state: SubscriptionState): void {
    const read = state.retainedRead;
    const source = this.door.retained;
    if (read === undefined || source === undefined) return;
    void source.newest(state.entries).then(
      (list) => {
        if (state.retainedRead !== read) {
          if (state.retainedRead?.list === null) this.list(state);
          return;
        }
        read.list = list.filter((entry) => entry.seq < read.beforeSeq);
        this.more();
      },
      (error: unknown) => this.failed(state, read, error),
    );
  }

  /**
   * Reads the next batch of each subscription's retained messages, under the session's
   * back-pressure: none while the socket or the held messages are full, or the window's worth
   * waits; the session's pump() (acks, drained socket) calls it again. Nothing once it closes.
   */
  more(): void {
    const source = this.door.retained;
    if (source === undefined || this.host.stopped()) return;
    for (const state of this.reading) {
      const read = state.retainedRead;
      if (read === undefined || !this.host.isOpen(state)) {
        this.reading.delete(state);
        continue;
      }
      if (read.list === null || read.reading) continue;
      if (read.next >= read.list.length) {
        state.retainedRead = undefined;
        this.reading.delete(state);
        continue;
      }
      if (!this.host.hasRoom()) return;
      const batch = read.list.slice(read.next, read.next + MQTT_RETAINED_BATCH);
      read.next += batch.length;
      read.reading = true;
      void source.read(batch).then(
        (messages) => {
          read.reading = false;
          if (state.retainedRead !== read || !this.host.isOpen(state)) return;
          this.host.deliver(state, read.beforeSeq, messages);
        },
        (error: unknown) => this.failed(state, read, error),
      );
    }
  }

  /** Forgets every read (the session ends). */
  clear(): void {
    this.reading.clear();
  }

  private failed(state: SubscriptionState, read: RetainedRead, error: unknown): void {
    if (state.retainedRead === read) state.retainedRead = undefined;
    this.door.log?.warn("mqtt retained messages not read", {
      client: this.host.clientId(),
      reason: error instanceof Error ? error.message : String(error),
    });
  }
}

/**
 * A read batch's messages as they go to the subscription's client: below `beforeSeq`, not
 * cleared (empty), not excluded ($ topics, No Local), not expired; at the lower QoS, retained.
 */
export function retainedOutgoing(
  state: SubscriptionState,
  beforeSeq: number,
  messages: readonly RetainedMessage[],
  mapping: TopicMapping,
  origin: ClientOrigin,
  nowUs: number,
): Outgoing[] {
  const out: Outgoing[] = [];
  for (const message of messages) {
    if (message.seq >= beforeSeq || message.payload.length === 0) continue;
    const topic = mapping.topicFromAria(message.topic);
    if (state.dollarExcluded && mapping.isDollarTopic(topic)) continue;
    if (state.options.noLocal && origin.published(message.properties)) continue;
    const stored = decodeStoredProperties(message.properties);
    const properties = stored.properties;
    if (!expiryLeft(properties, message.timeUs, nowUs)) continue;
    const bytes = message.payload.length + topic.length + message.properties.length;
    out.push({
      subscription: state,
      seq: message.seq,
      topic,
      payload: message.payload,
      properties,
      qos: Math.min(state.options.qos, stored.qos) as QoS,
      bytes,
      retain: true,
      retainFlag: true,
    });
  }
  return out;
}
