/**
 * Session: one client connection inside the broker — its decoder, its frame writer, its bounded
 * send queue and its subscriptions. Frames are built in the writer during an event and handed to
 * the connection by flush(), at the end of the event and whenever CONNECTION_WRITE_BYTES are
 * built; what the socket does not take is copied to the queue and written on drain, in order.
 * The queue is made of fixed chunks from a pool the broker's sessions share: a slow client's
 * backlog allocates nothing per flush, and a session that is not backed up holds no queue memory.
 *
 *   events ─▶ writer (≤ CONNECTION_WRITE_BYTES + a frame) ─flush─▶ connection.write ─▶ kernel
 *                                                         └─ rest ─▶ queue ─drain─▶ write
 *
 * The kernel's socket buffer is the one large buffer a connection has: the session holds at most
 * queueBytesMax (plus one message) beyond it, then its subscriptions stop and keep a position
 * (catch_up.ts), and its writer shrinks back, so a client that stopped reading costs a few
 * chunks, not a copy of the stream.
 *
 * Whether its client reads shows only over time: a socket that is never read still takes the
 * kernel's buffers' worth (~4 MB on loopback) first. A session shows it reads once the connection
 * drained a backlog, or took more than any socket's buffers hold (READING_SHOWN_BYTES); catch-up
 * serves those first (catch_up.ts).
 *
 * A session holds its subscriptions by id but does not look into them (`Sub` is the broker's
 * Subscription): it knows frames and bytes, not where a subscription stands.
 *
 * Invariants: queuedBytes === sum of queue chunk lengths; bytes reach the connection in the order
 * frames were written; at most one DATA frame is open, for `openDataSubscription`.
 */
import type { User } from "../auth/mod.ts";
import {
  CONNECTION_BUFFERED_BYTES_MAX,
  CONNECTION_WRITE_BYTES,
  READING_SHOWN_BYTES,
} from "../constants.ts";
import { FrameDecoder, FrameWriter, type InputBudget, type TopicCache } from "../protocol/mod.ts";
import { dataFrameFull, type SharedFrames } from "./data_frame.ts";
import type { Connection } from "./ports.ts";

/**
 * Bytes of one send-queue chunk: small beside the queue's limit, so a stalled queue holds little
 * past it (with 64 KiB chunks a stalled session held 208 KiB, 160 KiB with 16 KiB).
 */
export const QUEUE_CHUNK_BYTES = 16 * 1024;
/** First capacity of a session's writer, and what a backed-up session keeps. */
const WRITER_BYTES_INITIAL = 16 * 1024;

/** Free send-queue chunks shared by the sessions of one broker (keeps at most `keepChunks`: 4 MiB). */
export class QueueChunkPool {
  private readonly free: Uint8Array[] = [];
  constructor(private readonly keepChunks: number = 256) {}

  take(): Uint8Array {
    return this.free.pop() ?? new Uint8Array(QUEUE_CHUNK_BYTES);
  }

  give(chunk: Uint8Array): void {
    if (this.free.length < this.keepChunks) this.free.push(chunk);
  }
}

type QueueChunk = { bytes: Uint8Array; start: number; end: number };

/** One connected client; `Sub` is what it holds per subscription id. */
export class Session<Sub = unknown> {
  readonly decoder: FrameDecoder;
  readonly writer = new FrameWriter({ capacityBytes: WRITER_BYTES_INITIAL });
  readonly subscriptions = new Map<number, Sub>();
  handshaken = false;
  closing = false;
  /** When the connection opened (µs, broker clock): HELLO must come within HANDSHAKE_TIMEOUT_US. */
  openedUs = 0;
  /** When Broker.expire first saw it closing (µs), or -1: it is closed CLOSING_LINGER_US after. */
  closingSeenUs = -1;
  /** Since when (µs) the decoder holds part of a frame, or -1: FRAME_INCOMPLETE_DEADLINE_US. */
  partialFrameSinceUs = -1;
  closed = false;
  clientName = "";
  /** The user signed in on this connection (a server with --users), or null. */
  user: User | null = null;
  /** Why the server ends this connection (its fatal error), for the log; null: it has not said. */
  closeReason: string | null = null;
  private readonly queue: QueueChunk[] = [];
  private queueHead = 0;
  queuedBytes = 0;
  /** Subscription id of the open DATA frame, or -1. */
  openDataSubscription = -1;
  /** Bytes the connection took (handed to the kernel) since it opened. */
  bytesTaken = 0;
  /** True once the connection drained a backlog: its client read what the kernel held. */
  drainedBacklog = false;
  /** The writer gives back its grown buffer at the next flush (see shrinkWriter). */
  private shrinkWriterPending = false;

  constructor(
    readonly id: number,
    readonly connection: Connection,
    topicCache: TopicCache,
    /** Bytes queued (plus unflushed) at which this session's subscriptions stop. */
    readonly queueBytesMax: number = CONNECTION_BUFFERED_BYTES_MAX,
    private readonly chunks: QueueChunkPool = new QueueChunkPool(),
    inputBudget?: InputBudget,
  ) {
    this.decoder = new FrameDecoder({ topicCache, inputBudget });
  }

  /** Bytes held for the client: queued, plus built in the writer and not yet flushed. */
  get bufferedBytes(): number {
    return this.queuedBytes + this.writer.bytesUsed;
  }

  /**
   * Memory this session holds for its client: its queue's chunks, its writer's buffer and its
   * decoder's carry (what a stalled subscriber costs the server beyond the kernel's buffers).
   */
  get heldBytes(): number {
    let queueBytes = 0;
    for (let i = this.queueHead; i < this.queue.length; i++)
      queueBytes += this.queue[i].bytes.length;
    return queueBytes + this.writer.capacity + this.decoder.carryCapacityBytes;
  }

