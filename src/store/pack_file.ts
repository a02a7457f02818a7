/**
 * pack_file: one sorter batch's closed segments in one file (`segments/<id>.pak`), and the scan
 * that finds them again without the manifest.
 *
 *   file header (kind "pack", id = pack id, first seq = the first segment's, name "")
 *   image 1:  segment file header (kind "segment", segment id, first seq, partition), records
 *             index image (kind "index": segment_index.ts), positions relative to the image
 *   image 2:  …
 *
 * An image is byte for byte what a `.seg` file and its `.idx` would hold, so the reader, the
 * split and index rebuilds treat a packed segment as that file shifted by its offset
 * (`SegmentMeta.pack`). Packs exist because a file per segment made a 10,000-partition sort
 * create, write and fsync 20,000 files per 64 MiB journal, and a whole-stream read open 50,000
 * (docs/storage.md). A pack is written whole, then synced; never modified after; deleted once no
 * segment in force lies in it.
 */
import { assert } from "../stdx/assert.ts";
import { copyBytes } from "../stdx/bytes.ts";
import type { Crc32 } from "./crc32.ts";
import { type Disk, type DiskFile, readFully } from "./disk.ts";
import { decodeFileHeader, encodeFileHeader, fileMagic } from "./file_header.ts";
import { packPath } from "./layout.ts";
import type { PartitionLog } from "./partition_log.ts";
import { recordSeq, recordTime } from "./record.ts";
import { scanRecords } from "./scan.ts";
import {
  decodeSegmentIndex,
  SegmentIndexBuilder,
  type SegmentMeta,
  segmentIndexBytes,
} from "./segment_index.ts";

/** Bytes a pack writer gathers before one write (two such chunks: one filling while one is written). */
const PACK_CHUNK_BYTES = 4 * 1024 * 1024;
/** A probe large enough for any file header (fixed part + the longest partition name). */
const HEADER_PROBE_BYTES = 36 + 256;

/** The segment being written: where its image starts, its index so far, the CRC-32 of its records so far. */
type OpenImage = {
  id: number;
  partition: string;
  firstSeq: number;
  start: number;
  index: SegmentIndexBuilder;
  recordsCrc: number;
};

/**
 * Writes one pack: `begin` a segment, `addPending` its records in seq order, `end` it (its index
 * image follows), …, `finish`. Output is gathered in chunks; a full chunk is written while the
 * next fills, so the copy and the write overlap.
 */
export class PackWriter {
  private chunk: Uint8Array;
  private spare: Uint8Array | null = null;
  private chunkBytes = 0;
  /** File offset where `chunk` starts; invariant: position = written + chunkBytes. */
  private written = 0;
  private position = 0;
  private writing: Promise<void> | null = null;
  private image: OpenImage | null = null;

  private constructor(
    private readonly file: DiskFile,
    readonly id: number,
    private readonly options: { intervalBytes: number; crc32: Crc32 },
    expectedBytes: number,
  ) {
    this.chunk = new Uint8Array(Math.min(PACK_CHUNK_BYTES, Math.max(64 * 1024, expectedBytes)));
  }

  /** Creates pack `id`; `expectedBytes` (the records to come) sizes its buffers. */
  static async create(
    disk: Disk,
    options: {
      id: number;
      firstSeq: number;
      intervalBytes: number;
      crc32: Crc32;
      expectedBytes: number;
    },
  ): Promise<PackWriter> {
    const file = await disk.open(packPath(options.id), "create");
    const writer = new PackWriter(file, options.id, options, options.expectedBytes);
    writer.put(
      encodeFileHeader(
        { kind: "pack", id: options.id, firstSeq: options.firstSeq, name: "" },
        options.crc32,
      ),
    );
    return writer;
  }

  /** Starts the image of segment `id` of `partition`, whose first record has `firstSeq`. */
  begin(id: number, partition: string, firstSeq: number): Promise<void> | undefined {
    assert(this.image === null, "pack_file: a segment is already open");
    this.image = {
      id,
      partition,
      firstSeq,
      start: this.position,
      index: new SegmentIndexBuilder(this.options.intervalBytes),
      recordsCrc: 0,
    };
    return this.put(
      encodeFileHeader({ kind: "segment", id, firstSeq, name: partition }, this.options.crc32),
    );
  }

