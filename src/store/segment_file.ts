/**
 * segment_file: writing one closed segment (records + its index) and checking one on disk.
 *
 *   <id>.seg   file header (kind "segment", id, first seq, partition) then records in seq order
 *   <id>.idx   see segment_index.ts
 *
 * A segment is written whole by SegmentWriter, which buffers output in chunks, then synced; it is
 * never modified after. `rebuildSegmentIndex` re-derives the index (and the summary the manifest
 * holds) from the records alone, validating every checksum.
 */
import { READ_CHUNK_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { copyBytes } from "../stdx/bytes.ts";
import type { Crc32 } from "./crc32.ts";
import type { Disk, DiskFile } from "./disk.ts";
import { decodeFileHeader, encodeFileHeader } from "./file_header.ts";
import { indexPath, segmentPath } from "./layout.ts";
import type { PartitionLog } from "./partition_log.ts";
import { recordSeq, recordTime } from "./record.ts";
import { scanRecords } from "./scan.ts";
import { SegmentIndexBuilder, type SegmentMeta } from "./segment_index.ts";

/** Writes one segment file and its index from records handed over in seq order. */
export class SegmentWriter {
  private readonly index: SegmentIndexBuilder;
  private readonly chunk: Uint8Array;
  private chunkBytes = 0;
  /** File offset where `chunk` starts; invariant: position = written + chunkBytes. */
  private written = 0;
  private position = 0;

  private constructor(
    private readonly file: DiskFile,
    readonly id: number,
    readonly partition: string,
    readonly firstSeq: number,
    options: { intervalBytes: number; crc32: Crc32; expectedBytes: number },
    private readonly crc32: Crc32,
  ) {
    this.index = new SegmentIndexBuilder(options.intervalBytes);
    const header = encodeFileHeader({ kind: "segment", id, firstSeq, name: partition }, crc32);
    this.chunk = new Uint8Array(Math.min(READ_CHUNK_BYTES_MAX, Math.max(4096, header.length + options.expectedBytes)));
    this.chunk.set(header);
    this.chunkBytes = header.length;
    this.position = header.length;
  }

  /** Creates segment `id` of `partition`, starting at `firstSeq`; `expectedBytes` sizes its buffer. */
  static async create(
    disk: Disk,
    options: { id: number; partition: string; firstSeq: number; intervalBytes: number; crc32: Crc32; expectedBytes: number },
  ): Promise<SegmentWriter> {
    const file = await disk.open(segmentPath(options.id), "create");
    return new SegmentWriter(file, options.id, options.partition, options.firstSeq, options, options.crc32);
  }

  /**
   * Appends pending records [first, end) of `log`, which lie back to back in `bytes` from `at`,
   * copied at once: one copy per run, not per record. Their seqs, times and positions come from
   * the log's in-memory entries, not decoded again from the record bytes (DataView reads per
   * record were most of the sorter's time with small messages). Returns a promise only when
   * the chunk had to be written out: await it before reusing `bytes`. Most runs just land in
   * the chunk, and an await per run would cost the sorter a microtask each.
   */
  addPending(bytes: Uint8Array, at: number, log: PartitionLog, first: number, end: number): Promise<void> | undefined {
    const base = log.pendingPosition(first);
    for (let r = first; r < end; r++) this.index.add(log.pendingSeq(r), log.pendingTime(r), this.position + (log.pendingPosition(r) - base));
    return this.addBytes(bytes, at, log.pendingPosition(end - 1) + log.pendingLength(end - 1) - base);
  }

  private addBytes(bytes: Uint8Array, at: number, length: number): Promise<void> | undefined {
    this.position += length;
    if (this.chunkBytes + length > this.chunk.length) return this.addAfterFlush(bytes, at, length);
    copyBytes(this.chunk, this.chunkBytes, bytes, at, length);
    this.chunkBytes += length;
    return undefined;
  }

  private async addAfterFlush(bytes: Uint8Array, at: number, length: number): Promise<void> {
    await this.flushChunk();
    if (length > this.chunk.length) {
      await this.file.write(this.written, bytes.subarray(at, at + length));
      this.written += length;
      return;
    }
    this.chunk.set(bytes.subarray(at, at + length), this.chunkBytes);
    this.chunkBytes += length;
  }

  /** Writes the rest and the index, syncs neither: returns the summary and both open files. */
  async finish(disk: Disk): Promise<{ meta: SegmentMeta; indexFile: DiskFile; segmentFile: DiskFile }> {
    await this.flushChunk();
    assert(this.index.records > 0, "segment_file: a segment holds at least one record");
    const meta = this.index.meta(this.id, this.partition, this.firstSeq, this.position);
    const indexFile = await disk.open(indexPath(this.id), "create");
    try {
      await indexFile.write(0, this.index.encode(meta, this.crc32));
    } catch (error) {
      await indexFile.close().catch(() => {});
      throw error;
    }
    return { meta, indexFile, segmentFile: this.file };
  }

  /** Closes the segment file without finishing (the segment is abandoned). */
  async abandon(): Promise<void> {
    await this.file.close().catch(() => {});
  }

  private async flushChunk(): Promise<void> {
    if (this.chunkBytes === 0) return;
    await this.file.write(this.written, this.chunk.subarray(0, this.chunkBytes));
    this.written += this.chunkBytes;
    this.chunkBytes = 0;
  }
}

/** Reads the records of segment `id`, checking each, and writes a fresh index: its summary, or why not. */
export async function rebuildSegmentIndex(disk: Disk, id: number, options: { intervalBytes: number; crc32: Crc32 }): Promise<SegmentMeta | string> {
  const path = segmentPath(id);
  let file: DiskFile;
  try {
    file = await disk.open(path, "read");
  } catch (error) {
    return `cannot open: ${(error as Error).message}`;
  }
  try {
    const head = new Uint8Array(36 + 256);
    const read = await file.read(0, head);
    const header = decodeFileHeader(head.subarray(0, read), "segment", options.crc32);
    if (typeof header === "string") return `${header} at offset 0`;
    if (header.id !== id) return `header names segment ${header.id} at offset 16`;
    const builder = new SegmentIndexBuilder(options.intervalBytes);
    const scan = await scanRecords(file, header.bytes, options.crc32, (_bytes, view, at, _length, position) => {
      const seq = recordSeq(view, at);
      if (seq <= builder.lastSeq || seq < header.firstSeq) return "record out of seq order";
      builder.add(seq, recordTime(view, at), position);
      return undefined;
    });
    if (scan.problem !== null) return `${scan.problem} at offset ${scan.end}`;
    if (builder.records === 0) return "segment holds no records";
    const meta = builder.meta(id, header.name, header.firstSeq, scan.end);
    const indexFile = await disk.open(indexPath(id), "create");
    try {
      await indexFile.write(0, builder.encode(meta, options.crc32));
      await indexFile.sync();
    } finally {
      await indexFile.close();
    }
    return meta;
  } finally {
    await file.close();
  }
}
