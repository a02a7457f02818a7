/**
 * Ring: the tip of the stream, the newest records in one ArrayBuffer. Appends write at `head`
 * and evict the oldest records from `tail` to make room; the ring always holds the contiguous
 * seqs [firstSeq, nextSeq). Records never straddle the end: a record that does not fit before
 * the end leaves a WRAP marker and starts again at offset 0.
 *
 *   offset 0                                                          capacityBytes
 *   │ rec n+3 │ rec n+4 │ ·free· │ rec n │ rec n+1 │ rec n+2 │ WRAP ·· │
 *                       ▲head    ▲tail
 *
 * Record layout (native endian, RECORD_ALIGN_BYTES aligned; sizes in ring_layout below):
 *   +0  u32 recordBytes (header + body, before padding)      +4  u32 topic id | PROPERTIES_BIT
 *   +8  f64 seq                                              +16 f64 publish time, µs
 *   +24 payload
 *   with PROPERTIES_BIT set, after the payload: properties, then u16 properties bytes (LE), so
 *   the payload always starts at +24 and a record without properties is unchanged
 *
 * Every SEQ_CHECKPOINT_EVERY-th seq records its offset in a small table, so a cursor finds the
 * record of any seq after skipping fewer than SEQ_CHECKPOINT_EVERY headers.
 *
 * Code outside the tip sees the ring as TipRecords: positions (offsets it only passes back),
 * topic ids and sizes, and deliverAt/writeAt, which hand a record's seq, time and payload range
 * to a frame writer. The layout above stays in this file.
 *
 * Invariants: count === nextSeq - firstSeq; bytesUsed <= capacityBytes; tail is the offset of
 * record firstSeq when count > 0. Pure: it owns memory only.
 */
