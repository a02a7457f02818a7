/**
 * record: the byte layout of one persisted message, shared by journal files and segments.
 * Pure codec over a Uint8Array and its DataView; no allocation per record on the encode path.
 *
 *   0  u32 record bytes (header + topic + payload)
 *   4  u32 crc32 of bytes [8, record bytes)
 *   8  u64 seq
 *  16  u64 publish time, µs since the Unix epoch
 *  24  u16 topic bytes
 *  26  u16 flags: RECORD_FLAG_PROPERTIES or 0 (other bits: an impossible record)
 *  28  u32 payload bytes
 *  32  topic (ASCII), then payload
 *      with RECORD_FLAG_PROPERTIES, after the payload: properties, then u16 properties bytes
 *
 * Integers are little-endian; u64 fields hold safe integers (asserted on encode, checked on decode).
 * Invariant: record bytes = 32 + topic bytes + payload bytes (+ properties bytes + 2 with the
 * flag) <= STORE_RECORD_BYTES_MAX. A message without properties is written with flags 0, as every
 * record was before properties existed: files written before read unchanged, and such a record
 * costs no byte more.
 */
import {
  PROPERTIES_BYTES_MAX,
  STORE_RECORD_BYTES_MAX,
  STORE_RECORD_HEADER_BYTES,
  TOPIC_BYTES_MAX,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { COPY_VIEWS_BYTES_MAX, type ViewCache, copyBytesViews } from "../stdx/bytes.ts";
import { type Crc32, crc32Range, crc32RangeThen } from "./crc32.ts";

export const RECORD_LENGTH_OFFSET = 0;
export const RECORD_CRC_OFFSET = 4;
export const RECORD_SEQ_OFFSET = 8;
export const RECORD_TIME_OFFSET = 16;
export const RECORD_TOPIC_BYTES_OFFSET = 24;
export const RECORD_FLAGS_OFFSET = 26;
export const RECORD_PAYLOAD_BYTES_OFFSET = 28;
export const RECORD_TOPIC_OFFSET = 32;
assert(RECORD_TOPIC_OFFSET === STORE_RECORD_HEADER_BYTES, "record header size matches its layout");
/** Flag: the record carries properties after its payload (u16 length at its very end). */
export const RECORD_FLAG_PROPERTIES = 0x0001;
/** Bytes of the properties length at the end of a record with RECORD_FLAG_PROPERTIES. */
const PROPERTIES_TAIL_BYTES = 2;

/**
 * A message as the store hands it out. A borrowing read (see ReadOptions) also sets `source`,
 * `start` and `length`: the payload is source[start, start + length), usable without building
 * the `payload` view.
 */
export type StoredMessage = {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
  /** Set by borrowing reads: the topic's bytes (ASCII), shared by messages of the topic. */
  topicUtf8?: Uint8Array;
  source?: Uint8Array;
  start?: number;
  length?: number;
  /** The message's properties (absent or empty: none). */
  properties?: Uint8Array;
};

/** Record bytes of a message with `topicBytes`, `payloadBytes` and `propertiesBytes`. */
export function recordBytes(topicBytes: number, payloadBytes: number, propertiesBytes = 0): number {
  const properties = propertiesBytes === 0 ? 0 : propertiesBytes + PROPERTIES_TAIL_BYTES;
  return STORE_RECORD_HEADER_BYTES + topicBytes + payloadBytes + properties;
}

/** Writes a u64 safe integer, little-endian. */
export function setU64(view: DataView, at: number, value: number): void {
  view.setUint32(at, value >>> 0, true);
  view.setUint32(at + 4, Math.floor(value / 4294967296), true);
}

/** Reads a u64; values above 2^53 come back inexact (callers check with Number.isSafeInteger). */
export function getU64(view: DataView, at: number): number {
  const high = view.getUint32(at + 4, true);
  const low = view.getUint32(at, true);
  // Small values as int32 (the engine then keeps sums of them, file positions, as integers),
  // computed apart from the large ones: `(low + high * 2^32) | 0` came out of JavaScriptCore's
  // optimized code as a boxed double once any caller had read a large value (a time), so the
  // optimized manifest decode gave every pack offset, segment size and seq as a double, and the
  // reader's code speculating on int32 failed on them: a process's first whole-stream read of
  // 10,000 partitions left optimized code 10,377 times, 5,299 with this (record.test.ts).
  if (high === 0 && low <= 0x7fffffff) return low | 0;
  return high * 4294967296 + low;
}

/**
 * Encodes one record at `at` (the caller made room); returns the offset after it. The payload is
 * source[payloadStart, payloadStart + payloadBytes): a range of the caller's bytes (a PUBLISH
 * frame), so no view is built per message of up to COPY_VIEWS_BYTES_MAX bytes (`sources` gives
 * the DataView of `source` for copying those), and one (none for a whole array) for a longer one.
 * The properties (none by default) are properties[propertiesStart, + propertiesBytes).
 */
export function encodeRecord(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  seq: number,
  timeUs: number,
  topic: string,
  source: Uint8Array,
  sources: ViewCache,
  payloadStart: number,
  payloadBytes: number,
  crc32: Crc32,
  properties: Uint8Array | null = null,
  propertiesStart = 0,
  propertiesBytes = 0,
): number {
  assert(Number.isSafeInteger(seq) && seq > 0, "record: seq must be a positive safe integer");
  assert(
    Number.isSafeInteger(timeUs) && timeUs >= 0,
    "record: time must be a non-negative safe integer",
  );
  assert(topic.length > 0 && topic.length <= TOPIC_BYTES_MAX, "record: topic length out of range");
  assert(propertiesBytes <= PROPERTIES_BYTES_MAX, "record: properties within their limit");
  const total = recordBytes(topic.length, payloadBytes, propertiesBytes);
  assert(total <= STORE_RECORD_BYTES_MAX, "record: larger than STORE_RECORD_BYTES_MAX");
  view.setUint32(at + RECORD_LENGTH_OFFSET, total, true);
  setU64(view, at + RECORD_SEQ_OFFSET, seq);
  setU64(view, at + RECORD_TIME_OFFSET, timeUs);
  view.setUint16(at + RECORD_TOPIC_BYTES_OFFSET, topic.length, true);
  view.setUint16(
    at + RECORD_FLAGS_OFFSET,
    propertiesBytes === 0 ? 0 : RECORD_FLAG_PROPERTIES,
    true,
  );
  view.setUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, payloadBytes, true);
  const topicAt = at + RECORD_TOPIC_OFFSET;
  for (let i = 0; i < topic.length; i++) bytes[topicAt + i] = topic.charCodeAt(i);
  const payloadAt = topicAt + topic.length;
  let crc: number;
  if (propertiesBytes !== 0) {
    // Rare: copied whole, then checksummed over the record's own bytes.
    assert(properties !== null, "record: properties bytes come with their source");
    bytes.set(source.subarray(payloadStart, payloadStart + payloadBytes), payloadAt);
    const propertiesAt = payloadAt + payloadBytes;
    bytes.set(
      properties.subarray(propertiesStart, propertiesStart + propertiesBytes),
      propertiesAt,
    );
    view.setUint16(propertiesAt + propertiesBytes, propertiesBytes, true);
    crc = crc32Range(bytes, at + RECORD_SEQ_OFFSET, at + total, crc32, view);
  } else if (payloadBytes <= COPY_VIEWS_BYTES_MAX) {
    copyBytesViews(bytes, view, payloadAt, source, sources, payloadStart, payloadBytes);
    crc = crc32Range(bytes, at + RECORD_SEQ_OFFSET, at + total, crc32, view);
  } else {
    // A long payload is copied and checksummed from the caller's bytes (one view of them, not one of the copy).
    const payload =
      payloadStart === 0 && payloadBytes === source.length
        ? source
        : source.subarray(payloadStart, payloadStart + payloadBytes);
    bytes.set(payload, payloadAt);
    crc = crc32RangeThen(bytes, at + RECORD_SEQ_OFFSET, payloadAt, payload, crc32, view);
  }
  view.setUint32(at + RECORD_CRC_OFFSET, crc, true);
  return at + total;
}

