/**
 * Session: one client connection inside the broker — its decoder, its frame writer, its bounded
 * send queue and its subscriptions. Frames are built in the writer during an event and handed to
 * the connection in one write by flush(); what the socket does not take is copied to the queue
 * and written on drain, in order.
 *
 *   events ─▶ writer (frames of this event) ─flush─▶ connection.write ─▶ kernel
 *                                              └─ rest ─▶ queue ─drain─▶ connection.write
 *
 * Invariants: queuedBytes === sum of queue chunk lengths; bytes reach the connection in the order
 * frames were written; at most one DATA frame is open, for `openDataSubscription`.
 */
import { CONNECTION_BUFFERED_BYTES_MAX } from "../constants.ts";
import { FrameDecoder, FrameWriter, type TopicCache } from "../protocol/mod.ts";
import type { Connection } from "./ports.ts";
import type { Subscription } from "./subscription.ts";

/** A DATA frame is closed once it holds this many bytes, so delivery is not held back by batching. */
export const DATA_FRAME_BYTES_TARGET = 64 * 1024;

/** One connected client. */
export class Session {
  readonly decoder: FrameDecoder;
  readonly writer = new FrameWriter({ capacityBytes: 64 * 1024 });
  readonly subscriptions = new Map<number, Subscription>();
  handshaken = false;
  closing = false;
  closed = false;
  clientName = "";
  private readonly queue: Uint8Array[] = [];
  private queueHead = 0;
  queuedBytes = 0;
  /** Subscription id of the open DATA frame, or -1. */
  openDataSubscription = -1;

  constructor(
    readonly id: number,
    readonly connection: Connection,
    topicCache: TopicCache,
    /** Bytes queued (plus unflushed) at which this session's cursors stop. */
    readonly queueBytesMax: number = CONNECTION_BUFFERED_BYTES_MAX,
  ) {
    this.decoder = new FrameDecoder({ topicCache });
  }

  /** True when this session's cursors must wait for the client to read. */
  get backedUp(): boolean {
    return this.queuedBytes + this.writer.bytesUsed >= this.queueBytesMax;
  }

  /** True when the queue drained enough for stopped cursors to go on. */
  get drained(): boolean {
    return this.queuedBytes + this.writer.bytesUsed <= this.queueBytesMax / 2;
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
   */
  addData(subscriptionId: number, seq: number, timeUs: number, topic: Uint8Array, source: Uint8Array, start: number, length: number): void {
    const writer = this.writer;
    if (this.openDataSubscription !== subscriptionId || writer.frameBytes >= DATA_FRAME_BYTES_TARGET || !writer.dataMessageFits(topic.length, length)) {
      this.endData();
      writer.beginData(subscriptionId);
      this.openDataSubscription = subscriptionId;
    }
    writer.addDataMessage(seq, timeUs, topic, source, start, length);
  }

  /** Hands what the writer holds to the connection; queues what it does not take. */
  flush(): void {
    this.endData();
    const writer = this.writer;
    if (writer.bytesUsed === 0 || this.closed) {
      writer.reset();
      return;
    }
    const bytes = writer.bytes();
    const written = this.queueHead === this.queue.length ? this.connection.write(bytes) : 0;
    if (written < bytes.length) {
      this.queue.push(bytes.slice(written));
      this.queuedBytes += bytes.length - written;
    }
    writer.reset();
  }

  /** The socket can take more: writes queued chunks in order. Returns true when the queue emptied. */
  drain(): boolean {
    while (this.queueHead < this.queue.length && !this.closed) {
      const chunk = this.queue[this.queueHead];
      const written = this.connection.write(chunk);
      this.queuedBytes -= written;
      if (written < chunk.length) {
        this.queue[this.queueHead] = chunk.subarray(written);
        return false;
      }
      this.queue[this.queueHead++] = EMPTY;
    }
    this.queue.length = 0;
    this.queueHead = 0;
    return true;
  }
}

const EMPTY = new Uint8Array(0);
