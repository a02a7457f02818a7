/**
 * rewrite_files: one split task — one partition — over a Disk: read the partition's old stores
 * and segments in chunks (every record CRC-checked), merge and route them (rewrite.ts), write each
 * new store file and its index, fsync both. Runs in a worker thread (src/server/split_worker.ts
 * passes a BunDisk) or in-process (tests pass a SimDisk). Never touches the manifest: the main thread
 * switches once every task is done.
 *
 * Output files are created on the first chunk, so a store that received no record leaves no file.
 */
import { READ_CHUNK_BYTES_MAX } from "../constants.ts";
import type { Crc32, Disk, DiskFile, SubtreeStoreMeta, TopicCount } from "../store/mod.ts";
import {
  checkRecord,
  recordProblem,
  recordSeq,
  recordTopic,
  recordTopicEquals,
  RECORD_INCOMPLETE,
} from "../store/record.ts";
import { scanRecords } from "../store/scan.ts";
import type { VolumeRow } from "./volume_table.ts";
import { indexPath, subtreeStorePath } from "../store/layout.ts";
import {
  mergeSources,
  PartitionRewriter,
  type RecordSource,
  type SubtreeStoreAssignment,
} from "./rewrite.ts";

/** A run of records in a file: path, offset of the first record, offset of the end of the last (a file of its own, or an image in a pack). */
export type SourceFile = { path: string; dataStart: number; bytes: number };

/** One partition to rewrite (structured-clone safe: it crosses to a worker). */
export type SplitTask = {
  partition: string;
  generation: number;
  /** Seq-ordered runs: each old store alone, and the segments one after another. */
  sources: SourceFile[][];
  subtrees: SubtreeStoreAssignment[];
  intervalBytes: number;
};

/** What a task wrote: each store's summary and its per-topic counts (messages, record bytes). */
export type SplitTaskResult = {
  partition: string;
  metas: SubtreeStoreMeta[];
  topics: { id: number; topics: TopicCount[] }[];
  bytesRead: number;
  bytesWritten: number;
};

/** Reads a chain of record files front to back in chunks. */
class FileChainSource implements RecordSource {
  bytes = new Uint8Array(0);
  view = new DataView(this.bytes.buffer);
  at = 0;
  length = 0;
  private filled = 0;
  private fileIndex = -1;
  private file: DiskFile | null = null;
  /** File offset of bytes[0]. */
  private bufferStart = 0;
  private state: "need" | "record" | "end" = "need";
  bytesRead = 0;

  constructor(
    private readonly disk: Disk,
    private readonly files: readonly SourceFile[],
    private readonly crc32: Crc32,
    private readonly chunkBytes: number,
  ) {}

  seq(): number {
    return this.state === "record"
      ? recordSeq(this.view, this.at)
      : this.state === "end"
        ? Infinity
        : Number.NaN;
  }

  next(): void {
    this.at += this.length;
    this.locate();
  }

  private locate(): void {
    const length = checkRecord(this.bytes, this.view, this.at, this.filled, this.crc32);
    if (length > 0) {
      this.length = length;
      this.state = "record";
      return;
    }
    const current = this.files[this.fileIndex];
    if (length !== RECORD_INCOMPLETE)
      throw new Error(
        `Cannot split "${current.path}": ${recordProblem(length)} at offset ${this.bufferStart + this.at}`,
      );
    this.state = this.bufferStart + this.at >= current.bytes ? "end" : "need";
    if (this.state === "end" && this.fileIndex + 1 < this.files.length) this.state = "need";
  }

  async fill(): Promise<void> {
    let current = this.files[this.fileIndex];
    if (this.fileIndex < 0 || this.bufferStart + this.at >= current.bytes) {
      await this.file?.close();
      this.file = null;
      this.fileIndex++;
      if (this.fileIndex >= this.files.length) {
        this.state = "end";
        return;
      }
      current = this.files[this.fileIndex];
      this.file = await this.disk.open(current.path, "read");
      this.bufferStart = current.dataStart;
      this.at = 0;
      this.filled = 0;
    }
    // Keep the partial record, read the next chunk after it (grow for a record larger than it).
    const kept = this.filled - this.at;
    const need = kept >= 4 ? this.view.getUint32(this.at, true) : 0;
    const size = Math.max(this.chunkBytes, need);
    if (this.bytes.length < size) {
      const bigger = new Uint8Array(size);
      bigger.set(this.bytes.subarray(this.at, this.filled));
      this.bytes = bigger;
      this.view = new DataView(bigger.buffer);
    } else {
      this.bytes.copyWithin(0, this.at, this.filled);
    }
    this.bufferStart += this.at;
    this.at = 0;
    this.filled = kept;
    const want = Math.min(this.bytes.length - kept, current.bytes - (this.bufferStart + kept));
    let got = 0;
    while (got < want) {
      const read = await (this.file as DiskFile).read(
        this.bufferStart + kept + got,
        this.bytes.subarray(kept + got, kept + want),
      );
      if (read === 0)
        throw new Error(
          `Cannot split "${current.path}": file ends at ${this.bufferStart + kept + got}, expected ${current.bytes} bytes`,
        );
      got += read;
    }
    this.filled += got;
    this.bytesRead += got;
    if (this.filled === 0) {
      this.state = this.fileIndex + 1 < this.files.length ? "need" : "end";
      return;
    }
    this.locate();
    if (
      this.state === "need" &&
      got === 0 &&
      this.bufferStart + this.filled >= current.bytes &&
      kept > 0
    ) {
      throw new Error(
        `Cannot split "${current.path}": record cut short at offset ${this.bufferStart}`,
      );
    }
  }