  /** True when this session's subscriptions must wait for the client to read. */
  get backedUp(): boolean {
    return this.bufferedBytes >= this.queueBytesMax;
  }

  /**
   * True when the client has shown it reads: its connection drained a backlog, or took more than
   * a socket's buffers hold. Until then its subscriptions wait behind those that have.
   */
  get showsReading(): boolean {
    return this.drainedBacklog || this.bytesTaken >= READING_SHOWN_BYTES;
  }

  /** True when the queue drained enough for stopped subscriptions to go on. */
  get drained(): boolean {
    return this.bufferedBytes <= this.queueBytesMax / 2;
  }

  /** Closes the open DATA frame, if any (before any other frame is written). */
  endData(): void {
    if (this.openDataSubscription < 0) return;
    this.writer.endData();
    this.openDataSubscription = -1;
  }

  /**
   * Appends one message to the DATA frame of `subscriptionId`, opening a new frame when another
   * subscription's is open, the frame reached its target size, or the message would not fit.
   * `properties` null: a v1 frame (the subscription did not ask for properties); else a frame
   * with the flag PROPERTIES carrying properties[propertiesStart, + propertiesBytes).
   */
  addData(
    subscriptionId: number,
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
    const writer = this.writer;
    const withProperties = properties !== null;
    const sizedProperties = withProperties ? propertiesBytes : 0;
    if (
      this.openDataSubscription !== subscriptionId ||
      writer.withProperties !== withProperties ||
      dataFrameFull(writer, topic.length, length, sizedProperties)
    ) {
      this.endData();
      if (writer.bytesUsed >= CONNECTION_WRITE_BYTES) this.flush();
      writer.beginData(subscriptionId, withProperties);
      this.openDataSubscription = subscriptionId;
    }
    writer.addDataMessage(
      seq,
      timeUs,
      topic,
      source,
      start,
      length,
      properties ?? source,
      propertiesStart,
      sizedProperties,
    );
  }

  /**
   * Copies the frames of `shared` for subscription `subscriptionId`, in order, while each leaves
   * the session below its limit (so a shared frame never takes it further past the limit than
   * one message would); returns how many it copied.
   */
  addSharedFrames(subscriptionId: number, shared: SharedFrames): number {
    this.endData();
    for (let i = 0; i < shared.frameCount; i++) {
      const frame = shared.frame(i);
      if (this.bufferedBytes + frame.length >= this.queueBytesMax) return i;
      this.writer.copyDataFrame(frame, subscriptionId);
      if (this.writer.bytesUsed >= CONNECTION_WRITE_BYTES) this.flush();
    }
    return shared.frameCount;
  }

  /**
   * The writer gives its grown buffer back once what it holds is flushed: for a session whose
   * subscriptions wait for a turn, holding only their positions (catch_up.ts).
   */
  shrinkWriter(): void {
    this.shrinkWriterPending = true;
    if (this.writer.bytesUsed === 0) this.flush();
  }

  /** Hands what the writer holds to the connection; queues what it does not take. */
  flush(): void {
    this.endData();
    const writer = this.writer;
    if (writer.bytesUsed > 0 && !this.closed) {
      const bytes = writer.bytes();
      const written = this.queueHead === this.queue.length ? this.connection.write(bytes) : 0;
      this.bytesTaken += written;
      if (written < bytes.length) this.enqueue(bytes, written);
    }
    // A client that stopped reading keeps a position, not buffers: the writer shrinks back.
    if (this.backedUp || this.shrinkWriterPending) {
      writer.release();
      this.shrinkWriterPending = false;
    } else writer.reset();
  }

  /** Copies bytes[from..] to the end of the queue. */
  private enqueue(bytes: Uint8Array, from: number): void {
    this.queuedBytes += bytes.length - from;
    while (from < bytes.length) {
      let tail = this.queue.length > this.queueHead ? this.queue[this.queue.length - 1] : undefined;
      if (tail === undefined || tail.end === tail.bytes.length) {
        tail = { bytes: this.chunks.take(), start: 0, end: 0 };
        this.queue.push(tail);
      }
      const count = Math.min(bytes.length - from, tail.bytes.length - tail.end);
      tail.bytes.set(bytes.subarray(from, from + count), tail.end);
      tail.end += count;
      from += count;
    }
  }

  /** The socket can take more: writes queued chunks in order; true when the queue emptied. */
  drain(): boolean {
    while (this.queueHead < this.queue.length && !this.closed) {
      const chunk = this.queue[this.queueHead];
      const written = this.connection.write(chunk.bytes.subarray(chunk.start, chunk.end));
      this.queuedBytes -= written;
      this.bytesTaken += written;
      // The kernel took bytes it had refused: the client read some of what it held.
      if (written > 0) this.drainedBacklog = true;
      chunk.start += written;
      if (chunk.start < chunk.end) return false;
      this.chunks.give(chunk.bytes);
      this.queueHead++;
    }
    this.queue.length = 0;
    this.queueHead = 0;
    return true;
  }

  /** Gives the queue's chunks back to the pool and the decoder's carry to the input budget (closed). */
  release(): void {
    this.decoder.release();
    for (let i = this.queueHead; i < this.queue.length; i++) this.chunks.give(this.queue[i].bytes);
    this.queue.length = 0;
    this.queueHead = 0;
    this.queuedBytes = 0;
  }
}
