/**
 * MessageBatch: a cursor over the messages of one decoded PUBLISH or DATA frame, reading them in
 * place: no object per message. `next()` moves to the following message and sets the public
 * fields; `payload` is a zero-copy view made on demand, `payloadStart`/`payloadBytes` let a caller
 * copy without even that. The decoder validated every message before handing out the batch, so the
 * cursor does no checks. Valid until the decoder's next push() or next(): copy what you keep
 * (`copy()` makes a batch of its own).
 *
 *   PUBLISH message:  u8 topic bytes | topic | u32 payload bytes | payload
 *   DATA message:     u64 seq | u64 time µs | u8 topic bytes | topic | u32 payload bytes | payload
 *
 * Under the frame flag PROPERTIES (`hasProperties`) every message has `u16 properties bytes |
 * properties` between its topic and its payload length; without it `propertiesBytes` is 0.
 */
import { readU64 } from "./u64.ts";
import type { DataMessage } from "./frames.ts";

/** A cursor over the messages of a PUBLISH or DATA frame. */
export class MessageBatch {
  /** Index of the current message, -1 before the first `next()`. */
  index = -1;
  /** Seq of the current message (DATA only; 0 in PUBLISH). */
  seq = 0;
  /** Publish time in µs of the current message (DATA only; 0 in PUBLISH). */
  timeUs = 0;
  /** Topic of the current message, a validated string shared between messages of equal topic. */
  topic = "";
  /** Offset of the current message's topic bytes in `frame`. */
  topicStart = 0;
  /** Bytes of the current message's topic. */
  topicBytes = 0;
  /** Offset of the current message's payload in `frame`. */
  payloadStart = 0;
  /** Bytes of the current message's payload. */
  payloadBytes = 0;
  /** Offset of the current message's properties in `frame` (their bytes: propertiesBytes). */
  propertiesStart = 0;
  /** Bytes of the current message's properties (0 when it has none or the frame carries none). */
  propertiesBytes = 0;
  /** Offset of the current message, then of the next one. */
  private messageStart: number;
  private offset: number;

  constructor(
    /** The bytes the offsets point into (the frame, or more around it). */
    readonly frame: Uint8Array,
    private readonly view: DataView,
    /** Offset in `frame` of the first message. */
    readonly firstOffset: number,
    /** Offset in `frame` after the last message. */
    readonly endOffset: number,
    /** Messages in the batch. */
    readonly count: number,
    private readonly hasSeq: boolean,
    private readonly topics: readonly string[],
    /** Seq of the first message (DATA; 0 in PUBLISH). */
    readonly firstSeq = 0,
    /** Seq of the last message (DATA; 0 in PUBLISH). */
    readonly lastSeq = 0,
    /** The frame has the flag PROPERTIES: each message carries its properties. */
    readonly hasProperties = false,
  ) {
    this.offset = firstOffset;
    this.messageStart = firstOffset;
  }

  /** Moves to the next message; false once past the last. */
  next(): boolean {
    if (this.index + 1 >= this.count) return false;
    this.index++;
    let at = this.offset;
    this.messageStart = at;
    if (this.hasSeq) {
      this.seq = readU64(this.view, at);
      this.timeUs = readU64(this.view, at + 8);
      at += 16;
    }
    this.topicBytes = this.frame[at];
    this.topicStart = at + 1;
    at += 1 + this.topicBytes;
    if (this.hasProperties) {
      this.propertiesBytes = this.view.getUint16(at, true);
      this.propertiesStart = at + 2;
      at = this.propertiesStart + this.propertiesBytes;
    }
    this.payloadBytes = this.view.getUint32(at, true);
    this.payloadStart = at + 4;
    this.offset = this.payloadStart + this.payloadBytes;
    this.topic = this.topics[this.index];
    return true;
  }

  /** The current message's payload as a zero-copy view. */
  get payload(): Uint8Array {
    return this.frame.subarray(this.payloadStart, this.payloadStart + this.payloadBytes);
  }

  /** The current message's properties as a zero-copy view (empty when none). */
  get properties(): Uint8Array {
    return this.frame.subarray(this.propertiesStart, this.propertiesStart + this.propertiesBytes);
  }

  /** Moves back before the first message. */
  rewind(): void {
    this.index = -1;
    this.offset = this.firstOffset;
    this.messageStart = this.firstOffset;
  }

  /** Messages not yet reached by `next()`. */
  get remaining(): number {
    return this.count - this.index - 1;
  }

  /**
   * A DATA batch of its own over a copy of the messages with seq >= `fromSeq` (one allocation for
   * all their bytes), valid after the decoder moves on; null when every message is older.
   */
  copy(fromSeq = 0): MessageBatch | null {
    if (this.lastSeq < fromSeq) return null;
    let start = this.firstOffset;
    let skip = 0;
    let firstSeq = this.firstSeq;
    if (firstSeq < fromSeq) {
      this.rewind();
      while (this.next() && this.seq < fromSeq) skip++;
      start = this.messageStart;
      firstSeq = this.seq;
    }
    this.rewind();
    const bytes = this.frame.slice(start, this.endOffset);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    return new MessageBatch(
      bytes,
      view,
      0,
      bytes.length,
      this.count - skip,
      this.hasSeq,
      this.topics.slice(skip, this.count),
      firstSeq,
      this.lastSeq,
      this.hasProperties,
    );
  }

  /** All messages as objects with copied payloads (tests, simple clients). Rewinds first. */
  toArray(): DataMessage[] {
    this.rewind();
    const messages: DataMessage[] = [];
    while (this.next()) {
      const message = {
        seq: this.seq,
        timeUs: this.timeUs,
        topic: this.topic,
        payload: this.payload.slice(),
      };
      messages.push(
        this.hasProperties ? { ...message, properties: this.properties.slice() } : message,
      );
    }
    this.rewind();
    return messages;
  }
}
