/**
 * segment_file: checking a closed segment that is a file of its own, as sorters wrote them
 * before packs (pack_file.ts), so older directories stay readable.
 *
 *   <id>.seg   file header (kind "segment", id, first seq, partition) then records in seq order
 *   <id>.idx   see segment_index.ts
 *
 * `rebuildSegmentIndex` re-derives the index (and the summary the manifest holds) from the
 * records alone, validating every checksum.
 */
import type { Crc32 } from "./crc32.ts";
import type { Disk, DiskFile } from "./disk.ts";
import { decodeFileHeader } from "./file_header.ts";
import { indexPath, segmentPath } from "./layout.ts";
import { recordSeq, recordTime } from "./record.ts";
import { scanRecords } from "./scan.ts";
import { SegmentIndexBuilder, type SegmentMeta } from "./segment_index.ts";

/** Reads the records of segment `id`, checking each, and writes a fresh index: its summary, or why not. */
export async function rebuildSegmentIndex(
  disk: Disk,
  id: number,
  options: { intervalBytes: number; crc32: Crc32 },
): Promise<SegmentMeta | string> {
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
    const scan = await scanRecords(
      file,
      header.bytes,
      options.crc32,
      (_bytes, view, at, _length, position) => {
        const seq = recordSeq(view, at);
        if (seq <= builder.lastSeq || seq < header.firstSeq) return "record out of seq order";
        builder.add(seq, recordTime(view, at), position);
        return undefined;
      },
    );
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
