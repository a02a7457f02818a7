/**
 * lane_read_ahead: when a lane reads ahead, and what it would take from a span read — the middle
 * layer of a lane (lane_buffer → lane_read_ahead → lane).
 *
 *   batch start: part.lowOnData()? ──▶ spanWant() regions ──▶ span_read.ts (with other lanes)
 *                          └──▶ topUp(): a read of its own, concurrent with the others
 *
 * (`part`: the lane's partition read.) A read at batch start runs beside every other partition
 * read's; a read inside the merge is waited for alone (queue depth 1). So a lane whose head nears
 * the end of its bytes, or whose next packed image can be read with its neighbours', asks at batch
 * start. Does not perform span reads (span_read.ts) nor walk records (lane.ts). Invariant: a lane
 * has at most one read ahead — in flight (`aheadRead`) or landed (`ahead`).
 */
import { READ_CHUNK_BYTES_MIN, SPAN_SHARE_CHUNKS } from "../../constants.ts";
import type { StoreContext } from "../context.ts";
import { recordSpanOf } from "../subtree_store_file.ts";
import { mapRegion, readChunk } from "./file_access.ts";
import { type FileMeta, isPacked, recordsCrcOf, smallInPack } from "./file_meta.ts";
import { LaneBuffer } from "./lane_buffer.ts";
import type { SpanRequest } from "./span_read.ts";

/** A lane's buffer with its read-ahead policy: low on data, early reads ahead, span regions. */
export class LaneReadAhead extends LaneBuffer {
  /**
   * The region of a pack this lane would take from a span read (see span_read.ts): the read
   * `advance` asked for, when it starts a packed segment's data with nothing kept in the buffer,
   * or the first data of the next file, when lowOnData would read it ahead. Null otherwise.
   */
  spanWant(): Omit<SpanRequest, "lane"> | null {
    const want = this.want;
    if (this.headAt < 0) {
      // The read `advance` asked for: data of the current file, nothing of it kept in the buffer.
      if (want.limit < 0 || this.segmentIndex >= this.files.length || want.path !== this.filePath)
        return null;
      if (
        want.path === this.bufferPath &&
        want.position >= this.bufferStart &&
        want.position < this.bufferStart + this.bufferLength
      ) {
        // The read came (a span the batch just read): the next file may be read ahead already.
        return this.readsAheadEarly()
          ? this.spanRegion(this.files[this.segmentIndex + 1], null, true)
          : null;
      }
      return this.spanRegion(this.files[this.segmentIndex], want.position, false);
    }
    if (
      !(this.lowOnData() || this.readsAheadEarly()) ||
      this.bufferStart + this.bufferLength < this.fileEnd
    )
      return null;
    const next = this.files[this.segmentIndex + 1];
    return this.spanRegion(next, null, true);
  }