  /**
   * Appends pending records [first, end) of `log`, which lie back to back in `bytes` from `at`,
   * copied at once: one copy per run, not per record. Their seqs, times and positions come from
   * the log's in-memory entries, not decoded again from the record bytes (DataView reads per
   * record were most of the sorter's time with small messages). Returns a promise only when a
   * chunk had to be written out first: await it before reusing `bytes` (most runs just land in
   * the chunk, and an await per run would cost the sorter a microtask each).
   */
  addPending(
    bytes: Uint8Array,
    at: number,
    log: PartitionLog,
    first: number,
    end: number,
  ): Promise<void> | undefined {
    const image = this.image;
    assert(image !== null, "pack_file: records outside a segment");
    const base = log.pendingPosition(first);
    const offset = this.position - image.start;
    for (let r = first; r < end; r++)
      image.index.add(
        log.pendingSeq(r),
        log.pendingTime(r),
        offset + (log.pendingPosition(r) - base),
      );
    const length = log.pendingPosition(end - 1) + log.pendingLength(end - 1) - base;
    image.recordsCrc = this.options.crc32(bytes.subarray(at, at + length), image.recordsCrc);
    return this.putRange(bytes, at, length);
  }

  /**
   * Appends the checked record bytes[at, at + length) (copied), its seq past the image's last:
   * one record at a time, for a repair rewriting the intact records of a damaged file.
   */
  addRecord(
    bytes: Uint8Array,
    view: DataView,
    at: number,
    length: number,
  ): Promise<void> | undefined {
    const image = this.image;
    assert(image !== null, "pack_file: records outside a segment");
    image.index.add(recordSeq(view, at), recordTime(view, at), this.position - image.start);
    image.recordsCrc = this.options.crc32(bytes.subarray(at, at + length), image.recordsCrc);
    return this.putRange(bytes, at, length);
  }

  /** Ends the open segment: appends its index image; its summary, placed in this pack. */
  async end(): Promise<SegmentMeta> {
    const image = this.image;
    assert(
      image !== null && image.index.records > 0,
      "pack_file: a segment holds at least one record",
    );
    this.image = null;
    const meta = image.index.meta(
      image.id,
      image.partition,
      image.firstSeq,
      this.position - image.start,
    );
    const index = image.index.encode(meta, this.options.crc32);
    meta.pack = {
      pack: this.id,
      offset: image.start,
      indexBytes: index.length,
      recordsCrc: image.recordsCrc,
    };
    await this.put(index);
    return meta;
  }

  /** Writes what is left; the file stays open and unsynced (the caller syncs and closes it). */
  async finish(): Promise<DiskFile> {
    assert(this.image === null, "pack_file: finish with a segment open");
    await this.flush();
    await this.writing;
    return this.file;
  }

  /** Closes the file without finishing (the pack is abandoned: an orphan the next open removes). */
  async abandon(): Promise<void> {
    await this.writing?.catch(() => {});
    await this.file.close().catch(() => {});
  }

  private put(bytes: Uint8Array): Promise<void> | undefined {
    return this.putRange(bytes, 0, bytes.length);
  }

  private putRange(bytes: Uint8Array, at: number, length: number): Promise<void> | undefined {
    if (this.chunkBytes + length > this.chunk.length) return this.putAfterFlush(bytes, at, length);
    copyBytes(this.chunk, this.chunkBytes, bytes, at, length);
    this.chunkBytes += length;
    this.position += length;
    return undefined;
  }

  private async putAfterFlush(bytes: Uint8Array, at: number, length: number): Promise<void> {
    await this.flush();
    if (length > this.chunk.length) {
      // Larger than a chunk: written as it is, after the chunk before it.
      await this.writing;
      this.writing = null;
      await this.file.write(this.written, bytes.subarray(at, at + length));
      this.written += length;
      this.position += length;
      return;
    }
    copyBytes(this.chunk, 0, bytes, at, length);
    this.chunkBytes = length;
    this.position += length;
  }

  /** Starts writing the chunk (after the previous write settles) and continues into the other one. */
  private async flush(): Promise<void> {
    if (this.chunkBytes === 0) return;
    await this.writing;
    this.writing = this.file.write(this.written, this.chunk.subarray(0, this.chunkBytes));
    this.writing.catch(() => {}); // awaited (and thrown) by the next flush or finish
    this.written += this.chunkBytes;
    const next = this.spare ?? new Uint8Array(this.chunk.length);
    this.spare = this.chunk;
    this.chunk = next;
    this.chunkBytes = 0;
  }
}

