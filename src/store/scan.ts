/**
 * scan: reads a file of records front to back in large chunks and checks each one, for journal
 * replay, index rebuilds and segment verification. Stops at the end of the file or at the first
 * record that fails its checks, and says where and why. Allocates one buffer per scan.
 */
import { READ_CHUNK_BYTES_MAX } from "../constants.ts";
import type { Crc32 } from "./crc32.ts";
import type { DiskFile } from "./disk.ts";
import { RECORD_INCOMPLETE, checkRecord, recordProblem, recordSeq } from "./record.ts";

/**
 * Called for each valid record; `at` indexes `bytes`, `position` is the record's file offset.
 * Returning a string stops the scan at this record with that problem.
 */
export type OnRecord = (
  bytes: Uint8Array,
  view: DataView,
  at: number,
  length: number,
  position: number,
) => string | undefined;

/** Where a scan stopped: the end of the last valid record and, if it stopped early, why. */
export type ScanResult = { end: number; fileBytes: number; problem: string | null };

/**
 * Where a scan ends early, without a problem: at byte `end` (an image inside a pack), or where
 * a u32 equal to `stopMagic` stands instead of a record length (the header of the image after
 * a pack's records: file magics are far above any record length, so they cannot be confused).
 */
export type ScanBounds = { end?: number; stopMagic?: number };

/** Scans records of `file` from `start`; `onRecord` sees each valid one in order. */
export async function scanRecords(
  file: DiskFile,
  start: number,
  crc32: Crc32,
  onRecord: OnRecord,
  bounds: ScanBounds = {},
): Promise<ScanResult> {
  const fileBytes = bounds.end ?? (await file.size());
  const stopMagic = bounds.stopMagic ?? -1;
  let buffer = new Uint8Array(Math.min(READ_CHUNK_BYTES_MAX, Math.max(64, fileBytes - start)));
  let view = new DataView(buffer.buffer);
  let bufferStart = start; // file offset of buffer[0]
  let filled = 0;
  let at = 0;
  for (;;) {
    if (filled - at >= 4 && view.getUint32(at, true) === stopMagic)
      return { end: bufferStart + at, fileBytes, problem: null };
    const length =
      filled - at > 0 ? checkRecord(buffer, view, at, filled, crc32) : RECORD_INCOMPLETE;
    if (length > 0) {
      const stop = onRecord(buffer, view, at, length, bufferStart + at);
      if (stop !== undefined) return { end: bufferStart + at, fileBytes, problem: stop };
      at += length;
      continue;
    }
    const position = bufferStart + at;
    if (length !== RECORD_INCOMPLETE)
      return { end: position, fileBytes, problem: recordProblem(length) };
    if (bufferStart + filled >= fileBytes) {
      return {
        end: position,
        fileBytes,
        problem: position === fileBytes ? null : recordProblem(RECORD_INCOMPLETE),
      };
    }
    // Move the partial record to the front and read more; grow for a record bigger than the buffer.
    const kept = filled - at;
    const needed = kept >= 4 ? view.getUint32(at, true) : 0;
    if (needed > buffer.length) {
      const bigger = new Uint8Array(Math.min(needed, fileBytes - position));
      bigger.set(buffer.subarray(at, filled));
      buffer = bigger;
      view = new DataView(buffer.buffer);
    } else {
      buffer.copyWithin(0, at, filled);
    }
    bufferStart = position;
    at = 0;
    filled = kept;
    if (filled === buffer.length)
      return { end: position, fileBytes, problem: recordProblem(RECORD_INCOMPLETE) };
    const read = await file.read(
      bufferStart + filled,
      buffer.subarray(filled, Math.min(buffer.length, fileBytes - bufferStart)),
    );
    if (read === 0) return { end: position, fileBytes, problem: recordProblem(RECORD_INCOMPLETE) };
    filled += read;
  }
}

/**
 * Looks for valid records after a bad one at `from` (a torn tail has none; corruption in the
 * middle of a file has some): how many valid records with seq > `afterSeq` follow, and where the
 * first one is. Byte-by-byte where no valid record starts, so only for the rare bad record (and
 * the cut of a recycled journal after a crash, mostly whole older records, stepped over).
 */
export async function countRecordsAfter(
  file: DiskFile,
  from: number,
  afterSeq: number,
  crc32: Crc32,
): Promise<{ records: number; firstOffset: number; firstSeq: number; lastSeq: number }> {
  const fileBytes = await file.size();
  const rest = new Uint8Array(Math.max(0, fileBytes - from));
  let filled = 0;
  while (filled < rest.length) {
    const read = await file.read(from + filled, rest.subarray(filled));
    if (read === 0) break;
    filled += read;
  }
  const view = new DataView(rest.buffer);
  const found = { records: 0, firstOffset: -1, firstSeq: 0, lastSeq: 0 };
  let at = 1;
  while (at + 32 <= filled) {
    const length = checkRecord(rest, view, at, filled, crc32);
    const seq = length > 0 ? recordSeq(view, at) : 0;
    if (length > 0 && seq > Math.max(afterSeq, found.lastSeq)) {
      if (found.records === 0) {
        found.firstOffset = from + at;
        found.firstSeq = seq;
      }
      found.records++;
      found.lastSeq = seq;
      at += length;
    } else if (length > 0) {
      // A whole record of no interest (an older generation's, in a recycled journal): no other
      // record starts inside its intact bytes, so step over it. Byte by byte, the older bytes of
      // a recycled 64 MiB journal took seconds.
      at += length;
    } else {
      at++;
    }
  }
  return found;
}
