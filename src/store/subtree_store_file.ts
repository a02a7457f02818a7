/**
 * subtree_store_file: the subtree store file (`segments/<id>.sto`) — the records of a set of topics
 * of ONE partition, in seq order, written by `aria split` — and its pure builder. Its sparse index
 * is an ordinary `.idx` file (segment_index.ts) under the same id, so the reader seeks a subtree
 * store exactly like a segment.
 *
 *   file header (kind "store", id, first seq, name = partition)            H bytes
 *   H+0   u32 crc32 of bytes [H+8, H+T)
 *   H+4   u32 T: topic block bytes (this table included)
 *   H+8   u64 generation (the split that wrote it: the first id it reserved)
 *   H+16  u32 topic count N
 *   H+20  u16 label bytes L (the plan's store id), u16 reserved 0
 *   H+24  label (ASCII)
 *   ...   N × (u16 topic bytes, topic), topics sorted
 *   H+T   records (record.ts), strictly increasing seq, every topic one of the N
 *
 * Does no I/O except `rebuildSubtreeStoreIndex` and `readSubtreeStoreHead`, which take a Disk.
 * Invariant: a subtree store holds at least one record; its topics are one partition's.
 */
import { READ_CHUNK_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { Crc32 } from "./crc32.ts";
import type { Disk, DiskFile } from "./disk.ts";
import { FILE_HEADER_FIXED_BYTES, decodeFileHeader, encodeFileHeader } from "./file_header.ts";
import { indexPath, packPath, segmentPath, subtreeStorePath } from "./layout.ts";
import { getU64, recordSeq, recordTime, setU64 } from "./record.ts";
import { scanRecords } from "./scan.ts";
import { SegmentIndexBuilder, type SegmentMeta } from "./segment_index.ts";

const TOPIC_BLOCK_FIXED_BYTES = 24;

/** A subtree store in force: a segment-like summary plus the topics it holds. */
export type SubtreeStoreMeta = SegmentMeta & {
  /** The plan's store id (e.g. `app~orders`): for people and tools, never for lookups. */
  label: string;
  /** The split that wrote it (its first reserved id); manifest rebuilds keep the newest. */
  generation: number;
  /** Topics held, sorted. */
  topics: readonly string[];
  /** File offset of the first record (after header and topic block). */
  dataStart: number;
};

/** True when `meta` is a subtree store's (a segment's has no topic list). */
export function isSubtreeStore(meta: SegmentMeta | SubtreeStoreMeta): meta is SubtreeStoreMeta {
  return "topics" in meta;
}

/** Path of the file holding the records of a segment (its own, or its pack) or a subtree store. */
export function dataPathOf(meta: SegmentMeta | SubtreeStoreMeta): string {
  if (isSubtreeStore(meta)) return subtreeStorePath(meta.id);
  return meta.pack === undefined ? segmentPath(meta.id) : packPath(meta.pack.pack);
}

/**
 * File offset where the segment's or subtree store's image starts (0 unless packed): add it to
 * image positions.
 */
export function dataBaseOf(meta: SegmentMeta | SubtreeStoreMeta): number {
  return isSubtreeStore(meta) || meta.pack === undefined ? 0 : meta.pack.offset;
}

/** File offsets of the first record and of the end of the last one. */
export function recordSpanOf(meta: SegmentMeta | SubtreeStoreMeta): {
  path: string;
  dataStart: number;
  end: number;
} {
  const base = dataBaseOf(meta);
  const dataStart = isSubtreeStore(meta)
    ? meta.dataStart
    : base + FILE_HEADER_FIXED_BYTES + meta.partition.length;
  return { path: dataPathOf(meta), dataStart, end: base + meta.bytes };
}

/** Where the index of a segment or subtree store lies: file, offset and bytes (-1: the whole file). */
export function indexSpanOf(meta: SegmentMeta | SubtreeStoreMeta): {
  path: string;
  position: number;
  bytes: number;
} {
  if (isSubtreeStore(meta) || meta.pack === undefined)
    return { path: indexPath(meta.id), position: 0, bytes: -1 };
  return {
    path: packPath(meta.pack.pack),
    position: meta.pack.offset + meta.bytes,
    bytes: meta.pack.indexBytes,
  };
}

/** Encodes the file header and topic block of a subtree store. */
export function encodeSubtreeStoreHead(
  head: {
    id: number;
    partition: string;
    firstSeq: number;
    label: string;
    generation: number;
    topics: readonly string[];
  },
  crc32: Crc32,
): Uint8Array {
  const header = encodeFileHeader(
    { kind: "store", id: head.id, firstSeq: head.firstSeq, name: head.partition },
    crc32,
  );
  let blockBytes = TOPIC_BLOCK_FIXED_BYTES + head.label.length;
  for (const topic of head.topics) blockBytes += 2 + topic.length;
  const bytes = new Uint8Array(header.length + blockBytes);
  const view = new DataView(bytes.buffer);
  bytes.set(header);
  const at = header.length;
  view.setUint32(at + 4, blockBytes, true);
  setU64(view, at + 8, head.generation);
  view.setUint32(at + 16, head.topics.length, true);
  view.setUint16(at + 20, head.label.length, true);
  let p = at + TOPIC_BLOCK_FIXED_BYTES;
  p = putAscii(bytes, p, head.label);
  for (const topic of head.topics) {
    view.setUint16(p, topic.length, true);
    p = putAscii(bytes, p + 2, topic);
  }
  view.setUint32(at, crc32(bytes.subarray(at + 8)), true);
  return bytes;
}

function putAscii(bytes: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) bytes[at + i] = text.charCodeAt(i);
  return at + text.length;
}

