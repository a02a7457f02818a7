/**
 * segment_index: the sparse seq/time index of one closed segment (Kafka's .index and .timeindex
 * in one file), and the summary of the segment it describes. Pure codec plus a builder fed one
 * record at a time while a segment is written, and the seek used by readers.
 *
 *   file header (kind "index", id = segment id, first seq, name = partition)
 *   H+0  u32 crc32 of bytes [H+8, end)
 *   H+4  u32 entry count E
 *   H+8  u64 last seq            H+16 u64 first time µs      H+24 u64 max time µs
 *   H+32 u64 record count        H+40 u64 segment file bytes
 *   H+48 E entries of 24 bytes: u64 seq, u64 max time µs up to and including it, u64 position
 *
 * Invariants: entry 0 is the segment's first record; entries are in increasing seq and position;
 * consecutive entries are at least SEGMENT_INDEX_INTERVAL_BYTES apart in the segment.
 */
import { assert } from "../stdx/assert.ts";
import type { Crc32 } from "./crc32.ts";
import { decodeFileHeader, encodeFileHeader } from "./file_header.ts";
import { getU64, setU64 } from "./record.ts";

const SUMMARY_BYTES = 48;
const ENTRY_BYTES = 24;

/** Bytes of an index file (or image) whose header is `headerBytes` long and that holds `entries` entries. */
export function segmentIndexBytes(headerBytes: number, entries: number): number {
  return headerBytes + SUMMARY_BYTES + entries * ENTRY_BYTES;
}

/**
 * Where a packed segment lives: its image (file header, records) starts at byte `offset` of
 * pack `pack`, and its index image of `indexBytes` follows it. Positions inside the image (its
 * index's, `bytes`) count from the image's start, exactly as in a `.seg` file of its own.
 */
export type PackPlace = {
  pack: number;
  offset: number;
  indexBytes: number;
  /**
   * CRC-32 of the image's records (its bytes from the first record to its end): a reader holding
   * the whole image checks it with one call instead of one per record. Absent for segments a
   * manifest listed before it was kept (kind 5).
   */
  recordsCrc?: number;
};

/** What the store knows of a closed segment (also its manifest entry). */
export type SegmentMeta = {
  id: number;
  partition: string;
  firstSeq: number;
  lastSeq: number;
  firstTimeUs: number;
  lastTimeUs: number;
  records: number;
  /** Bytes of the segment (its image, when packed). */
  bytes: number;
  /** Set when the segment is an image inside a pack file; absent for a `.seg` file of its own. */
  pack?: PackPlace;
};

/** A decoded index: the segment's summary and its entries as parallel typed arrays. */
export type SegmentIndex = {
  meta: SegmentMeta;
  seqs: Float64Array;
  maxTimes: Float64Array;
  positions: Float64Array;
};

/** Accumulates index entries while a segment is written. */
export class SegmentIndexBuilder {
  private seqs: number[] = [];
  private maxTimes: number[] = [];
  private positions: number[] = [];
  private lastEntryPosition = -Infinity;
  private maxTimeUs = 0;
  firstTimeUs = -1;
  lastSeq = 0;
  records = 0;

  constructor(private readonly intervalBytes: number) {}

  /** Notes a record written at `position`. */
  add(seq: number, timeUs: number, position: number): void {
    assert(seq > this.lastSeq, "segment_index: seqs must increase");
    if (this.firstTimeUs < 0) this.firstTimeUs = timeUs;
    this.maxTimeUs = Math.max(this.maxTimeUs, timeUs);
    if (position - this.lastEntryPosition >= this.intervalBytes) {
      this.seqs.push(seq);
      this.maxTimes.push(this.maxTimeUs);
      this.positions.push(position);
      this.lastEntryPosition = position;
    }
    this.lastSeq = seq;
    this.records++;
  }

  /** The summary of the segment once its last record was added. */
  meta(id: number, partition: string, firstSeq: number, segmentBytes: number): SegmentMeta {
    return {
      id,
      partition,
      firstSeq,
      lastSeq: this.lastSeq,
      firstTimeUs: this.firstTimeUs,
      lastTimeUs: this.maxTimeUs,
      records: this.records,
      bytes: segmentBytes,
    };
  }

  /** Encodes the index file. */
  encode(meta: SegmentMeta, crc32: Crc32): Uint8Array {
    const header = encodeFileHeader(
      { kind: "index", id: meta.id, firstSeq: meta.firstSeq, name: meta.partition },
      crc32,
    );
    const count = this.seqs.length;
    const bytes = new Uint8Array(segmentIndexBytes(header.length, count));
    const view = new DataView(bytes.buffer);
    bytes.set(header);
    const at = header.length;
    view.setUint32(at + 4, count, true);
    setU64(view, at + 8, meta.lastSeq);
    setU64(view, at + 16, meta.firstTimeUs);
    setU64(view, at + 24, meta.lastTimeUs);
    setU64(view, at + 32, meta.records);
    setU64(view, at + 40, meta.bytes);
    for (let i = 0; i < count; i++) {
      const entry = at + SUMMARY_BYTES + i * ENTRY_BYTES;
      setU64(view, entry, this.seqs[i]);
      setU64(view, entry + 8, this.maxTimes[i]);
      setU64(view, entry + 16, this.positions[i]);
    }
    view.setUint32(at, crc32(bytes.subarray(at + 8)), true);
    return bytes;
  }
}

/** Decodes an index file: the index, or why it is invalid. */
export function decodeSegmentIndex(bytes: Uint8Array, crc32: Crc32): SegmentIndex | string {
  const header = decodeFileHeader(bytes, "index", crc32);
  if (typeof header === "string") return header;
  const at = header.bytes;
  if (bytes.length < at + SUMMARY_BYTES) return "index summary cut short";
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const count = view.getUint32(at + 4, true);
  if (bytes.length !== at + SUMMARY_BYTES + count * ENTRY_BYTES)
    return `index holds ${bytes.length} bytes, expected ${at + SUMMARY_BYTES + count * ENTRY_BYTES}`;
  if (view.getUint32(at, true) !== crc32(bytes.subarray(at + 8))) return "index checksum mismatch";
  if (count === 0) return "index has no entries";
  const meta: SegmentMeta = {
    id: header.id,
    partition: header.name,
    firstSeq: header.firstSeq,
    lastSeq: getU64(view, at + 8),
    firstTimeUs: getU64(view, at + 16),
    lastTimeUs: getU64(view, at + 24),
    records: getU64(view, at + 32),
    bytes: getU64(view, at + 40),
  };
  const seqs = new Float64Array(count);
  const maxTimes = new Float64Array(count);
  const positions = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const entry = at + SUMMARY_BYTES + i * ENTRY_BYTES;
    seqs[i] = getU64(view, entry);
    maxTimes[i] = getU64(view, entry + 8);
    positions[i] = getU64(view, entry + 16);
  }
  return { meta, seqs, maxTimes, positions };
}

/**
 * The position to start scanning for the first record with seq >= `seq` (or, with `byTime`,
 * with time >= `timeUs`): the last entry before it, else the first record.
 */
export function seekIndex(
  index: SegmentIndex,
  target: { seq: number } | { timeUs: number },
): number {
  const keys = "seq" in target ? index.seqs : index.maxTimes;
  const key = "seq" in target ? target.seq : target.timeUs;
  // Last entry whose key is < target: the target lies at or after it. Keys never decrease.
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? index.positions[0] : index.positions[lo - 1];
}
