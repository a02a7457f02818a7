/**
 * FrameDecoder: splits a byte stream into frames, for any split of the stream into chunks (one byte
 * at a time included). Pull-based and I/O-free: `push(chunk)`, then call `next()` until it returns
 * null. A frame that lies whole inside a chunk is parsed in place (zero copy); only a frame that
 * straddles chunks is copied, into a carry buffer that grows with the bytes actually received, so a
 * hostile length field never allocates: it is checked against the frame limit before anything is kept.
 *
 *   chunk:  [ ...frames parsed in place... | head of a frame ] → carry: [ head | rest from next chunk ]
 *
 * Fatal errors (length field above the limit or below the header, unsupported version) stop the
 * decoder: it returns the error once, then null forever, and ignores input. Other errors skip one
 * frame. Invariants: carryBytes > 0 ⇒ the chunk is drained; push() only with the previous chunk drained.
 * A frame, its MessageBatch and payload views are valid until the next push() or next().
 */
import { FRAME_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { FRAME_HEADER_BYTES, HEADER_LENGTH_OFFSET } from "./frame_layout.ts";
import { FrameParser, PARSE_LIMITS_DEFAULT, type ParseLimits } from "./frame_parser.ts";
import type { DecodeError, Frame } from "./frames.ts";
import { TopicCache } from "./topic_cache.ts";

const CARRY_BYTES_INITIAL = 4096;
const EMPTY = new Uint8Array(0);

/** Options of a FrameDecoder: limits (the constants by default) and a topic cache to share. */
export interface FrameDecoderOptions extends Partial<ParseLimits> {
  frameBytesMax?: number;
  topicCache?: TopicCache;
}

/** Splits a byte stream into frames and decode errors. */
export class FrameDecoder {
  private readonly frameBytesMax: number;
  private readonly parser: FrameParser;
  private chunk: Uint8Array = EMPTY;
  private chunkView: DataView = new DataView(EMPTY.buffer);
  private chunkOffset = 0;
  private carry: Uint8Array = EMPTY;
  private carryView: DataView = new DataView(EMPTY.buffer);
  private carryBytes = 0;
  private fatal: DecodeError | null = null;
  private fatalReported = false;

  constructor(options: FrameDecoderOptions = {}) {
    this.frameBytesMax = options.frameBytesMax ?? FRAME_BYTES_MAX;
    assert(this.frameBytesMax >= FRAME_HEADER_BYTES, "frame limit holds a header");
    const limits: ParseLimits = {
      payloadBytesMax: options.payloadBytesMax ?? PARSE_LIMITS_DEFAULT.payloadBytesMax,
      publishBatchMessagesMax:
        options.publishBatchMessagesMax ?? PARSE_LIMITS_DEFAULT.publishBatchMessagesMax,
      filterEntriesMax: options.filterEntriesMax ?? PARSE_LIMITS_DEFAULT.filterEntriesMax,
    };
    this.parser = new FrameParser(limits, options.topicCache ?? new TopicCache({ slots: 256 }));
  }

  /** True once a fatal error was found: the stream can no longer be parsed. */
  get failed(): boolean {
    return this.fatal !== null;
  }

  /** Bytes held for an incomplete frame (the carry buffer's fill). */
  get bufferedBytes(): number {
    return this.carryBytes;
  }

  /** Capacity of the carry buffer: never more than the frame limit. */
  get carryCapacityBytes(): number {
    return this.carry.length;
  }

  /** Hands the decoder the next chunk of the stream. The chunk must stay unchanged until drained. */
  push(chunk: Uint8Array): void {
    if (this.fatal !== null) return;
    assert(this.chunkOffset === this.chunk.length, "push() after next() returned null");
    this.chunk = chunk;
    this.chunkView = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.chunkOffset = 0;
  }

  /** The next frame or decode error, or null when more bytes are needed. */
  next(): Frame | DecodeError | null {
    if (this.fatal !== null) return this.reportFatal();
    if (this.carryBytes > 0) return this.nextFromCarry();
    const available = this.chunk.length - this.chunkOffset;
    if (available === 0) return null;
    if (available >= FRAME_HEADER_BYTES) {
      const frameBytes = this.chunkView.getUint32(this.chunkOffset + HEADER_LENGTH_OFFSET, true);
      const lengthError = this.checkLength(frameBytes);
      if (lengthError !== null) return lengthError;
      if (available >= frameBytes) {
        const start = this.chunkOffset;
        this.chunkOffset += frameBytes;
        return this.parsed(this.parser.parse(this.chunk, this.chunkView, start, frameBytes));
      }
    }
    this.take(available);
    return null;
  }

  private nextFromCarry(): Frame | DecodeError | null {
    if (this.carryBytes < FRAME_HEADER_BYTES) {
      this.take(
        Math.min(FRAME_HEADER_BYTES - this.carryBytes, this.chunk.length - this.chunkOffset),
      );
      if (this.carryBytes < FRAME_HEADER_BYTES) return null;
    }
    const frameBytes = this.carryView.getUint32(HEADER_LENGTH_OFFSET, true);
    const lengthError = this.checkLength(frameBytes);
    if (lengthError !== null) return lengthError;
    this.take(Math.min(frameBytes - this.carryBytes, this.chunk.length - this.chunkOffset));
    if (this.carryBytes < frameBytes) return null;
    this.carryBytes = 0;
    return this.parsed(this.parser.parse(this.carry, this.carryView, 0, frameBytes));
  }

  /** Moves `bytes` from the chunk to the carry buffer, growing it with what arrives. */
  private take(bytes: number): void {
    const needed = this.carryBytes + bytes;
    if (needed > this.carry.length) {
      // needed ≤ a checked frame length (or a header), so capacity never passes the frame limit.
      const capacity = Math.min(
        Math.max(needed, this.carry.length * 2, CARRY_BYTES_INITIAL),
        Math.max(this.frameBytesMax, needed),
      );
      const grown = new Uint8Array(capacity);
      grown.set(this.carry.subarray(0, this.carryBytes));
      this.carry = grown;
      this.carryView = new DataView(grown.buffer);
    }
    this.carry.set(
      this.chunk.subarray(this.chunkOffset, this.chunkOffset + bytes),
      this.carryBytes,
    );
    this.carryBytes += bytes;
    this.chunkOffset += bytes;
  }

  private checkLength(frameBytes: number): DecodeError | null {
    if (frameBytes >= FRAME_HEADER_BYTES && frameBytes <= this.frameBytesMax) return null;
    const reason =
      frameBytes < FRAME_HEADER_BYTES
        ? `frame length ${frameBytes} is smaller than the ${FRAME_HEADER_BYTES}-byte header`
        : `frame length ${frameBytes} exceeds the limit of ${this.frameBytesMax} bytes`;
    this.fatal = {
      kind: "decode_error",
      code:
        frameBytes < FRAME_HEADER_BYTES ? "ARIA_ERR_MALFORMED_FRAME" : "ARIA_ERR_FRAME_TOO_LARGE",
      fatal: true,
      frameKind: null,
      relatedKind: "none",
      relatedId: 0,
      reason,
    };
    return this.reportFatal();
  }

  private parsed(result: Frame | DecodeError): Frame | DecodeError | null {
    if (result.kind === "decode_error" && result.fatal) {
      this.fatal = result;
      return this.reportFatal();
    }
    return result;
  }

  private reportFatal(): DecodeError | null {
    this.chunk = EMPTY;
    this.chunkOffset = 0;
    this.carryBytes = 0;
    if (this.fatalReported) return null;
    this.fatalReported = true;
    return this.fatal;
  }
}