function ascii(bytes: Uint8Array, from: number, to: number): string {
  return String.fromCharCode.apply(null, bytes.subarray(from, to) as unknown as number[]);
}

/** The decoded head of a subtree store file. */
export type SubtreeStoreHead = {
  id: number;
  partition: string;
  firstSeq: number;
  label: string;
  generation: number;
  topics: string[];
  dataStart: number;
};

/**
 * Decodes a subtree store file's head from its first bytes: the head, "short" (read more), or
 * why it is invalid.
 */
export function decodeSubtreeStoreHead(bytes: Uint8Array, crc32: Crc32): SubtreeStoreHead | string {
  const header = decodeFileHeader(bytes, "store", crc32);
  if (typeof header === "string") return header;
  const at = header.bytes;
  if (bytes.length < at + TOPIC_BLOCK_FIXED_BYTES) return "short";
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const blockBytes = view.getUint32(at + 4, true);
  if (blockBytes < TOPIC_BLOCK_FIXED_BYTES) return "topic block length impossible";
  if (bytes.length < at + blockBytes) return "short";
  if (view.getUint32(at, true) !== crc32(bytes.subarray(at + 8, at + blockBytes)))
    return "topic block checksum mismatch";
  const count = view.getUint32(at + 16, true);
  const labelBytes = view.getUint16(at + 20, true);
  let p = at + TOPIC_BLOCK_FIXED_BYTES;
  const label = ascii(bytes, p, p + labelBytes);
  p += labelBytes;
  const topics: string[] = [];
  for (let i = 0; i < count; i++) {
    if (p + 2 > at + blockBytes) return "topic block cut short";
    const length = view.getUint16(p, true);
    if (p + 2 + length > at + blockBytes) return "topic block cut short";
    topics.push(ascii(bytes, p + 2, p + 2 + length));
    p += 2 + length;
  }
  if (p !== at + blockBytes) return "topic block length mismatch";
  return {
    id: header.id,
    partition: header.name,
    firstSeq: header.firstSeq,
    label,
    generation: getU64(view, at + 8),
    topics,
    dataStart: at + blockBytes,
  };
}

/** Reads and decodes the head of subtree store `id`. */
export async function readSubtreeStoreHead(
  file: DiskFile,
  crc32: Crc32,
): Promise<SubtreeStoreHead | string> {
  for (let probe = 4096; ; probe *= 4) {
    const bytes = new Uint8Array(Math.min(probe, await file.size()));
    let filled = 0;
    while (filled < bytes.length) {
      const read = await file.read(filled, bytes.subarray(filled));
      if (read === 0) break;
      filled += read;
    }
    const head = decodeSubtreeStoreHead(bytes.subarray(0, filled), crc32);
    if (head !== "short") return head;
    if (filled < bytes.length || bytes.length === (await file.size()))
      return "store head cut short";
  }
}

/**
 * Builds one subtree store file in memory, chunk by chunk: `add` records in seq order, `drain` the
 * full chunks to write at `written`, `finish` for the last bytes, the index and the summary. Pure.
 *
 *   [head][records ...............]   bytes handed out by drain()/finish(), in file order
 */
export class SubtreeStoreBuilder {
  private readonly index: SegmentIndexBuilder;
  private chunk: Uint8Array;
  private chunkBytes = 0;
  private full: Uint8Array[] = [];
  private headBytes = -1;
  private firstSeq = 0;
  /** File bytes so far (head + records). */
  position = 0;

