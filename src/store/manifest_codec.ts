/**
 * manifest_codec: the records of the MANIFEST file, the list of closed segments in force.
 * The manifest is an append-only log after its file header; replaying it gives the live segment
 * set. A segment is in force from the moment its ADD record is durable until its REMOVE record is;
 * this is the one switch that makes closing, retention and (later) split atomic. Pure codec.
 *
 *   0  u32 record bytes (68 + name bytes)
 *   4  u32 crc32 of bytes [8, record bytes)
 *   8  u8  kind: 1 ADD segment, 2 REMOVE segment, 3 WATERMARK (partition sorted through seq)
 *   9  u8  reserved (0)
 *  10  u16 name bytes (partition; 0 for REMOVE)
 *  12  u64 segment id (0 for WATERMARK)
 *  20  u64 first seq   28 u64 last seq (WATERMARK: sorted-through seq)
 *  36  u64 first time µs   44 u64 max time µs   52 u64 record count   60 u64 segment bytes
 *  68  name (ASCII)
 */
import type { Crc32 } from "./crc32.ts";
import { getU64, setU64 } from "./record.ts";
import type { SegmentMeta } from "./segment_index.ts";

const FIXED_BYTES = 68;
export const MANIFEST_ADD = 1;
export const MANIFEST_REMOVE = 2;
export const MANIFEST_WATERMARK = 3;

/** One manifest record. */
export type ManifestRecord =
  | { kind: typeof MANIFEST_ADD; segment: SegmentMeta }
  | { kind: typeof MANIFEST_REMOVE; id: number }
  | { kind: typeof MANIFEST_WATERMARK; partition: string; seq: number };

/** Encodes records into one buffer (appended with one write). */
export function encodeManifestRecords(records: readonly ManifestRecord[], crc32: Crc32): Uint8Array {
  let total = 0;
  for (const record of records) total += FIXED_BYTES + nameOf(record).length;
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (const record of records) {
    const name = nameOf(record);
    const length = FIXED_BYTES + name.length;
    view.setUint32(at, length, true);
    view.setUint8(at + 8, record.kind);
    view.setUint16(at + 10, name.length, true);
    if (record.kind === MANIFEST_ADD) {
      const s = record.segment;
      setU64(view, at + 12, s.id);
      setU64(view, at + 20, s.firstSeq);
      setU64(view, at + 28, s.lastSeq);
      setU64(view, at + 36, s.firstTimeUs);
      setU64(view, at + 44, s.lastTimeUs);
      setU64(view, at + 52, s.records);
      setU64(view, at + 60, s.bytes);
    } else if (record.kind === MANIFEST_REMOVE) {
      setU64(view, at + 12, record.id);
    } else {
      setU64(view, at + 28, record.seq);
    }
    for (let i = 0; i < name.length; i++) bytes[at + FIXED_BYTES + i] = name.charCodeAt(i);
    view.setUint32(at + 4, crc32(bytes.subarray(at + 8, at + length)), true);
    at += length;
  }
  return bytes;
}

function nameOf(record: ManifestRecord): string {
  return record.kind === MANIFEST_ADD ? record.segment.partition : record.kind === MANIFEST_WATERMARK ? record.partition : "";
}

/** The result of decoding a manifest body: records, bytes that decoded, and the first problem. */
export type ManifestDecode = { records: ManifestRecord[]; validBytes: number; problem: string | null };

/** Decodes records from `bytes` until the end or the first invalid record. */
export function decodeManifestRecords(bytes: Uint8Array, crc32: Crc32): ManifestDecode {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const records: ManifestRecord[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < FIXED_BYTES) return { records, validBytes: at, problem: "record cut short" };
    const length = view.getUint32(at, true);
    const nameBytes = view.getUint16(at + 10, true);
    if (length !== FIXED_BYTES + nameBytes) return { records, validBytes: at, problem: "impossible record length" };
    if (bytes.length - at < length) return { records, validBytes: at, problem: "record cut short" };
    if (view.getUint32(at + 4, true) !== crc32(bytes.subarray(at + 8, at + length))) return { records, validBytes: at, problem: "checksum mismatch" };
    const kind = view.getUint8(at + 8);
    const name = String.fromCharCode.apply(null, bytes.subarray(at + FIXED_BYTES, at + length) as unknown as number[]);
    if (kind === MANIFEST_ADD) {
      records.push({
        kind,
        segment: {
          id: getU64(view, at + 12),
          partition: name,
          firstSeq: getU64(view, at + 20),
          lastSeq: getU64(view, at + 28),
          firstTimeUs: getU64(view, at + 36),
          lastTimeUs: getU64(view, at + 44),
          records: getU64(view, at + 52),
          bytes: getU64(view, at + 60),
        },
      });
    } else if (kind === MANIFEST_REMOVE) {
      records.push({ kind, id: getU64(view, at + 12) });
    } else if (kind === MANIFEST_WATERMARK) {
      records.push({ kind, partition: name, seq: getU64(view, at + 28) });
    } else {
      return { records, validBytes: at, problem: `unknown record kind ${kind}` };
    }
    at += length;
  }
  return { records, validBytes: at, problem: null };
}