/** checkRecord result: more bytes are needed to decide (the buffer ends inside the record). */
export const RECORD_INCOMPLETE = 0;
/** checkRecord result: the length fields are impossible. */
export const RECORD_BAD_LENGTH = -1;
/** checkRecord result: the checksum does not match. */
export const RECORD_BAD_CHECKSUM = -2;

/**
 * Checks the record at `at` within bytes[..end): its length when valid, else RECORD_INCOMPLETE,
 * RECORD_BAD_LENGTH or RECORD_BAD_CHECKSUM. `checksummed`: the record's bytes were already
 * checked by a CRC over many records (a packed image's), so its own CRC is not computed again.
 */
export function checkRecord(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  end: number,
  crc32: Crc32,
  checksummed = false,
): number {
  const total = checkRecordLength(view, at, end);
  if (total <= 0 || checksummed) return total;
  const crc = view.getUint32(at + RECORD_CRC_OFFSET, true);
  if (crc !== crc32Range(bytes, at + RECORD_SEQ_OFFSET, at + total, crc32, view))
    return RECORD_BAD_CHECKSUM;
  return total;
}

/**
 * The length of the record at `at` within [..end) when its length fields are consistent, else
 * RECORD_INCOMPLETE or RECORD_BAD_LENGTH: checkRecord without the checksum (a caller that
 * checked many records with one CRC, and compiles no CRC code into its loop).
 */