/** What a scan of pack `id` found: its segments in file order and, if it stopped early, where and why. */
export type PackScan = { segments: SegmentMeta[]; problem: string | null; offset: number };

/**
 * Reads pack `id` image by image, checking every record and index image, for a manifest
 * rebuilt from the files: the segments it holds, each placed in the pack.
 */
export async function scanPack(
  disk: Disk,
  id: number,
  options: { intervalBytes: number; crc32: Crc32 },
): Promise<PackScan> {
  const path = packPath(id);
  const segments: SegmentMeta[] = [];
  let file: DiskFile;
  try {
    file = await disk.open(path, "read");
  } catch (error) {
    return { segments, problem: `cannot open: ${(error as Error).message}`, offset: 0 };
  }
  try {
    const fileBytes = await file.size();
    const head = await readAt(file, 0, HEADER_PROBE_BYTES);
    const header = decodeFileHeader(head, "pack", options.crc32);
    if (typeof header === "string") return { segments, problem: header, offset: 0 };
    if (header.id !== id)
      return { segments, problem: `header names pack ${header.id}`, offset: 16 };
    let at = header.bytes;
    while (at < fileBytes) {
      const found = await scanImage(file, id, at, options);
      if (typeof found === "string") return { segments, problem: found, offset: at };
      segments.push(found.meta);
      at += found.meta.bytes + found.indexBytes;
    }
    return { segments, problem: null, offset: at };
  } finally {
    await file.close();
  }
}

/** Checks the image at `start` of pack `pack`: its records, then its index image; the segment (placed) and its index image's bytes, or why not. */
async function scanImage(
  file: DiskFile,
  pack: number,
  start: number,
  options: { intervalBytes: number; crc32: Crc32 },
): Promise<{ meta: SegmentMeta; indexBytes: number } | string> {
  const header = decodeFileHeader(
    await readAt(file, start, HEADER_PROBE_BYTES),
    "segment",
    options.crc32,
  );
  if (typeof header === "string") return header;
  const builder = new SegmentIndexBuilder(options.intervalBytes);
  let recordsCrc = 0;
  const scan = await scanRecords(
    file,
    start + header.bytes,
    options.crc32,
    (bytes, view, at, length, position) => {
      const seq = recordSeq(view, at);
      if (seq <= builder.lastSeq || seq < header.firstSeq) return "record out of seq order";
      builder.add(seq, recordTime(view, at), position - start);
      recordsCrc = options.crc32(bytes.subarray(at, at + length), recordsCrc);
      return undefined;
    },
    { stopMagic: fileMagic("index") },
  );
  if (scan.problem !== null) return `${scan.problem} at offset ${scan.end}`;
  if (builder.records === 0) return "segment image holds no records";
  const meta = builder.meta(header.id, header.name, header.firstSeq, scan.end - start);
  // The index image: its length from its header and entry count, then checked whole.
  const indexHead = await readAt(file, scan.end, HEADER_PROBE_BYTES + 8);
  const indexHeader = decodeFileHeader(indexHead, "index", options.crc32);
  if (typeof indexHeader === "string") return `${indexHeader} at offset ${scan.end}`;
  if (indexHead.length < indexHeader.bytes + 8)
    return `index image cut short at offset ${scan.end}`;
  const entries = new DataView(indexHead.buffer, indexHead.byteOffset).getUint32(
    indexHeader.bytes + 4,
    true,
  );
  const indexBytes = segmentIndexBytes(indexHeader.bytes, entries);
  const index = decodeSegmentIndex(await readAt(file, scan.end, indexBytes), options.crc32);
  if (typeof index === "string") return `${index} at offset ${scan.end}`;
  if (
    index.meta.id !== meta.id ||
    index.meta.lastSeq !== meta.lastSeq ||
    index.meta.records !== meta.records ||
    index.meta.bytes !== meta.bytes
  ) {
    return `index image does not match its segment at offset ${scan.end}`;
  }
  meta.pack = { pack, offset: start, indexBytes, recordsCrc };
  return { meta, indexBytes };
}

/** Up to `bytes` bytes of `file` at `position` (fewer at the end of the file). */
async function readAt(file: DiskFile, position: number, bytes: number): Promise<Uint8Array> {
  const into = new Uint8Array(bytes);
  return into.subarray(0, await readFully(file, position, into));
}