import {
  RECORD_ALIGN_BYTES,
  RECORD_HEADER_BYTES,
  TIP_BYTES_MAX,
  TIP_BYTES_MIN,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { ViewCache, copyBytesViews } from "../stdx/bytes.ts";

/** Word offsets of the header fields (u32 words for the first two, f64 words for the rest). */
export const RECORD_BYTES_U32 = 0;
export const TOPIC_U32 = 1;
/** Bit of the topic word set when the record carries properties (topic ids < TOPICS_MAX = 2^22). */
const PROPERTIES_BIT = 0x8000_0000;
/** Mask of the topic word that leaves the topic id. */
export const TOPIC_ID_MASK = 0x7fff_ffff;
/** Bytes of the properties length at a record's end (with PROPERTIES_BIT). */
const PROPERTIES_TAIL_BYTES = 2;
export const SEQ_F64 = 1;
export const TIME_F64 = 2;
/** A u32 of this value where a record would start means: continue at offset 0. */
const WRAP = 0;
/** Seqs between two checkpoints: a power of two so the slot is a shift and a mask. */
export const SEQ_CHECKPOINT_EVERY = 64;

/** Called with the topic id of each record as it leaves the ring (oldest first). */
export type EvictHook = (topicId: number) => void;

/** Where deliverAt puts a record: a session's DATA frames (the broker's Session fits). */
export interface RecordSink {
  /**
   * Appends one message of `subscriptionId`, its payload source[start, start + length) and, when
   * `properties` is not null (the subscription wants them), its properties
   * properties[propertiesStart, + propertiesBytes).
   */
  addData(
    subscriptionId: number,
    seq: number,
    timeUs: number,
    topic: Uint8Array,
    source: Uint8Array,
    start: number,
    length: number,
    properties: Uint8Array | null,
    propertiesStart: number,
    propertiesBytes: number,
  ): void;
}

/** Where writeAt puts a record: the open DATA frame of a writer (protocol's FrameWriter fits). */
export interface DataMessageWriter {
  /** Appends one message, its payload source[start, start + length), and its properties. */
  addDataMessage(
    seq: number,
    timeUs: number,
    topic: Uint8Array,
    source: Uint8Array,
    start: number,
    length: number,
    properties: Uint8Array,
    propertiesStart: number,
    propertiesBytes: number,
  ): void;
}

/**
 * The records the tip holds, as delivery reads them: a position is a record's offset, to be
 * passed back and never computed with; payloads go to frames as ranges of the ring (zero-copy,
 * nothing allocated per record), so no caller needs the record layout.
 */
export interface TipRecords {
  /** Records held. */
  readonly count: number;
  /** Oldest seq held (equals nextSeq when empty). */
  readonly firstSeq: number;
  /** The seq the next append gets. */
  readonly nextSeq: number;
  /** Position of the record with seq `seq`, which must be held. */
  offsetOfSeq(seq: number): number;
  /** Position of the record after the one at `at`. */
  after(at: number): number;
  /** Topic id of the record at `at`. */
  topicAt(at: number): number;
  /** Payload bytes of the record at `at`. */
  payloadLengthAt(at: number): number;
  /** Properties bytes of the record at `at` (0 when it has none). */
  propertiesLengthAt(at: number): number;
  /** Publish time (µs) of the record at `at`. */
  timeAt(at: number): number;
  /** The payload of the record at `at`, a view valid until the record is evicted. */
  payloadAt(at: number): Uint8Array;
  /** The properties of the record at `at`, a view (empty when none) valid until evicted. */
  propertiesAt(at: number): Uint8Array;
  /**
   * Hands the record at `at` to `sink` as a message of `subscriptionId` under `topic` (UTF-8),
   * with its properties when `withProperties`.
   */
  deliverAt(
    at: number,
    sink: RecordSink,
    subscriptionId: number,
    topic: Uint8Array,
    withProperties: boolean,
  ): void;
  /** Writes the record at `at` into `writer`'s open DATA frame under `topic` (UTF-8). */
  writeAt(at: number, writer: DataMessageWriter, topic: Uint8Array): void;
}

/** The record ring buffer of the tip. */
export class Ring implements TipRecords {
  readonly capacityBytes: number;
  readonly bytes: Uint8Array;
  readonly u32: Uint32Array;
  readonly f64: Float64Array;
  private readonly view: DataView;
  /** A DataView of the arrays payloads are copied from (one per PUBLISH frame, not per message). */
  private readonly sources = new ViewCache();
  /** Offset where the next record goes (may equal capacityBytes: the next append wraps). */
  head = 0;
  /** Offset of the oldest record. */
  tail = 0;
  count = 0;
  bytesUsed = 0;
  firstSeq = 1;
  nextSeq = 1;
  private readonly checkpoints: Uint32Array;
  private readonly checkpointMask: number;

  constructor(
    capacityBytes: number,
    private readonly onEvict: EvictHook,
  ) {
    assert(
      Number.isInteger(capacityBytes) &&
        capacityBytes >= TIP_BYTES_MIN &&
        capacityBytes <= TIP_BYTES_MAX,
      "Ring: capacity within limits",
    );
    assert(
      capacityBytes % RECORD_ALIGN_BYTES === 0,
      "Ring: capacity is a multiple of the record alignment",
    );
    this.capacityBytes = capacityBytes;
    const buffer = new ArrayBuffer(capacityBytes);
    this.bytes = new Uint8Array(buffer);
    this.view = new DataView(buffer);
    this.u32 = new Uint32Array(buffer);
    this.f64 = new Float64Array(buffer);
    // Enough slots that a live checkpoint is never overwritten by a newer one.
    // The smallest record is a bare header (an empty payload).
    const slots = nextPowerOfTwo(
      Math.ceil(capacityBytes / RECORD_HEADER_BYTES / SEQ_CHECKPOINT_EVERY) + 2,
    );
    this.checkpoints = new Uint32Array(slots);
    this.checkpointMask = slots - 1;
  }

  /**
   * Appends a record of payload[start, start + length) (all of it by default) and the properties
   * properties[propertiesStart, + propertiesBytes) (none by default). `seq` must be
   * nextSeq, or anything ≥ nextSeq when the ring is empty.
   * A record larger than the whole ring empties it and is not held (subscribers go to disk for it).
   * Returns the record's offset, or -1 when it is not held.
   */
  append(
    topicId: number,
    seq: number,
    timeUs: number,
    payload: Uint8Array,
    start = 0,
    length = payload.length - start,
    properties: Uint8Array = payload,
    propertiesStart = 0,
    propertiesBytes = 0,
  ): number {
    assert(
      seq === this.nextSeq || (this.count === 0 && seq > this.nextSeq),
      "Ring.append: seqs are contiguous",
    );
    const propertiesTail = propertiesBytes === 0 ? 0 : propertiesBytes + PROPERTIES_TAIL_BYTES;
    const recordBytes = RECORD_HEADER_BYTES + length + propertiesTail;
    const paddedBytes = (recordBytes + RECORD_ALIGN_BYTES - 1) & ~(RECORD_ALIGN_BYTES - 1);
    if (this.count === 0) {
      this.head = this.tail = 0;
      this.firstSeq = seq;
    }
    if (paddedBytes > this.capacityBytes) {
      while (this.count > 0) this.evictOldest();
      this.firstSeq = this.nextSeq = seq + 1;
      this.head = this.tail = 0;
      return -1;
    }
    let at = this.head;
    if (at + paddedBytes > this.capacityBytes) {
      // Wrap: everything from head to the end dies, then make room at the start.
      while (this.count > 0 && this.tail >= at) this.evictOldest();
      if (at < this.capacityBytes) this.u32[at >> 2] = WRAP;
      at = 0;
      while (this.count > 0 && this.tail < paddedBytes) this.evictOldest();
    } else {
      while (this.count > 0 && this.tail >= at && this.tail < at + paddedBytes) this.evictOldest();
    }
    if (this.count === 0) {
      this.firstSeq = seq;
      this.tail = at;
    }
    const words = at >> 2;
    this.u32[words] = recordBytes;
    this.u32[words + 1] = propertiesTail === 0 ? topicId : (topicId | PROPERTIES_BIT) >>> 0;
    this.f64[(at >> 3) + SEQ_F64] = seq;
    this.f64[(at >> 3) + TIME_F64] = timeUs;
    copyBytesViews(
      this.bytes,
      this.view,
      at + RECORD_HEADER_BYTES,
      payload,
      this.sources,
      start,
      length,
    );
    if (propertiesTail !== 0) {
      const propertiesAt = at + RECORD_HEADER_BYTES + length;
      this.bytes.set(
        properties.subarray(propertiesStart, propertiesStart + propertiesBytes),
        propertiesAt,
      );
      this.bytes[propertiesAt + propertiesBytes] = propertiesBytes & 0xff;
      this.bytes[propertiesAt + propertiesBytes + 1] = propertiesBytes >>> 8;
    }
    if ((seq & (SEQ_CHECKPOINT_EVERY - 1)) === 0) {
      this.checkpoints[(seq / SEQ_CHECKPOINT_EVERY) & this.checkpointMask] =
        at / RECORD_ALIGN_BYTES;
    }
    this.head = at + paddedBytes;
    this.count++;
    this.bytesUsed += paddedBytes;
    this.nextSeq = seq + 1;
    return at;
  }

  /** Positions an empty ring so its next append is `seq` (a server starting on a stored stream). */
  startAt(seq: number): void {
    assert(this.count === 0, "Ring.startAt: the ring is empty");
    assert(Number.isSafeInteger(seq) && seq >= this.nextSeq, "Ring.startAt: seqs never go back");
    this.firstSeq = this.nextSeq = seq;
    this.head = this.tail = 0;
  }

  /** Removes the oldest record, telling the evict hook its topic. */
  evictOldest(): void {
    assert(this.count > 0, "Ring.evictOldest: ring is not empty");
    const at = this.tail;
    const recordBytes = this.u32[at >> 2];
    const paddedBytes = (recordBytes + RECORD_ALIGN_BYTES - 1) & ~(RECORD_ALIGN_BYTES - 1);
    this.onEvict(this.u32[(at >> 2) + TOPIC_U32] & TOPIC_ID_MASK);
    this.count--;
    this.bytesUsed -= paddedBytes;
    this.firstSeq++;
    this.tail = this.count === 0 ? this.head : this.after(at);
  }

  /** Offset of the record after the one at `at` (following a wrap). */
  after(at: number): number {
    const recordBytes = this.u32[at >> 2];
    let next = at + ((recordBytes + RECORD_ALIGN_BYTES - 1) & ~(RECORD_ALIGN_BYTES - 1));
    if (next >= this.capacityBytes || this.u32[next >> 2] === WRAP) next = 0;
    return next;
  }

  /** Offset of the record with seq `seq`, which must be in [firstSeq, nextSeq). */
  offsetOfSeq(seq: number): number {
    assert(seq >= this.firstSeq && seq < this.nextSeq, "Ring.offsetOfSeq: seq is held");
    const checkpointSeq = seq - (seq & (SEQ_CHECKPOINT_EVERY - 1));
    let at = this.tail;
    let atSeq = this.firstSeq;
    if (checkpointSeq > atSeq) {
      at =
        this.checkpoints[(checkpointSeq / SEQ_CHECKPOINT_EVERY) & this.checkpointMask] *
        RECORD_ALIGN_BYTES;
      atSeq = checkpointSeq;
    }
    for (; atSeq < seq; atSeq++) at = this.after(at);
    return at;
  }

  /** Seq of the record at `at`. */
  seqAt(at: number): number {
    return this.f64[(at >> 3) + SEQ_F64];
  }

  /** Topic id of the record at `at`. */
  topicAt(at: number): number {
    return this.u32[(at >> 2) + TOPIC_U32] & TOPIC_ID_MASK;
  }

  /** Publish time (µs) of the record at `at`. */
  timeAt(at: number): number {
    return this.f64[(at >> 3) + TIME_F64];
  }

  /** Payload bytes of the record at `at`. */
  payloadLengthAt(at: number): number {
    const propertiesBytes = this.propertiesLengthAt(at);
    const tail = propertiesBytes === 0 ? 0 : propertiesBytes + PROPERTIES_TAIL_BYTES;
    return this.u32[at >> 2] - RECORD_HEADER_BYTES - tail;
  }

  /** Properties bytes of the record at `at` (0 when it has none). */
  propertiesLengthAt(at: number): number {
    if (this.u32[(at >> 2) + TOPIC_U32] <= TOPIC_ID_MASK) return 0;
    const end = at + this.u32[at >> 2];
    return this.bytes[end - 2] | (this.bytes[end - 1] << 8);
  }

  /** The properties of the record at `at`, as a zero-copy view (empty when none). */
  propertiesAt(at: number): Uint8Array {
    const propertiesBytes = this.propertiesLengthAt(at);
    const end = at + this.u32[at >> 2] - (propertiesBytes === 0 ? 0 : PROPERTIES_TAIL_BYTES);
    return this.bytes.subarray(end - propertiesBytes, end);
  }

  /**
   * Hands the record at `at` to `sink` as a message of `subscriptionId` under `topic` (UTF-8),
   * with its properties when `withProperties`.
   */
  deliverAt(
    at: number,
    sink: RecordSink,
    subscriptionId: number,
    topic: Uint8Array,
    withProperties: boolean,
  ): void {
    const propertiesBytes = this.propertiesLengthAt(at);
    const payloadBytes = this.payloadLengthAt(at);
    sink.addData(
      subscriptionId,
      this.f64[(at >> 3) + SEQ_F64],
      this.f64[(at >> 3) + TIME_F64],
      topic,
      this.bytes,
      at + RECORD_HEADER_BYTES,
      payloadBytes,
      withProperties ? this.bytes : null,
      at + RECORD_HEADER_BYTES + payloadBytes,
      propertiesBytes,
    );
  }

  /** Writes the record at `at` into `writer`'s open DATA frame under `topic` (UTF-8). */
  writeAt(at: number, writer: DataMessageWriter, topic: Uint8Array): void {
    const propertiesBytes = this.propertiesLengthAt(at);
    const payloadBytes = this.payloadLengthAt(at);
    writer.addDataMessage(
      this.f64[(at >> 3) + SEQ_F64],
      this.f64[(at >> 3) + TIME_F64],
      topic,
      this.bytes,
      at + RECORD_HEADER_BYTES,
      payloadBytes,
      this.bytes,
      at + RECORD_HEADER_BYTES + payloadBytes,
      propertiesBytes,
    );
  }

  /** Publish time (µs) of the oldest record held (the ring must not be empty). */
  oldestTimeUs(): number {
    assert(this.count > 0, "Ring.oldestTimeUs: ring is not empty");
    return this.timeAt(this.tail);
  }

  /** The payload of the record at `at`, as a zero-copy view (valid until it is evicted). */
  payloadAt(at: number): Uint8Array {
    const start = at + RECORD_HEADER_BYTES;
    return this.bytes.subarray(start, start + this.payloadLengthAt(at));
  }
}

function nextPowerOfTwo(n: number): number {
  let power = 1;
  while (power < n) power *= 2;
  return power;
}