  /**
   * The region from `from` (null: its first record) of packed `file` this lane would take from a
   * span read, or null when `file` is not packed.
   */
  private spanRegion(
    file: FileMeta,
    from: number | null,
    ahead: boolean,
  ): Omit<SpanRequest, "lane"> | null {
    if ("topics" in file || file.pack === undefined) return null;
    const { path, dataStart, end } = recordSpanOf(file);
    const position = from ?? dataStart;
    const regionEnd = Math.min(
      end,
      position + SPAN_SHARE_CHUNKS * Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN),
    );
    // The next image of the pack starts after this one's index image.
    const next = regionEnd === end ? end + file.pack.indexBytes : -1;
    const whole = position === dataStart && regionEnd === end;
    const recordsCrc = whole ? recordsCrcOf(file) : -1;
    return {
      path,
      position,
      end: regionEnd,
      ahead,
      fromStart: position === dataStart,
      imageStart: file.pack.offset,
      next,
      recordsCrc,
    };
  }

  /**
   * True when the head is a record of a segment or store whose unread part is mostly not in the
   * buffer, or whose file ends within the buffer soon with a next file to read from its start: a
   * read now (beside the other partition reads' reads, at batch start) spares a read later that
   * the merge would have to wait for alone. Without the next file's read ahead, a whole-stream read
   * of many partitions with two segments each waited alone once per partition
   * (docs/benchmarks.md#storage-issue-3).
   */
  lowOnData(): boolean {
    if (
      this.headAt < 0 ||
      this.segmentIndex >= this.files.length ||
      this.bufferPath !== this.filePath
    )
      return false;
    const end = this.fileEnd;
    const bufferEnd = this.bufferStart + this.bufferLength;
    const threshold = Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN) / 4;
    if (bufferEnd < end) return bufferEnd - (this.bufferStart + this.headAt) < threshold;
    if (this.ahead !== null || this.aheadRead !== null || !this.nextFileFromStart()) return false;
    return end - (this.bufferStart + this.headAt) < threshold;
  }

  /**
   * The current file is all in the buffer and the next one is packed and read from its start:
   * it is read ahead now, not when a few records are left. The partitions of a sort batch all
   * reach their next images near the same seq, and reads ahead started a few records before
   * that left the merge waiting for them (docs/benchmarks.md#storage-issue-3); begun early, those
   * span reads overlap the merge of the current images. Such a read ahead is only ever part of a
   * span read (never waited for); a lane whose next image is not read with others' reads it
   * ahead when low on data (lowOnData, topUp), as before: begun early, a read of its own would
   * be waited for at a batch start. Not for a sparse reader, whose lanes' images lie apart.
   */
  readsAheadEarly(): boolean {
    if (
      this.segmentIndex >= this.files.length ||
      this.bufferPath !== this.filePath ||
      this.bufferStart + this.bufferLength < this.fileEnd
    )
      return false;
    if (
      this.ahead !== null ||
      this.aheadRead !== null ||
      this.owner.sparse ||
      !this.nextFileFromStart()
    )
      return false;
    return isPacked(this.files[this.segmentIndex + 1]);
  }

  /**
   * Reads what lowOnData found short: a chunk from the head record on, or the next file's first.
   */
  async topUp(context: StoreContext): Promise<void> {
    const position = this.bufferStart + this.headAt;
    const end = this.fileEnd;
    if (this.bufferStart + this.bufferLength >= end) return this.readAhead(context);
    this.request(this.filePath, position, this.readBytes(position, end, this.headLength), end);
    await this.load(context);
    // The buffer starts at the head, or before it (a mapping of the whole image: mapRecords).
    this.headAt = (position - this.bufferStart) | 0;
  }

  /** True when the lane will read the file after the current one from its first record. */
  private nextFileFromStart(): boolean {
    // Bounds checked before the access: a read past the array's end left optimized code
    // (an "OutOfBounds" exit, hundreds per whole-stream read until recompiled).
    const i = this.segmentIndex + 1;
    if (i >= this.files.length) return false;
    const next = this.files[i];
    return this.owner.timeFloor === -Infinity && next.firstSeq >= this.nextSeq;
  }

  private async readAhead(context: StoreContext): Promise<void> {
    const next = this.files[this.segmentIndex + 1];
    const { path, dataStart, end } = recordSpanOf(next);
    const bytes = this.readBytes(dataStart, end, 0);
    this.firstReadBytes = 0;
    const random = this.owner.sparse && smallInPack(next);
    const mapped = random
      ? null
      : await mapRegion(context, path, dataStart, dataStart + bytes, 0, 0);
    if (mapped !== null) {
      this.ahead = {
        buffer: mapped,
        owned: false,
        path,
        start: dataStart,
        length: mapped.length,
        checked: false,
        tabled: null,
      };
      return;
    }
    const buffer = this.freshBuffer(bytes);
    const read = await readChunk(context, path, dataStart, buffer.subarray(0, bytes), end, random);
    this.ahead = {
      buffer,
      owned: true,
      path,
      start: dataStart,
      length: read,
      checked: false,
      tabled: null,
    };
  }
}
