/**
 * Ports: the small interfaces the broker is handed instead of touching the world. The runtime
 * implements them with sockets, files and timers; tests and the simulator with in-memory fakes.
 * Each lists only the methods the broker calls.
 */
import type { Filter } from "../topic/filter.ts";

/** Wall-clock time in µs since the epoch. */
export interface Clock {
  nowUs(): number;
}

/** Runs a task after the current event, letting I/O events in between (setImmediate-like). */
export interface Scheduler {
  soon(task: () => void): void;
}

/** One client connection, as the broker sees it. */
export interface Connection {
  /** Writes what the socket accepts now; returns how many bytes it took (the broker queues the rest). */
  write(bytes: Uint8Array): number;
  /** Closes the connection (after what was written). */
  close(): void;
  /** Stops reading from the connection, so TCP back-pressure reaches the peer (optional). */
  pause?(): void;
  /** Starts reading again after `pause`. */
  resume?(): void;
  /**
   * The subject of the certificate the peer presented over mutual TLS (`aria serve
   * --tls-client-ca`), e.g. "CN=alice,O=Example" (docs/security.md gives the form); undefined on
   * a connection without one. Set once the TLS handshake completed, before the peer's first byte.
   */
  readonly peerSubject?: string;
  /** The peer's address (IP), for throttling failed sign-ins per source; undefined: unknown. */
  readonly remoteAddress?: string;
  /**
   * The front door that opened it: "mqtt" for the MQTT door's sessions, which alone may use the
   * durable consumer names it makes (`mqtt/…`, `$share/…`); undefined: a native client.
   */
  readonly door?: "mqtt";
  /**
   * Set only on an in-process link the server opens itself for a client it signed in before, whose
   * connection is gone (an MQTT will published after a restart): it signs in as this user name
   * without a credential (`""`: by its `peerSubject`, or as the user-less server's client). Never
   * set for a socket.
   */
  readonly signedInBefore?: string;
}

/** The events of accepted TCP connections, as the broker takes them (Broker fits). */
export interface ConnectionEvents {
  /** A connection was accepted; returns the id its later events carry. */
  open(connection: Connection): number;
  receive(sessionId: number, bytes: Uint8Array): void;
  /** The connection takes writes again after a partial one. */
  writable(sessionId: number): void;
  /** The connection is gone (peer closed, error, or after our close); reported once. */
  closed(sessionId: number): void;
}

/** A message read back from storage. */
export interface StoredMessageLike {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
  /** Set by borrowing reads: the topic's bytes, shared by its messages (not to be changed). */
  topicUtf8?: Uint8Array;
  /** Set by borrowing reads: the payload is source[start, start + length), no view needed. */
  source?: Uint8Array;
  start?: number;
  length?: number;
  /** The message's properties (absent or empty: none). */
  properties?: Uint8Array;
}

/** What the broker needs of durable storage (src/store's Store fits). */
export interface BrokerStore {
  readonly nextSeq: number;
  /** The last seq durable under the fsync policy. */
  readonly committedSeq: number;
  /** The newest publish time stored (0 when empty): publish times go on from it after a restart. */
  readonly newestTimeUs: number;
  /**
   * Every seq below this is gone (retention removed it): topics with no newer record may give
   * their ids back (topic_table.ts). Absent: the store does not say, and no id is reclaimed.
   */
  readonly firstSeqHeld?: number;
  /**
   * Makes an empty store begin at `seq`, durably (Store.beginAt: a replica starting at its
   * leader's oldest held seq). Absent: the store cannot, and a replica needs seq 1.
   */
  beginAt?(seq: number): Promise<void>;
  /**
   * Buffers a message whose payload is payload[start, start + length) (a range of a PUBLISH frame)
   * and whose properties are properties[propertiesStart, + propertiesBytes) (0 bytes: none).
   * `topicId` and `partitionId` are the topic's ids in the broker's TopicTable: the store finds
   * its entry for the topic by them instead of by the name (an id reused later is fine).
   */
  append(
    seq: number,
    timeUs: number,
    topic: string,
    payload: Uint8Array,
    start: number,
    length: number,
    properties?: Uint8Array,
    propertiesStart?: number,
    propertiesBytes?: number,
    topicId?: number,
    partitionId?: number,
  ): void;
  /** Resolves once everything appended so far is durable (group commit). */
  commit(): Promise<void>;
  /**
   * True while storage cannot write for now (a full disk) and retries by itself: an append then
   * throws, and the publish is refused without the failure being sticky. Absent: never.
   */
  readonly retrying?: boolean;
  /**
   * Why an append would be refused now (storage failed or closed, or stalled past its backlog
   * bound), or null: a publish checks it before taking seqs, so a batch that starts is appended
   * whole (appends then throw only between events). Absent: appends say so by throwing.
   */
  readonly refusal?: Error | null;
  /** True while storage is behind on its background work: publishers should wait (see whenCaughtUp). */
  readonly backlogged: boolean;
  /** Resolves once storage is no longer backlogged. */
  whenCaughtUp(): Promise<void>;
  /**
   * Reads a filter's committed messages in seq order; an empty batch means caught up. With
   * `borrow`, a batch's payloads may be views valid only until the next `nextBatch()` call;
   * `batchBytesMax` and `bufferBytes` bound a batch and the read-ahead (the store's defaults),
   * `firstBatchBytesMax` the first batch (a first message sooner).
   */
  read(
    filter: Filter,
    from: { seq: number } | { timeUs: number },
    options?: {
      borrow?: boolean;
      batchBytesMax?: number;
      bufferBytes?: number;
      firstBatchBytesMax?: number;
    },
  ): { nextBatch(): Promise<StoredMessageLike[]> };
}

/** A durable consumer as stored: its name, filter and position (consumer_registry.ts). */
export interface ConsumerRecord {
  readonly name: string;
  /** Its filter's entries, normalised. */
  readonly filter: readonly string[];
  /** A shared group's (several members) or a single consumer's. */
  readonly shared: boolean;
  /** The seq after the last acknowledged one: a subscription of it starts here. */
  readonly nextSeq: number;
  /** When it was last subscribed to or acknowledged (µs since the epoch). */
  readonly lastActiveUs: number;
  /**
   * A shared group's finer position (group_cursor.ts): of the seqs in [nextSeq, readSeq) only
   * `unackedSeqs` (ascending, the first is nextSeq) are still to deliver. Absent: all from nextSeq.
   */
  readonly group?: GroupRecord;
  /** The user who created it (a server with --users): only that user may subscribe to it. */
  readonly owner?: string;
}

/** A shared group's unacknowledged seqs below its read position (ConsumerRecord.group). */
export interface GroupRecord {
  readonly readSeq: number;
  readonly unackedSeqs: readonly number[];
}

/**
 * Where durable consumers' positions persist (src/runtime/consumer_file.ts: a file in the data
 * directory, written in batches). Saves may be buffered: after a crash a consumer resumes at the
 * last position written, never after one that was not acknowledged.
 */
export interface ConsumerStore {
  /** The consumers stored when the server started. */
  load(): readonly ConsumerRecord[];
  /** Stores a consumer's record (replacing an older one of its name). */
  save(record: ConsumerRecord): void;
  /** Forgets consumer `name`. */
  remove(name: string): void;
}
