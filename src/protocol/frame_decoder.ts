/**
 * FrameDecoder: splits a byte stream into frames, for any split of the stream into chunks (one byte
 * at a time included). Pull-based and I/O-free: `push(chunk)`, then call `next()` until it returns
 * null. A frame that lies whole inside a chunk is parsed in place (zero copy); only a frame that
 * straddles chunks is copied, into a carry buffer that grows with the bytes actually received, so a
 * hostile length field never allocates: it is checked against the frame limit before anything is kept.
 *
 *   chunk:  [ ...frames parsed in place... | head of a frame ] → carry: [ head | rest from next chunk ]
 *
 * Memory: a carry past INPUT_CARRY_BYTES_UNCOUNTED is taken from an InputBudget shared by the
 * server's decoders (when one is given) and given back when its frame completes or the decoder is
 * released: a frame that would pass the budget is a fatal FRAME_TOO_LARGE, not a buffer.
 *
 * Fatal errors (length field above the limit or below the header, unsupported version) stop the
 * decoder: it returns the error once, then null forever, and ignores input. Other errors skip one
 * frame. Invariants: carryBytes > 0 ⇒ the chunk is drained; push() only with the previous chunk drained.
 * A frame, its MessageBatch and payload views are valid until the next push() or next().
 */
import { FRAME_BYTES_MAX, INPUT_CARRY_BYTES_UNCOUNTED } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { FRAME_HEADER_BYTES, HEADER_LENGTH_OFFSET } from "./frame_layout.ts";
import { FrameParser, PARSE_LIMITS_DEFAULT, type ParseLimits } from "./frame_parser.ts";
import type { DecodeError, Frame } from "./frames.ts";
import { TopicCache } from "./topic_cache.ts";

const CARRY_BYTES_INITIAL = 4096;
const EMPTY = new Uint8Array(0);

/** Bytes of incomplete frames all of a server's decoders may hold (past their uncounted part). */
export class InputBudget {
  /** Bytes taken now. */
  bytesHeld = 0;
  constructor(readonly bytesMax: number) {}

  /** Takes `bytes` when they fit; false when they would pass the budget. */
  take(bytes: number): boolean {
    if (this.bytesHeld + bytes > this.bytesMax) return false;
    this.bytesHeld += bytes;
    return true;
  }

  give(bytes: number): void {
    this.bytesHeld -= bytes;
    assert(this.bytesHeld >= 0, "InputBudget: gives back what was taken");
  }
}

/** Options of a FrameDecoder: limits (the constants by default) and a topic cache to share. */
export interface FrameDecoderOptions extends Partial<ParseLimits> {
  frameBytesMax?: number;
  topicCache?: TopicCache;
  /** The server-wide budget a carry past INPUT_CARRY_BYTES_UNCOUNTED is taken from. */
  inputBudget?: InputBudget;
}

/** The part of a carry of `capacity` bytes that counts against the input budget. */
function countedBytes(capacity: number): number {
  return Math.max(0, capacity - INPUT_CARRY_BYTES_UNCOUNTED);
}

/** Splits a byte stream into frames and decode errors. */
export class FrameDecoder {
  private readonly frameBytesMax: number;
  private readonly parser: FrameParser;
  private readonly inputBudget: InputBudget | null;
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
    this.inputBudget = options.inputBudget ?? null;
  }

  /** Gives the carry (and its part of the input budget) back: the connection is closed. */
  release(): void {
    this.inputBudget?.give(countedBytes(this.carry.length));
    this.carry = EMPTY;
    this.carryView = new DataView(EMPTY.buffer);
    this.carryBytes = 0;
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
    let frameBytes = available;
    if (available >= FRAME_HEADER_BYTES) {
      frameBytes = this.chunkView.getUint32(this.chunkOffset + HEADER_LENGTH_OFFSET, true);
      const lengthError = this.checkLength(frameBytes);
      if (lengthError !== null) return lengthError;
      if (available >= frameBytes) {
        const start = this.chunkOffset;
        this.chunkOffset += frameBytes;
        return this.parsed(this.parser.parse(this.chunk, this.chunkView, start, frameBytes));
      }
    }
    // A header alone is within the uncounted part: only a frame's body can pass the budget.
    if (!this.take(available)) return this.overBudget(frameBytes);
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
    if (!this.take(Math.min(frameBytes - this.carryBytes, this.chunk.length - this.chunkOffset)))
      return this.overBudget(frameBytes);
    if (this.carryBytes < frameBytes) return null;
    this.carryBytes = 0;
    const carry = this.carry;
    const view = this.carryView;
    // A carry grown past the uncounted part goes back to the budget once its frame is whole (the
    // frame parsed below keeps the buffer alive until the caller is done with it).
    if (countedBytes(carry.length) > 0) this.release();
    return this.parsed(this.parser.parse(carry, view, 0, frameBytes));
  }

  /** The fatal error of a frame of `frameBytes` that would pass the input budget. */
  private overBudget(frameBytes: number): DecodeError | null {
    const budget = this.inputBudget as InputBudget;
    this.fatal = {
      kind: "decode_error",
      code: "ARIA_ERR_FRAME_TOO_LARGE",
      fatal: true,
      frameKind: null,
      relatedKind: "none",
      relatedId: 0,
      reason: `a frame of ${frameBytes} bytes does not fit the server's input budget now (${budget.bytesHeld} of ${budget.bytesMax} bytes of incomplete frames held); retry later`,
    };
    return this.reportFatal();
  }

  /**
   * Moves `bytes` from the chunk to the carry buffer, growing it with what arrives; false (nothing
   * moved) when growing it would pass the input budget.
   */
  private take(bytes: number): boolean {
    const needed = this.carryBytes + bytes;
    if (needed > this.carry.length) {
      // needed ≤ a checked frame length (or a header), so capacity never passes the frame limit.
      const capacity = Math.min(
        Math.max(needed, this.carry.length * 2, CARRY_BYTES_INITIAL),
        Math.max(this.frameBytesMax, needed),
      );
      const more = countedBytes(capacity) - countedBytes(this.carry.length);
      if (more > 0 && this.inputBudget !== null && !this.inputBudget.take(more)) return false;
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
    return true;
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
    this.release();
    if (this.fatalReported) return null;
    this.fatalReported = true;
    return this.fatal;
  }
}
