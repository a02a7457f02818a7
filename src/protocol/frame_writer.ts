/**
 * FrameWriter: appends frames to one growable buffer (a connection's send buffer, or a scratch
 * one). Low-level: `begin(kind)`, field writers, `end()` patches the length; frame_encode.ts builds
 * every frame kind on top. Streaming: `beginData` / `addDataMessage` / `endData` (and the PUBLISH
 * twin) append messages one at a time straight from the caller's storage, with no allocation per
 * message; `dataMessageFits` says whether one more message keeps the frame within the limit.
 * A DATA or PUBLISH frame opened `withProperties` has the flag PROPERTIES, and each of its messages
 * carries `u16 properties bytes, properties` after its topic (0 bytes when it has none).
 * Invariants: at most one frame is open; `used` bytes are complete frames, plus the open frame;
 * a closed frame never exceeds `frameBytesMax` (asserted: callers check limits before writing).
 */
import { FRAME_BYTES_MAX, PROPERTIES_BYTES_MAX, TOPIC_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { copyBytes } from "../stdx/bytes.ts";
import {
  DATA_MESSAGE_HEAD_BYTES,
  FRAME_FLAG_PROPERTIES,
  FRAME_HEADER_BYTES,
  FRAME_TYPES,
  type FrameKind,
  PROPERTIES_HEAD_BYTES,
  PUBLISH_MESSAGE_HEAD_BYTES,
  U32_MAX,
} from "./frame_layout.ts";
import { writeU64 } from "./u64.ts";

const CAPACITY_DEFAULT = 64 * 1024;
/** A buffer grown past this goes back to its first size at the next reset. */
const KEPT_CAPACITY_BYTES_MAX = 256 * 1024;
const utf8 = new TextEncoder();

/** Appends encoded frames to a growable buffer. */
export class FrameWriter {
  /** Largest frame this writer closes. */
  readonly frameBytesMax: number;
  private buffer: Uint8Array;
  private view: DataView;
  private used = 0;
  private frameStart = -1;
  private frameKind: FrameKind | null = null;
  private countOffset = 0;
  private messageCount = 0;
  /** Bytes each message of the open DATA or PUBLISH frame adds for its properties' length. */
  private propertiesHeadBytes = 0;

  private readonly capacityBytes: number;

  constructor(options: { capacityBytes?: number; frameBytesMax?: number } = {}) {
    this.frameBytesMax = options.frameBytesMax ?? FRAME_BYTES_MAX;
    this.capacityBytes = options.capacityBytes ?? CAPACITY_DEFAULT;
    this.buffer = new Uint8Array(this.capacityBytes);
    this.view = new DataView(this.buffer.buffer);
  }

  /** Bytes written (complete frames, plus the open frame if any). */
  get bytesUsed(): number {
    return this.used;
  }

  /** Bytes the buffer holds room for now. */
  get capacity(): number {
    return this.buffer.length;
  }

  /** Bytes of the open frame so far, header included; 0 when none is open. */
  get frameBytes(): number {
    return this.frameStart < 0 ? 0 : this.used - this.frameStart;
  }

  /** A view of the complete frames written since the last reset (valid until the next write). */
  bytes(): Uint8Array {
    assert(this.frameStart < 0, "bytes() with no frame open");
    return this.buffer.subarray(0, this.used);
  }

  /**
   * Forgets everything written; keeps the buffer, unless a burst grew it past
   * KEPT_CAPACITY_BYTES_MAX and what this reset forgets is small (the bursts are over): then it
   * goes back to its first size. A session's writer held the 4–8 MiB one large commit's fan-out
   * grew it to for as long as the connection lived; one that keeps writing bursts keeps its buffer.
   */
  reset(): void {
    if (
      this.buffer.length > KEPT_CAPACITY_BYTES_MAX &&
      this.buffer.length > this.capacityBytes &&
      this.used <= KEPT_CAPACITY_BYTES_MAX / 4
    ) {
      this.buffer = new Uint8Array(this.capacityBytes);
      this.view = new DataView(this.buffer.buffer);
    }
    this.used = 0;
    this.frameStart = -1;
    this.frameKind = null;
  }

  /**
   * Forgets everything written and goes back to its first capacity: a session whose client
   * stopped reading keeps no buffer sized for the bursts it can no longer take.
   */
  release(): void {
    this.reset();
    if (this.buffer.length > this.capacityBytes) {
      this.buffer = new Uint8Array(this.capacityBytes);
      this.view = new DataView(this.buffer.buffer);
    }
  }

  /** Drops the first `byteCount` bytes (sent by the caller) and moves the rest to the front. */
  consume(byteCount: number): void {
    assert(this.frameStart < 0, "consume() with no frame open");
    assert(byteCount >= 0 && byteCount <= this.used, "consume() within the bytes written");
    this.buffer.copyWithin(0, byteCount, this.used);
    this.used -= byteCount;
  }

  /** Opens a frame of `kind`: writes the header with a length patched by `end()`. */
  begin(kind: FrameKind): void {
    assert(this.frameStart < 0, "begin() with no frame open");
    this.reserve(FRAME_HEADER_BYTES);
    this.frameStart = this.used;
    this.frameKind = kind;
    this.view.setUint32(this.used, 0, true);
    this.buffer[this.used + 4] = FRAME_TYPES[kind];
    this.buffer[this.used + 5] = 0;
    this.view.setUint16(this.used + 6, 0, true);
    this.used += FRAME_HEADER_BYTES;
  }

  /** Closes the open frame: patches its length. */
  end(): void {
    assert(this.frameStart >= 0, "end() with a frame open");
    const frameBytes = this.used - this.frameStart;
    assert(frameBytes <= this.frameBytesMax, "frame within the frame limit");
    this.view.setUint32(this.frameStart, frameBytes, true);
    this.frameStart = -1;
    this.frameKind = null;
  }

  /** Appends a u8. */
  u8(value: number): void {
    assert(value >>> 0 === value && value <= 0xff, "u8 field in range");
    this.reserve(1);
    this.buffer[this.used++] = value;
  }

  /** Appends a little-endian u16. */
  u16(value: number): void {
    assert(value >>> 0 === value && value <= 0xffff, "u16 field in range");
    this.reserve(2);
    this.view.setUint16(this.used, value, true);
    this.used += 2;
  }

  /** Appends a little-endian u32. */
  u32(value: number): void {
    assert(value >>> 0 === value, "u32 field in range");
    this.reserve(4);
    this.view.setUint32(this.used, value, true);
    this.used += 4;
  }

  /** Appends a little-endian u64 (a safe integer). */
  u64(value: number): void {
    this.reserve(8);
    writeU64(this.view, this.used, value);
    this.used += 8;
  }

  /** Appends `length` bytes of `source` from `start`. */
  raw(source: Uint8Array, start = 0, length = source.length - start): void {
    assert(
      start >= 0 && length >= 0 && start + length <= source.length,
      "raw() range within source",
    );
    this.reserve(length);
    copyBytes(this.buffer, this.used, source, start, length);
    this.used += length;
  }

  /**
   * Appends `text` as UTF-8 behind a length field of `lengthBytes` (1 or 2). Text longer than
   * `bytesMax` asserts, or with `truncate` is cut at a character boundary.
   */
  string(
    text: string,
    options: { lengthBytes: 1 | 2; bytesMax: number; truncate?: boolean },
  ): void {
    assert(options.bytesMax < 256 ** options.lengthBytes, "string limit fits its length field");
    const lengthAt = this.used;
    this.reserve(options.lengthBytes + text.length * 3);
    const textAt = lengthAt + options.lengthBytes;
    let written = asciiInto(this.buffer, textAt, text);
    if (written < 0) written = utf8.encodeInto(text, this.buffer.subarray(textAt)).written;
    if (written > options.bytesMax) {
      assert(options.truncate === true, "string field within its limit");
      written = options.bytesMax;
      while (written > 0 && (this.buffer[textAt + written] & 0xc0) === 0x80) written--;
    }
    if (options.lengthBytes === 1) this.buffer[lengthAt] = written;
    else this.view.setUint16(lengthAt, written, true);
    this.used = textAt + written;
  }

  /**
   * Opens a DATA frame for subscription `subscriptionId` (`withProperties`: flag PROPERTIES, each
   * message carries its properties); add messages, then `endData()`.
   */
  beginData(subscriptionId: number, withProperties = false): void {
    this.beginBatch("data", subscriptionId, withProperties);
  }

  /** True when the open DATA or PUBLISH frame has the flag PROPERTIES. */
  get withProperties(): boolean {
    return this.propertiesHeadBytes !== 0;
  }

  /**
   * True when a message of these sizes fits in the open DATA frame within the frame limit
   * (`propertiesBytes` count only in a frame with the flag PROPERTIES).
   */
  dataMessageFits(topicBytes: number, payloadBytes: number, propertiesBytes = 0): boolean {
    const properties = this.propertiesHeadBytes === 0 ? 0 : PROPERTIES_HEAD_BYTES + propertiesBytes;
    return (
      this.frameBytes + DATA_MESSAGE_HEAD_BYTES + topicBytes + properties + payloadBytes <=
      this.frameBytesMax
    );
  }

  /**
   * Appends one message to the open DATA frame. `topic` is the topic's UTF-8 (cached by the caller);
   * the payload is `payload[payloadStart, payloadStart + payloadBytes)`, so a ring can pass its
   * backing array. Positional arguments, not an options object: this runs once per message.
   * The properties are properties[propertiesStart, + propertiesBytes), written only in a frame
   * with the flag PROPERTIES (dropped in a v1 frame).
   */
  addDataMessage(
    seq: number,
    timeUs: number,
    topic: Uint8Array,
    payload: Uint8Array,
    payloadStart = 0,
    payloadBytes = payload.length - payloadStart,
    properties: Uint8Array = payload,
    propertiesStart = 0,
    propertiesBytes = 0,
  ): void {
    assert(this.frameKind === "data", "addDataMessage() with a DATA frame open");
    assert(
      this.dataMessageFits(topic.length, payloadBytes, propertiesBytes),
      "DATA message fits the frame",
    );
    this.reserve(
      DATA_MESSAGE_HEAD_BYTES +
        topic.length +
        this.propertiesHeadBytes +
        propertiesBytes +
        payloadBytes,
    );
    // Reserved above for the whole message: written without a capacity check per field.
    writeU64(this.view, this.used, seq);
    writeU64(this.view, this.used + 8, timeUs);
    this.used += 16;
    this.addTopicAndPayload(
      topic,
      payload,
      payloadStart,
      payloadBytes,
      properties,
      propertiesStart,
      propertiesBytes,
    );
  }

  /**
   * Appends a copy of one whole DATA frame, encoded elsewhere, with its subscription id set to
   * `subscriptionId`: fan-out encodes a filter's messages once and copies the frames to each
   * subscription with that filter.
   */
  copyDataFrame(frame: Uint8Array, subscriptionId: number): void {
    assert(this.frameStart < 0, "copyDataFrame() with no frame open");
    assert(
      frame.length > FRAME_HEADER_BYTES + 8 && frame[4] === FRAME_TYPES.data,
      "copyDataFrame() of a DATA frame",
    );
    assert(
      (frame[0] | (frame[1] << 8) | (frame[2] << 16) | (frame[3] << 24)) >>> 0 === frame.length,
      "copyDataFrame() of one whole frame",
    );
    assert(subscriptionId >>> 0 === subscriptionId, "u32 field in range");
    assert((frame[5] & ~FRAME_FLAG_PROPERTIES) === 0, "copyDataFrame() of a DATA frame's flags");
    const at = this.used;
    this.raw(frame);
    this.view.setUint32(at + FRAME_HEADER_BYTES, subscriptionId, true);
  }

  /** Closes the open DATA frame; returns its message count. A frame with no message is dropped. */
  endData(): number {
    assert(this.frameKind === "data", "endData() with a DATA frame open");
    return this.endBatch();
  }

  /**
   * Opens a PUBLISH frame for request `requestId` (`withProperties`: flag PROPERTIES); add
   * messages, then `endPublish()`.
   */
  beginPublish(requestId: number, withProperties = false): void {
    this.beginBatch("publish", requestId, withProperties);
  }

  /** True when a message of these sizes fits in the open PUBLISH frame within the frame limit. */
  publishMessageFits(topicBytes: number, payloadBytes: number, propertiesBytes = 0): boolean {
    const properties = this.propertiesHeadBytes === 0 ? 0 : PROPERTIES_HEAD_BYTES + propertiesBytes;
    return (
      this.frameBytes + PUBLISH_MESSAGE_HEAD_BYTES + topicBytes + properties + payloadBytes <=
      this.frameBytesMax
    );
  }

  /** Appends one message (topic as UTF-8) to the open PUBLISH frame. */
  addPublishMessage(topic: Uint8Array, payload: Uint8Array, properties?: Uint8Array): void {
    assert(this.frameKind === "publish", "addPublishMessage() with a PUBLISH frame open");
    const propertiesBytes = properties?.length ?? 0;
    assert(
      this.publishMessageFits(topic.length, payload.length, propertiesBytes),
      "PUBLISH message fits the frame",
    );
    this.reserve(
      PUBLISH_MESSAGE_HEAD_BYTES +
        topic.length +
        this.propertiesHeadBytes +
        propertiesBytes +
        payload.length,
    );
    this.addTopicAndPayload(
      topic,
      payload,
      0,
      payload.length,
      properties ?? payload,
      0,
      propertiesBytes,
    );
  }

  /**
   * Appends one message with a string topic to the open PUBLISH frame (no allocation for ASCII);
   * `properties` go only into a frame with the flag PROPERTIES.
   */
  addPublishMessageText(topic: string, payload: Uint8Array, properties?: Uint8Array): void {
    assert(this.frameKind === "publish", "addPublishMessageText() with a PUBLISH frame open");
    this.string(topic, { lengthBytes: 1, bytesMax: TOPIC_BYTES_MAX });
    if (this.propertiesHeadBytes !== 0) {
      const propertiesBytes = properties?.length ?? 0;
      assert(propertiesBytes <= PROPERTIES_BYTES_MAX, "properties within their limit");
      this.u16(propertiesBytes);
      if (properties !== undefined) this.raw(properties);
    }
    this.u32(payload.length);
    this.raw(payload);
    this.messageCount++;
    assert(this.frameBytes <= this.frameBytesMax, "PUBLISH message fits the frame");
  }

  /** Closes the open PUBLISH frame; returns its message count. A frame with no message is dropped. */
  endPublish(): number {
    assert(this.frameKind === "publish", "endPublish() with a PUBLISH frame open");
    return this.endBatch();
  }

  private beginBatch(kind: "data" | "publish", id: number, withProperties: boolean): void {
    this.begin(kind);
    if (withProperties) this.buffer[this.frameStart + 5] = FRAME_FLAG_PROPERTIES;
    this.propertiesHeadBytes = withProperties ? PROPERTIES_HEAD_BYTES : 0;
    this.u32(id);
    this.countOffset = this.used;
    this.u32(0);
    this.messageCount = 0;
  }

  private endBatch(): number {
    const count = this.messageCount;
    if (count === 0) {
      this.used = this.frameStart;
      this.frameStart = -1;
      this.frameKind = null;
      return 0;
    }
    this.view.setUint32(this.countOffset, count, true);
    this.end();
    return count;
  }

  /** The rest of a message after its head; the caller reserved room for all of it. */
  private addTopicAndPayload(
    topic: Uint8Array,
    payload: Uint8Array,
    payloadStart: number,
    payloadBytes: number,
    properties: Uint8Array,
    propertiesStart: number,
    propertiesBytes: number,
  ): void {
    assert(topic.length <= 0xff, "topic length fits a u8");
    assert(
      payloadStart >= 0 && payloadBytes >= 0 && payloadStart + payloadBytes <= payload.length,
      "payload range within its source",
    );
    const buffer = this.buffer;
    let used = this.used;
    buffer[used++] = topic.length;
    copyBytes(buffer, used, topic, 0, topic.length);
    used += topic.length;
    this.used = used;
    if (this.propertiesHeadBytes !== 0) {
      assert(propertiesBytes <= PROPERTIES_BYTES_MAX, "properties within their limit");
      this.u16(propertiesBytes);
      this.raw(properties, propertiesStart, propertiesBytes);
      used = this.used;
    }
    this.view.setUint32(used, payloadBytes, true);
    used += 4;
    copyBytes(buffer, used, payload, payloadStart, payloadBytes);
    this.used = used + payloadBytes;
    this.messageCount++;
    assert(this.messageCount <= U32_MAX, "message count fits a u32");
  }

  private reserve(bytes: number): void {
    const needed = this.used + bytes;
    if (needed <= this.buffer.length) return;
    let capacity = Math.max(this.buffer.length * 2, 64);
    while (capacity < needed) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.buffer.subarray(0, this.used));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
  }
}

/** Writes `text` as ASCII at `at`; returns the bytes written, or -1 (nothing usable) if it is not ASCII. */
function asciiInto(buffer: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0x7f) return -1;
    buffer[at + i] = code;
  }
  return text.length;
}
