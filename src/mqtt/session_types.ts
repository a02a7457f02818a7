/**
 * The MQTT session's types: what a session keeps per subscription and per message, what it leaves
 * behind for its client's return (StoredSession), and what it asks of its door (SessionDoor).
 * Split out of mqtt_session.ts (the session machine); no code. Invariants: see mqtt_session.ts.
 */
import type { ConnectionEvents, Scheduler } from "../broker/ports.ts";
import type { StartPosition } from "../protocol/mod.ts";
import type { Log } from "../stdx/log.ts";
import type { MqttSession } from "./mqtt_session.ts";
import type { Properties, QoS, Subscription } from "./packets.ts";
import type { PersistedFlight, PersistedWill } from "./session_state.ts";
import type { TopicMapping } from "./topic_mapping.ts";

/** Session expiry "never" (MQTT 5's 0xFFFFFFFF; a 3.1.1 session without clean session). */
export const SESSION_EXPIRY_NEVER = 0xffff_ffff;

/** A subscription of a session kept while its client is away. */
export interface SavedSubscription {
  filter: string;
  options: Subscription;
  identifier: number | undefined;
  /** Where it goes on: the first seq its client did not process, or its first start. */
  start: StartPosition;
  /**
   * Below `below`, only the seqs in `again` go to the client again (held, never sent): the others
   * were processed, or are in StoredSession.inflight. Absent: everything from `start`.
   */
  resume?: { below: number; again: readonly number[] };
  /**
   * Flights restored from the data directory (no payloads): each goes again, DUP with its packet
   * id, when its seq comes again from the subscription's consumer.
   */
  flights?: readonly PersistedFlight[];
}

/** A message as it went to the client (kept in flight, and with a session for its resume). */
export type SentMessage = Pick<
  Outgoing,
  "seq" | "topic" | "payload" | "properties" | "qos" | "retain" | "retainFlag"
>;

/** A QoS 1/2 PUBLISH sent and not acknowledged when its connection ended. */
export interface SavedFlight {
  packetId: number;
  /** The MQTT filter of its subscription. */
  filter: string;
  /** Part of its subscription's position (not a retained message, nor of one unsubscribed). */
  inPosition: boolean;
  /** QoS 2: PUBREC came and PUBREL was sent; PUBCOMP is awaited. */
  released: boolean;
  message: SentMessage;
}

/** A topic's newest message, as the broker gives it for retained messages (its LatestMessage). */
export interface RetainedMessage {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
  properties: Uint8Array;
}

/** A topic and the seq of its newest message (the broker's LatestEntry). */
export interface RetainedEntry {
  topic: string;
  seq: number;
}

/**
 * Where retained messages come from (the broker's Latest): the topics first, without payloads,
 * then their messages a batch at a time, so a session holds no more than its back-pressure allows.
 */
export interface RetainedSource {
  /** Each topic an Aria filter matches with its newest visible seq, in seq order. */
  newest(entries: readonly string[]): Promise<readonly RetainedEntry[]>;
  /** The messages of `entries`, in their order (one retention removed is left out). */
  read(entries: readonly RetainedEntry[]): Promise<readonly RetainedMessage[]>;
}

/** A subscription's retained messages being read: one read at a time, from `next` on. */
export interface RetainedRead {
  /** Only messages below it (the subscription gets the rest live). */
  beforeSeq: number;
  /** The topics to send (null: being listed). */
  list: readonly RetainedEntry[] | null;
  next: number;
  /** A batch is being read. */
  reading: boolean;
}

/** What a session leaves behind when its connection ends with a session expiry. */
export interface StoredSession {
  clientId: string;
  subscriptions: SavedSubscription[];
  /** Seconds it is kept after `releasedUs` (SESSION_EXPIRY_NEVER: kept). */
  expiryS: number;
  releasedUs: number;
  /** Its PUBLISHes (and PUBRELs) in flight, in the order sent: again, DUP, on resume [MQTT-4.4.0-1]. */
  inflight?: readonly SavedFlight[];
  /**
   * QoS 2 packet ids received and PUBRECed (or being stored), awaiting PUBREL: session state
   * (MQTT-4.3.3), so a resent PUBLISH on the next connection is not published again.
   */
  qos2Received?: readonly number[];
  /** Who signed in (MqttSession.signedInAs): another gets no session of this client id. */
  signedInAs?: string;
  /** QoS 2 packet ids PUBRECed by the client before a restart: PUBREL again on resume. */
  pubrelIds?: readonly number[];
  /** A will restored from the data directory, waiting for its delay (the door publishes it). */
  will?: PersistedWill;
}