  constructor(
    readonly head: {
      id: number;
      partition: string;
      label: string;
      generation: number;
      topics: readonly string[];
    },
    private readonly options: { intervalBytes: number; crc32: Crc32; chunkBytes?: number },
  ) {
    this.index = new SegmentIndexBuilder(options.intervalBytes);
    this.chunk = new Uint8Array(options.chunkBytes ?? READ_CHUNK_BYTES_MAX);
  }

  /** Records added. */
  get records(): number {
    return this.index.records;
  }

  /** Appends the checked record bytes[at, at+length); the bytes are copied. */
  add(bytes: Uint8Array, view: DataView, at: number, length: number): void {
    const seq = recordSeq(view, at);
    if (this.headBytes < 0) {
      // The head names the first seq, known only now.
      this.firstSeq = seq;
      const head = encodeSubtreeStoreHead({ ...this.head, firstSeq: seq }, this.options.crc32);
      this.headBytes = head.length;
      this.put(head, 0, head.length);
      this.position = head.length;
    }
    this.index.add(seq, recordTime(view, at), this.position);
    this.position += length;
    this.put(bytes, at, length);
  }

  private put(bytes: Uint8Array, at: number, length: number): void {
    let done = 0;
    while (done < length) {
      const n = Math.min(length - done, this.chunk.length - this.chunkBytes);
      this.chunk.set(bytes.subarray(at + done, at + done + n), this.chunkBytes);
      this.chunkBytes += n;
      done += n;
      if (this.chunkBytes === this.chunk.length) {
        this.full.push(this.chunk);
        this.chunk = new Uint8Array(this.chunk.length);
        this.chunkBytes = 0;
      }
    }
  }

  /** Full chunks not yet handed out, in file order (the caller writes them, then drops them). */
  drain(): Uint8Array[] {
    const out = this.full;
    this.full = [];
    return out;
  }

  /** The remaining chunks, the index file's bytes and the subtree store's summary. */
  finish(): { chunks: Uint8Array[]; index: Uint8Array; meta: SubtreeStoreMeta } {
    assert(this.index.records > 0, "subtree_store_file: a store holds at least one record");
    const chunks = this.drain();
    if (this.chunkBytes > 0) chunks.push(this.chunk.subarray(0, this.chunkBytes));
    this.chunkBytes = 0;
    const segment = this.index.meta(
      this.head.id,
      this.head.partition,
      this.firstSeq,
      this.position,
    );
    const meta: SubtreeStoreMeta = {
      ...segment,
      label: this.head.label,
      generation: this.head.generation,
      topics: this.head.topics,
      dataStart: this.headBytes,
    };
    return { chunks, index: this.index.encode(segment, this.options.crc32), meta };
  }
}

/** Reads subtree store `id`, checking every record, and writes a fresh index: its summary, or why not. */
export async function rebuildSubtreeStoreIndex(
  disk: Disk,
  id: number,
  options: { intervalBytes: number; crc32: Crc32 },
): Promise<SubtreeStoreMeta | string> {
  let file: DiskFile;
  try {
    file = await disk.open(subtreeStorePath(id), "read");
  } catch (error) {
    return `cannot open: ${(error as Error).message}`;
  }
  try {
    const head = await readSubtreeStoreHead(file, options.crc32);
    if (typeof head === "string") return `${head} at offset 0`;
    if (head.id !== id) return `header names store ${head.id} at offset 16`;
    const topics = new Set(head.topics);
    const builder = new SegmentIndexBuilder(options.intervalBytes);
    const decoder = new TextDecoder();
    const scan = await scanRecords(
      file,
      head.dataStart,
      options.crc32,
      (bytes, view, at, _length, position) => {
        const seq = recordSeq(view, at);
        if (seq <= builder.lastSeq || seq < head.firstSeq) return "record out of seq order";
        const topicBytes = view.getUint16(at + 24, true);
        if (!topics.has(decoder.decode(bytes.subarray(at + 32, at + 32 + topicBytes))))
          return "record of a topic the store does not hold";
        builder.add(seq, recordTime(view, at), position);
        return undefined;
      },
    );
    if (scan.problem !== null) return `${scan.problem} at offset ${scan.end}`;
    if (builder.records === 0) return "store holds no records";
    const segment = builder.meta(id, head.partition, head.firstSeq, scan.end);
    const indexFile = await disk.open(indexPath(id), "create");
    try {
      await indexFile.write(0, builder.encode(segment, options.crc32));
      await indexFile.sync();
    } finally {
      await indexFile.close();
    }
    return {
      ...segment,
      label: head.label,
      generation: head.generation,
      topics: head.topics,
      dataStart: head.dataStart,
    };
  } finally {
    await file.close();
  }
}