  async close(): Promise<void> {
    await this.file?.close().catch(() => {});
    this.file = null;
  }
}

/** Runs one split task on `disk`: new store files and indexes written and fsynced. */
export async function runSplitTask(
  disk: Disk,
  task: SplitTask,
  options: { crc32: Crc32; chunkBytes?: number },
): Promise<SplitTaskResult> {
  const chunkBytes = options.chunkBytes ?? READ_CHUNK_BYTES_MAX;
  const sources = task.sources
    .filter((files) => files.length > 0)
    .map((files) => new FileChainSource(disk, files, options.crc32, chunkBytes));
  const rewriter = new PartitionRewriter(task.partition, task.subtrees, {
    generation: task.generation,
    intervalBytes: task.intervalBytes,
    crc32: options.crc32,
    chunkBytes,
  });
  const outputs: (DiskFile | null)[] = task.subtrees.map(() => null);
  const written = new Float64Array(task.subtrees.length);
  let bytesWritten = 0;
  const write = async (store: number, chunks: Uint8Array[]) => {
    if (chunks.length === 0) return;
    let file = outputs[store];
    if (file === null) {
      file = await disk.open(subtreeStorePath(task.subtrees[store].id), "create");
      outputs[store] = file;
    }
    for (const chunk of chunks) {
      await file.write(written[store], chunk);
      written[store] += chunk.length;
      bytesWritten += chunk.length;
    }
  };
  const results: SubtreeStoreMeta[] = [];
  const topics: { id: number; topics: TopicCount[] }[] = [];
  try {
    await mergeSources(sources, rewriter, (store) => {
      const chunks = rewriter.builders[store].drain();
      return chunks.length === 0 ? undefined : write(store, chunks);
    });
    for (let store = 0; store < task.subtrees.length; store++) {
      const builder = rewriter.builders[store];
      if (builder.records === 0) continue;
      const { chunks, index, meta } = builder.finish();
      await write(store, chunks);
      const file = outputs[store] as DiskFile;
      await file.sync();
      // Closed as soon as it is whole: a partition planned into thousands of stores (most too
      // small to be written before the end) held them all open at once, past the file limit.
      outputs[store] = null;
      await file.close();
      const indexFile = await disk.open(indexPath(meta.id), "create");
      try {
        await indexFile.write(0, index);
        await indexFile.sync();
      } finally {
        await indexFile.close();
      }
      bytesWritten += index.length;
      results.push(meta);
      topics.push({ id: meta.id, topics: [...rewriter.counts[store].values()] });
    }
  } finally {
    for (const source of sources) await source.close();
    for (const file of outputs) await file?.close().catch(() => {});
  }
  const bytesRead = sources.reduce((sum, source) => sum + source.bytesRead, 0);
  return { partition: task.partition, metas: results, topics, bytesRead, bytesWritten };
}

/** Per-topic record bytes and counts of a partition's files (every record checked). */
export async function runMeasureTask(
  disk: Disk,
  task: { partition: string; files: SourceFile[] },
  options: { crc32: Crc32 },
): Promise<{ partition: string; rows: VolumeRow[]; bytesRead: number }> {
  const volumes = new Map<string, { bytes: number; messages: number }>();
  let bytesRead = 0;
  let lastTopic = "";
  let last = { bytes: 0, messages: 0 };
  for (const source of task.files) {
    const file = await disk.open(source.path, "read");
    try {
      const scan = await scanRecords(
        file,
        source.dataStart,
        options.crc32,
        (bytes, view, at, length) => {
          if (!recordTopicEquals(bytes, view, at, lastTopic)) {
            lastTopic = recordTopic(bytes, view, at);
            let entry = volumes.get(lastTopic);
            if (entry === undefined) volumes.set(lastTopic, (entry = { bytes: 0, messages: 0 }));
            last = entry;
          }
          last.bytes += length;
          last.messages++;
          return undefined;
        },
        { end: source.bytes },
      );
      if (scan.problem !== null || scan.end !== source.bytes)
        throw new Error(
          `Cannot measure "${source.path}": ${scan.problem ?? "file size differs"} at offset ${scan.end}`,
        );
      bytesRead += scan.end - source.dataStart;
    } finally {
      await file.close();
    }
  }
  const rows = [...volumes].map(([topic, volume]) => ({
    topic,
    bytes: volume.bytes,
    messages: volume.messages,
  }));
  return { partition: task.partition, rows, bytesRead };
}