/** What a session asks of the door that holds it. */
export interface SessionDoor {
  readonly broker: ConnectionEvents;
  /** Runs work after the current event (frames sent while the broker writes wait for it). */
  readonly scheduler: Scheduler;
  readonly mapping: TopicMapping;
  readonly log?: Log;
  /** A client id for a CONNECT that gave none (MQTT 5). */
  assignClientId(): string;
  /** The time now (µs): a message's expiry is counted from its publish time. */
  nowUs(): number;
  /** True when persistent sessions keep their positions as durable consumers (session_consumers.ts). */
  readonly durableSessions: boolean;
  /** Removes the durable consumer `name` once the frames sent so far are handled. */
  removeConsumerSoon(name: string): void;
  /**
   * The session's durable state changed (a persistent one's is written in the next batch; `lazy`:
   * a message in flight sent or acknowledged, which may wait for the store's interval).
   */
  sessionChanged(session: MqttSession, lazy?: boolean): void;
  /** Calls `done` once the state changes told so far are durable (the --fsync policy's rule). */
  whenDurable(done: () => void): void;
  /** Each topic's newest message (MQTT's retained messages); absent: none are served. */
  readonly retained?: RetainedSource;
  /** True when each PUBLISH to an MQTT 5 subscriber carries user property `aria-seq`. */
  readonly ariaSeq: boolean;
  /**
   * The client signed in as `clientId`: another connection of it is taken over, and the session
   * it left is given back (null: none, or `cleanStart` discarded it); "full": no room.
   */
  claim(session: MqttSession, clientId: string, cleanStart: boolean): StoredSession | null | "full";
  /** The connection ended; the session is kept as `stored` (null: it ended with it). */
  released(session: MqttSession, stored: StoredSession | null): void;
}

/** Where a connection is in its life. */
export type Phase = "awaiting_connect" | "signing_in" | "connected" | "closed";

/** A subscription of a connection: its options, position and what its client has not processed. */
export interface SubscriptionState {
  filter: string;
  entries: string[];
  options: Subscription;
  identifier: number | undefined;
  dollarExcluded: boolean;
  nativeId: number;
  start: StartPosition;
  /** Seqs taken from the broker that the client has not processed yet (held or in flight). */
  unprocessed: Set<number>;
  /** The seq after the last one the broker gave (0: SUBSCRIBED not seen yet). */
  positionSeq: number;
  /** The durable consumer keeping its position (a persistent session), or undefined. */
  durable: string | undefined;
  /** The last seq of a DATA of it, and the last one acknowledged to the broker (ACK). */
  lastDataSeq: number;
  ackedSeq: number;
  /** Retained messages are sent once SUBSCRIBED says where it starts (retain handling). */
  wantsRetained: boolean;
  /** Its retained messages being read (a SUBSCRIBE of it again replaces the read). */
  retainedRead?: RetainedRead;
  /** A member of a shared group (`$share/G/f`): acknowledged in delivery order. */
  shared: boolean;
  /** Shared: the seqs of its DATA in the order they came, from `deliveredHead` on. */
  delivered: number[];
  deliveredHead: number;
  /** A resumed session's: seqs below `skipBelow` come to the client only when in `again`. */
  skipBelow: number;
  again: Set<number>;
  /** Flights restored from the data directory, by seq: DUP with their packet id when they come. */
  restored?: Map<number, PersistedFlight>;
}

/** A message on its way to the client (held for its window, or sent). */
export interface Outgoing {
  subscription: SubscriptionState;
  seq: number;
  topic: string;
  payload: Uint8Array;
  properties: Properties;
  qos: QoS;
  /** What it counts in heldBytes. */
  bytes: number;
  /** Sent as a retained message (retain flag 1; not part of the subscription's position). */
  retain: boolean;
  /** The PUBLISH's retain flag: a retained message, or Retain As Published of one set. */
  retainFlag: boolean;
}

/** A QoS 1/2 PUBLISH sent to the client and not acknowledged. */
export interface InFlight {
  subscription: SubscriptionState;
  seq: number;
  qos: QoS;
  /** QoS 2: PUBREL was sent, PUBCOMP is awaited. */
  released: boolean;
  /** A retained message (not part of the subscription's position). */
  retain: boolean;
  /** What was sent, for a resume of the session (undefined: not kept, over the bound). */
  message: SentMessage | undefined;
}

/** A PUBLISH of the client (or its will) handed to the broker, awaiting PUBLISH_ACK. */
export interface PendingRequest {
  qos: QoS;
  packetId: number;
  /** The will's publish: ends the session once acked. */
  will: boolean;
}

/** A SUBSCRIBE awaiting the broker's answer for each of its filters. */
export interface PendingSuback {
  packetId: number;
  codes: number[];
  waiting: number;
  reasons: string[];
}