export function checkRecordLength(view: DataView, at: number, end: number): number {
  if (end - at < STORE_RECORD_HEADER_BYTES) return RECORD_INCOMPLETE;
  const total = view.getUint32(at + RECORD_LENGTH_OFFSET, true);
  const topicBytes = view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
  const flags = view.getUint16(at + RECORD_FLAGS_OFFSET, true);
  const payloadBytes = view.getUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, true);
  const bare = recordBytes(topicBytes, payloadBytes);
  if (
    topicBytes === 0 ||
    topicBytes > TOPIC_BYTES_MAX ||
    total > STORE_RECORD_BYTES_MAX ||
    (flags === 0
      ? total !== bare
      : flags !== RECORD_FLAG_PROPERTIES ||
        total <= bare + PROPERTIES_TAIL_BYTES ||
        total > bare + PROPERTIES_TAIL_BYTES + PROPERTIES_BYTES_MAX)
  ) {
    return RECORD_BAD_LENGTH;
  }
  if (end - at < total) return RECORD_INCOMPLETE;
  // With properties, the length at the record's end must agree with the header's.
  if (flags !== 0 && view.getUint16(at + total - 2, true) !== total - bare - PROPERTIES_TAIL_BYTES)
    return RECORD_BAD_LENGTH;
  return total;
}

/** Properties bytes of the (checked) record at `at`: 0 when it has none. */
export function recordPropertiesBytes(view: DataView, at: number): number {
  if (view.getUint16(at + RECORD_FLAGS_OFFSET, true) === 0) return 0;
  return view.getUint16(at + view.getUint32(at + RECORD_LENGTH_OFFSET, true) - 2, true);
}

/** Offset of the properties of the (checked) record at `at` (their bytes: recordPropertiesBytes). */
export function recordPropertiesStart(view: DataView, at: number): number {
  const total = view.getUint32(at + RECORD_LENGTH_OFFSET, true);
  return at + total - PROPERTIES_TAIL_BYTES - recordPropertiesBytes(view, at);
}

/** Properties of the (checked) record at `at`, as a copy; undefined when it has none. */
export function recordProperties(
  bytes: Uint8Array,
  view: DataView,
  at: number,
): Uint8Array | undefined {
  const propertiesBytes = recordPropertiesBytes(view, at);
  if (propertiesBytes === 0) return undefined;
  const start = recordPropertiesStart(view, at);
  return bytes.slice(start, start + propertiesBytes);
}

/** Why checkRecord failed, in words. */
export function recordProblem(code: number): string {
  return code === RECORD_BAD_LENGTH
    ? "impossible record length"
    : code === RECORD_BAD_CHECKSUM
      ? "checksum mismatch"
      : "record cut short";
}

/** Seq of the (checked) record at `at`. */
export function recordSeq(view: DataView, at: number): number {
  return getU64(view, at + RECORD_SEQ_OFFSET);
}

/** Publish time of the (checked) record at `at`. */
export function recordTime(view: DataView, at: number): number {
  return getU64(view, at + RECORD_TIME_OFFSET);
}

/** Topic of the (checked) record at `at`, decoded from ASCII. */
export function recordTopic(bytes: Uint8Array, view: DataView, at: number): string {
  const topicBytes = view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
  return String.fromCharCode.apply(
    null,
    bytes.subarray(
      at + RECORD_TOPIC_OFFSET,
      at + RECORD_TOPIC_OFFSET + topicBytes,
    ) as unknown as number[],
  );
}

/** True when the topic of the record at `at` equals `topic` (no string is built). */
export function recordTopicEquals(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  topic: string,
): boolean {
  const topicBytes = view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
  if (topicBytes !== topic.length) return false;
  const from = at + RECORD_TOPIC_OFFSET;
  for (let i = 0; i < topicBytes; i++) if (bytes[from + i] !== topic.charCodeAt(i)) return false;
  return true;
}

/** Payload of the (checked) record at `at`, as a copy that outlives the read buffer. */
export function recordPayload(bytes: Uint8Array, view: DataView, at: number): Uint8Array {
  const topicBytes = view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
  const payloadBytes = view.getUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, true);
  const from = at + RECORD_TOPIC_OFFSET + topicBytes;
  return bytes.slice(from, from + payloadBytes);
}
