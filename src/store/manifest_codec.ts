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
 *
 * Kind 4 SWAP (written by `aria split`: the whole switch from old files to new stores, one CRC):
 *   0  u32 record bytes   4 u32 crc32 of bytes [8, record bytes)   8 u8 kind 4   9 u8 0   10 u16 0
 *  12  u32 removed count R   16 u32 added count A
 *  20  R × u64 removed ids (segments or stores)
 *   …  A × store entry: u64 id, first seq, last seq, first time µs, max time µs, record count,
 *      bytes, generation (64 bytes); u32 data start; u32 topic count N; u16 partition bytes;
 *      u16 label bytes; partition; label; N × (u16 topic bytes, topic)
 * A rewrite of the manifest lists every live store in one SWAP with R = 0.
 *
 * Kind 5 ADD PACKED (a segment that is an image inside a pack file): the ADD layout above up to
 * byte 68, then  68 u64 pack id   76 u64 image offset in the pack   84 u32 index image bytes,
 *  88 name. Record bytes = 88 + name bytes. Directories written before packs hold no kind 5.
 *
 * Kind 6 ADD PACKED with the records' CRC (what the sorter writes since it keeps that CRC): kind
 * 5's layout up to byte 88, then  88 u32 CRC-32 of the image's records (from its first record to
 * its end),  92 name. Record bytes = 92 + name bytes. Kind 5 still decodes (no records CRC).
 *
 * Kind 7 SPLIT (what the last split did; written after its SWAP, in the same append, and again
 * after a rewrite's records; 76 bytes):
 *   8 u8 kind 7   9 u8 algorithm (0 not recorded, 1 heuristic, 2 adaptive)   10 u16 0
 *  12 u64 generation (the split's first reserved id: its stores carry it)
 *  20 u64 finished µs since the epoch (0: not recorded)   28 u64 duration µs
 *  36 u64 stores written   44 u64 their bytes   52 u64 stores of the plan (0: no plan recorded)
 *  60 f64 the plan's wasted bytes   68 f64 its worst ratio
 * Directories written before it hold none: their last split is read from the SWAP alone.
 *
 * Kind 8 TOPICS (the messages and record bytes of each topic in one closed file, segment or
 * store; written before the file's ADD or SWAP, in the same append):
 *   8 u8 kind 8   9 u8 0   10 u16 0   12 u64 file id   20 u32 topic count N
 *  24  N × (u64 messages, u64 record bytes, u16 topic bytes, topic)
 * Files closed by a build before it have none: the store counts them once (store.ts).
 *
 * Kind 9 JOURNAL (a journal generation's life: the evidence recovery checks the journal
 * directory against, so a journal deleted by hand is never silent; 28 bytes):
 *   8 u8 kind 9   9 u8 event (1 started: its file is durable under its name; 2 retired: its
 *   records are all in closed files and its file is about to go)   10 u16 0
 *  12 u64 generation   20 u64 first seq
 * Written when a generation gets its name and before it is retired, and one per journal in
 * force by a rewrite. Directories written before it hold none: nothing to check them against.
 */
import type { Crc32 } from "./crc32.ts";
import { getU64, setU64 } from "./record.ts";
import type { SegmentMeta } from "./segment_index.ts";
import type { SubtreeStoreMeta } from "./subtree_store_file.ts";

/** Bytes every record kind starts with (length, CRC, kind, reserved, name bytes). */
const COMMON_BYTES = 12;
const FIXED_BYTES = 68;
const PACKED_FIXED_BYTES = 88;
const PACKED_CRC_FIXED_BYTES = 92;
const SWAP_FIXED_BYTES = 20;
const SWAP_STORE_FIXED_BYTES = 76;
const SPLIT_BYTES = 76;
const TOPICS_FIXED_BYTES = 24;
const TOPIC_ENTRY_FIXED_BYTES = 18;
const JOURNAL_BYTES = 28;
export const MANIFEST_ADD = 1;
export const MANIFEST_REMOVE = 2;
export const MANIFEST_WATERMARK = 3;
export const MANIFEST_SWAP = 4;
/** On disk only: an ADD of a packed segment (decoded as MANIFEST_ADD with `segment.pack` set). */
const MANIFEST_ADD_PACKED = 5;
/** On disk only: as MANIFEST_ADD_PACKED, with `segment.pack.recordsCrc`. */
const MANIFEST_ADD_PACKED_CRC = 6;
export const MANIFEST_SPLIT = 7;
export const MANIFEST_TOPICS = 8;
export const MANIFEST_JOURNAL = 9;
/** The record kinds this build knows; any other intact one was written by a newer build. */
const KIND_LAST = MANIFEST_JOURNAL;

/** What a JOURNAL record says happened to its generation, by its code. */
const JOURNAL_EVENT_CODES = ["", "started", "retired"] as const;

/** The messages and record bytes (header, topic, payload) of one topic in one file. */
export type TopicCount = { topic: string; messages: number; bytes: number };

/** The algorithms a SPLIT record names, by their code (0: not recorded). */
const SPLIT_ALGORITHM_CODES = ["", "heuristic", "adaptive"] as const;

/**
 * What the last split did, as the manifest keeps it: its generation, the stores it wrote and
 * their bytes; when it switched, how long it ran, the algorithm and the plan's metrics, each
 * null when not recorded (a split by a build before the SPLIT record: its SWAP alone says the rest).
 */
export type SplitSummary = {
  generation: number;
  storesWritten: number;
  storeBytes: number;
  finishedUs: number | null;
  durationUs: number | null;
  algorithm: "heuristic" | "adaptive" | null;
  plan: { stores: number; wastedBytesTotal: number; worstRatio: number } | null;
};

/** One manifest record. */
export type ManifestRecord =
  | { kind: typeof MANIFEST_ADD; segment: SegmentMeta }
  | { kind: typeof MANIFEST_REMOVE; id: number }
  | { kind: typeof MANIFEST_WATERMARK; partition: string; seq: number }
  | { kind: typeof MANIFEST_SWAP; removed: readonly number[]; added: readonly SubtreeStoreMeta[] }
  | { kind: typeof MANIFEST_SPLIT; split: SplitSummary }
  | { kind: typeof MANIFEST_TOPICS; id: number; topics: readonly TopicCount[] }
  | {
      kind: typeof MANIFEST_JOURNAL;
      event: "started" | "retired";
      gen: number;
      firstSeq: number;
    };

/** Records of a fixed part and a name (every kind but SWAP, SPLIT, TOPICS and JOURNAL). */
type NamedRecord = Exclude<
  ManifestRecord,
  {
    kind:
      | typeof MANIFEST_SWAP
      | typeof MANIFEST_SPLIT
      | typeof MANIFEST_TOPICS
      | typeof MANIFEST_JOURNAL;
  }
>;

/** Bytes before the name of a named record. */
function fixedBytesOf(record: NamedRecord): number {
  if (record.kind !== MANIFEST_ADD || record.segment.pack === undefined) return FIXED_BYTES;
  return record.segment.pack.recordsCrc === undefined ? PACKED_FIXED_BYTES : PACKED_CRC_FIXED_BYTES;
}

function recordLength(record: ManifestRecord): number {
  if (record.kind === MANIFEST_SPLIT) return SPLIT_BYTES;
  if (record.kind === MANIFEST_JOURNAL) return JOURNAL_BYTES;
  if (record.kind === MANIFEST_TOPICS) {
    let total = TOPICS_FIXED_BYTES;
    for (const count of record.topics) total += TOPIC_ENTRY_FIXED_BYTES + count.topic.length;
    return total;
  }
  if (record.kind !== MANIFEST_SWAP) return fixedBytesOf(record) + nameOf(record).length;
  let total = SWAP_FIXED_BYTES + 8 * record.removed.length;
  for (const store of record.added) {
    total += SWAP_STORE_FIXED_BYTES + store.partition.length + store.label.length;
    for (const topic of store.topics) total += 2 + topic.length;
  }
  return total;
}

function encodeSwap(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  record: { removed: readonly number[]; added: readonly SubtreeStoreMeta[] },
): void {
  view.setUint8(at + 8, MANIFEST_SWAP);
  view.setUint32(at + 12, record.removed.length, true);
  view.setUint32(at + 16, record.added.length, true);
  let p = at + SWAP_FIXED_BYTES;
  for (const id of record.removed) {
    setU64(view, p, id);
    p += 8;
  }
  for (const s of record.added) {
    const fields = [
      s.id,
      s.firstSeq,
      s.lastSeq,
      s.firstTimeUs,
      s.lastTimeUs,
      s.records,
      s.bytes,
      s.generation,
    ];
    for (let i = 0; i < fields.length; i++) setU64(view, p + 8 * i, fields[i]);
    view.setUint32(p + 64, s.dataStart, true);
    view.setUint32(p + 68, s.topics.length, true);
    view.setUint16(p + 72, s.partition.length, true);
    view.setUint16(p + 74, s.label.length, true);
    p = putAscii(bytes, p + SWAP_STORE_FIXED_BYTES, s.partition);
    p = putAscii(bytes, p, s.label);
    for (const topic of s.topics) {
      view.setUint16(p, topic.length, true);
      p = putAscii(bytes, p + 2, topic);
    }
  }
}

function encodeSplit(view: DataView, at: number, split: SplitSummary): void {
  view.setUint8(at + 8, MANIFEST_SPLIT);
  view.setUint8(
    at + 9,
    split.algorithm === null ? 0 : SPLIT_ALGORITHM_CODES.indexOf(split.algorithm),
  );
  setU64(view, at + 12, split.generation);
  setU64(view, at + 20, split.finishedUs ?? 0);
  setU64(view, at + 28, split.durationUs ?? 0);
  setU64(view, at + 36, split.storesWritten);
  setU64(view, at + 44, split.storeBytes);
  setU64(view, at + 52, split.plan?.stores ?? 0);
  view.setFloat64(at + 60, split.plan?.wastedBytesTotal ?? 0, true);
  view.setFloat64(at + 68, split.plan?.worstRatio ?? 0, true);
}

function decodeSplit(view: DataView, at: number): ManifestRecord | string {
  const algorithm = SPLIT_ALGORITHM_CODES[view.getUint8(at + 9)];
  if (algorithm === undefined) return "split record names an unknown algorithm";
  const finishedUs = getU64(view, at + 20);
  const planSubtreeStores = getU64(view, at + 52);
  const split: SplitSummary = {
    generation: getU64(view, at + 12),
    storesWritten: getU64(view, at + 36),
    storeBytes: getU64(view, at + 44),
    finishedUs: finishedUs === 0 ? null : finishedUs,
    durationUs: finishedUs === 0 ? null : getU64(view, at + 28),
    algorithm: algorithm === "" ? null : algorithm,
    plan:
      planSubtreeStores === 0
        ? null
        : {
            stores: planSubtreeStores,
            wastedBytesTotal: view.getFloat64(at + 60, true),
            worstRatio: view.getFloat64(at + 68, true),
          },
  };
  return { kind: MANIFEST_SPLIT, split };
}

function encodeTopics(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  record: { id: number; topics: readonly TopicCount[] },
): void {
  view.setUint8(at + 8, MANIFEST_TOPICS);
  setU64(view, at + 12, record.id);
  view.setUint32(at + 20, record.topics.length, true);
  let p = at + TOPICS_FIXED_BYTES;
  for (const count of record.topics) {
    setU64(view, p, count.messages);
    setU64(view, p + 8, count.bytes);
    view.setUint16(p + 16, count.topic.length, true);
    p = putAscii(bytes, p + TOPIC_ENTRY_FIXED_BYTES, count.topic);
  }
}

/** Decodes the body of a TOPICS record bytes[at, end) (length and CRC already checked), or why not. */
function decodeTopics(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  end: number,
): ManifestRecord | string {
  const count = view.getUint32(at + 20, true);
  const topics: TopicCount[] = [];
  let p = at + TOPICS_FIXED_BYTES;
  for (let i = 0; i < count; i++) {
    if (p + TOPIC_ENTRY_FIXED_BYTES > end) return "topics record cut short";
    const length = view.getUint16(p + 16, true);
    if (p + TOPIC_ENTRY_FIXED_BYTES + length > end) return "topics record cut short";
    topics.push({
      topic: ascii(bytes, p + TOPIC_ENTRY_FIXED_BYTES, p + TOPIC_ENTRY_FIXED_BYTES + length),
      messages: getU64(view, p),
      bytes: getU64(view, p + 8),
    });
    p += TOPIC_ENTRY_FIXED_BYTES + length;
  }
  if (p !== end) return "topics record length mismatch";
  return { kind: MANIFEST_TOPICS, id: getU64(view, at + 12), topics };
}

function putAscii(bytes: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) bytes[at + i] = text.charCodeAt(i);
  return at + text.length;
}

function ascii(bytes: Uint8Array, from: number, to: number): string {
  return String.fromCharCode.apply(null, bytes.subarray(from, to) as unknown as number[]);
}

/** Decodes the body of a SWAP record bytes[at, end) (length and CRC already checked), or why not. */
function decodeSwap(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  end: number,
): ManifestRecord | string {
  const removedCount = view.getUint32(at + 12, true);
  const addedCount = view.getUint32(at + 16, true);
  let p = at + SWAP_FIXED_BYTES;
  if (p + 8 * removedCount > end) return "swap record cut short";
  const removed: number[] = [];
  for (let i = 0; i < removedCount; i++, p += 8) removed.push(getU64(view, p));
  const added: SubtreeStoreMeta[] = [];
  for (let i = 0; i < addedCount; i++) {
    if (p + SWAP_STORE_FIXED_BYTES > end) return "swap record cut short";
    const f = (k: number) => getU64(view, p + 8 * k);
    const dataStart = view.getUint32(p + 64, true);
    const topicCount = view.getUint32(p + 68, true);
    const partitionBytes = view.getUint16(p + 72, true);
    const labelBytes = view.getUint16(p + 74, true);
    const meta = {
      id: f(0),
      firstSeq: f(1),
      lastSeq: f(2),
      firstTimeUs: f(3),
      lastTimeUs: f(4),
      records: f(5),
      bytes: f(6),
      generation: f(7),
      dataStart,
    };
    p += SWAP_STORE_FIXED_BYTES;
    if (p + partitionBytes + labelBytes > end) return "swap record cut short";
    const partition = ascii(bytes, p, p + partitionBytes);
    const label = ascii(bytes, p + partitionBytes, p + partitionBytes + labelBytes);
    p += partitionBytes + labelBytes;
    const topics: string[] = [];
    for (let t = 0; t < topicCount; t++) {
      if (p + 2 > end) return "swap record cut short";
      const length = view.getUint16(p, true);
      if (p + 2 + length > end) return "swap record cut short";
      topics.push(ascii(bytes, p + 2, p + 2 + length));
      p += 2 + length;
    }
    added.push({ ...meta, partition, label, topics });
  }
  if (p !== end) return "swap record length mismatch";
  return { kind: MANIFEST_SWAP, removed, added };
}

/** Encodes records into one buffer (appended with one write). */
export function encodeManifestRecords(
  records: readonly ManifestRecord[],
  crc32: Crc32,
): Uint8Array {
  let total = 0;
  for (const record of records) total += recordLength(record);
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (const record of records) {
    if (
      record.kind === MANIFEST_SWAP ||
      record.kind === MANIFEST_SPLIT ||
      record.kind === MANIFEST_TOPICS ||
      record.kind === MANIFEST_JOURNAL
    ) {
      const length = recordLength(record);
      view.setUint32(at, length, true);
      if (record.kind === MANIFEST_SWAP) encodeSwap(bytes, view, at, record);
      else if (record.kind === MANIFEST_TOPICS) encodeTopics(bytes, view, at, record);
      else if (record.kind === MANIFEST_JOURNAL) {
        view.setUint8(at + 8, MANIFEST_JOURNAL);
        view.setUint8(at + 9, JOURNAL_EVENT_CODES.indexOf(record.event));
        setU64(view, at + 12, record.gen);
        setU64(view, at + 20, record.firstSeq);
      } else encodeSplit(view, at, record.split);
      view.setUint32(at + 4, crc32(bytes.subarray(at + 8, at + length)), true);
      at += length;
      continue;
    }
    const name = nameOf(record);
    const fixed = fixedBytesOf(record);
    const length = fixed + name.length;
    view.setUint32(at, length, true);
    view.setUint8(
      at + 8,
      fixed === PACKED_CRC_FIXED_BYTES
        ? MANIFEST_ADD_PACKED_CRC
        : fixed === PACKED_FIXED_BYTES
          ? MANIFEST_ADD_PACKED
          : record.kind,
    );
    view.setUint16(at + 10, name.length, true);
    if (record.kind === MANIFEST_ADD) {
      const s = record.segment;
      if (s.pack !== undefined) {
        setU64(view, at + 68, s.pack.pack);
        setU64(view, at + 76, s.pack.offset);
        view.setUint32(at + 84, s.pack.indexBytes, true);
        if (s.pack.recordsCrc !== undefined) view.setUint32(at + 88, s.pack.recordsCrc, true);
      }
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
    for (let i = 0; i < name.length; i++) bytes[at + fixed + i] = name.charCodeAt(i);
    view.setUint32(at + 4, crc32(bytes.subarray(at + 8, at + length)), true);
    at += length;
  }
  return bytes;
}

function nameOf(record: NamedRecord): string {
  return record.kind === MANIFEST_ADD
    ? record.segment.partition
    : record.kind === MANIFEST_WATERMARK
      ? record.partition
      : "";
}

/**
 * The result of decoding a manifest body: records, bytes that decoded, and the first problem;
 * `unknownKind` is set when that problem is an intact record (its CRC holds) of a kind this code
 * does not know: a newer build wrote it, and it is neither damage nor a torn tail.
 */
export type ManifestDecode = {
  records: ManifestRecord[];
  validBytes: number;
  problem: string | null;
  unknownKind?: number;
};

/** Decodes records from `bytes` until the end or the first invalid record. */
export function decodeManifestRecords(bytes: Uint8Array, crc32: Crc32): ManifestDecode {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const records: ManifestRecord[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < COMMON_BYTES)
      return { records, validBytes: at, problem: "record cut short" };
    const length = view.getUint32(at, true);
    const kind = view.getUint8(at + 8);
    if (kind < MANIFEST_ADD || kind > KIND_LAST) {
      // Intact (its length and CRC hold) but of a kind this code does not know: a newer build's.
      const intact =
        length >= COMMON_BYTES &&
        bytes.length - at >= length &&
        view.getUint32(at + 4, true) === crc32(bytes.subarray(at + 8, at + length));
      return {
        records,
        validBytes: at,
        problem: `unknown record kind ${kind}`,
        ...(intact ? { unknownKind: kind } : {}),
      };
    }
    if (kind === MANIFEST_SWAP || kind === MANIFEST_TOPICS) {
      // Variable length, and may be shorter than the other kinds' fixed part (a retention's SWAP
      // of a few stores, a file's TOPICS of one short topic).
      const fixed = kind === MANIFEST_SWAP ? SWAP_FIXED_BYTES : TOPICS_FIXED_BYTES;
      if (bytes.length - at < fixed)
        return { records, validBytes: at, problem: "record cut short" };
      if (length < fixed) return { records, validBytes: at, problem: "impossible record length" };
      if (bytes.length - at < length)
        return { records, validBytes: at, problem: "record cut short" };
      if (view.getUint32(at + 4, true) !== crc32(bytes.subarray(at + 8, at + length)))
        return { records, validBytes: at, problem: "checksum mismatch" };
      const decoded =
        kind === MANIFEST_SWAP
          ? decodeSwap(bytes, view, at, at + length)
          : decodeTopics(bytes, view, at, at + length);
      if (typeof decoded === "string") return { records, validBytes: at, problem: decoded };
      records.push(decoded);
      at += length;
      continue;
    }
    if (kind === MANIFEST_JOURNAL) {
      if (length !== JOURNAL_BYTES)
        return { records, validBytes: at, problem: "impossible record length" };
      if (bytes.length - at < length)
        return { records, validBytes: at, problem: "record cut short" };
      if (view.getUint32(at + 4, true) !== crc32(bytes.subarray(at + 8, at + length)))
        return { records, validBytes: at, problem: "checksum mismatch" };
      const event = JOURNAL_EVENT_CODES[view.getUint8(at + 9)];
      if (event === undefined || event === "")
        return { records, validBytes: at, problem: "journal record names an unknown event" };
      records.push({
        kind: MANIFEST_JOURNAL,
        event,
        gen: getU64(view, at + 12),
        firstSeq: getU64(view, at + 20),
      });
      at += length;
      continue;
    }
    if (kind === MANIFEST_SPLIT) {
      if (bytes.length - at < COMMON_BYTES || length !== SPLIT_BYTES)
        return { records, validBytes: at, problem: "impossible record length" };
      if (bytes.length - at < length)
        return { records, validBytes: at, problem: "record cut short" };
      if (view.getUint32(at + 4, true) !== crc32(bytes.subarray(at + 8, at + length)))
        return { records, validBytes: at, problem: "checksum mismatch" };
      const split = decodeSplit(view, at);
      if (typeof split === "string") return { records, validBytes: at, problem: split };
      records.push(split);
      at += length;
      continue;
    }
    if (bytes.length - at < FIXED_BYTES)
      return { records, validBytes: at, problem: "record cut short" };
    const nameBytes = view.getUint16(at + 10, true);
    const fixed =
      kind === MANIFEST_ADD_PACKED_CRC
        ? PACKED_CRC_FIXED_BYTES
        : kind === MANIFEST_ADD_PACKED
          ? PACKED_FIXED_BYTES
          : FIXED_BYTES;
    if (length !== fixed + nameBytes)
      return { records, validBytes: at, problem: "impossible record length" };
    if (bytes.length - at < length) return { records, validBytes: at, problem: "record cut short" };
    if (view.getUint32(at + 4, true) !== crc32(bytes.subarray(at + 8, at + length)))
      return { records, validBytes: at, problem: "checksum mismatch" };
    const name = String.fromCharCode.apply(
      null,
      bytes.subarray(at + fixed, at + length) as unknown as number[],
    );
    if (kind === MANIFEST_ADD || kind === MANIFEST_ADD_PACKED || kind === MANIFEST_ADD_PACKED_CRC) {
      const segment: SegmentMeta = {
        id: getU64(view, at + 12),
        partition: name,
        firstSeq: getU64(view, at + 20),
        lastSeq: getU64(view, at + 28),
        firstTimeUs: getU64(view, at + 36),
        lastTimeUs: getU64(view, at + 44),
        records: getU64(view, at + 52),
        bytes: getU64(view, at + 60),
      };
      if (kind !== MANIFEST_ADD) {
        segment.pack = {
          pack: getU64(view, at + 68),
          offset: getU64(view, at + 76),
          indexBytes: view.getUint32(at + 84, true),
        };
        if (kind === MANIFEST_ADD_PACKED_CRC)
          segment.pack.recordsCrc = view.getUint32(at + 88, true);
      }
      records.push({ kind: MANIFEST_ADD, segment });
    } else if (kind === MANIFEST_REMOVE) {
      records.push({ kind, id: getU64(view, at + 12) });
    } else {
      records.push({ kind: MANIFEST_WATERMARK, partition: name, seq: getU64(view, at + 28) });
    }
    at += length;
  }
  return { records, validBytes: at, problem: null };
}
