/**
 * file_access: the reader's bottom layer, the two ways it gets a file's bytes — a read into a
 * buffer (`readChunk`) and a mapping of pages already in the page cache (`mapRegion`) — both
 * through the store's open-file LRU (`context.files`) and counted in `context.reads.bytesRead`.
 *
 *   lane / span read ──▶ readChunk ─┐
 *                     └▶ mapRegion ─┴─▶ context.files (LRU of DiskFile) ──▶ Disk
 *
 * Does not decide what to read, nor keep any buffer: its callers (lane_buffer.ts, span_read.ts)
 * do. Invariant: a short read is corruption (`corrupt`), never a partial result.
 */
import type { StoreContext } from "../context.ts";
import { readFully } from "../disk.ts";
import { StoreError } from "../layout.ts";

const RANDOM_ACCESS = { random: true };
const CACHED_ONLY = { cachedOnly: true };

/** The error of a damaged or short file: what went wrong, where. */
export function corrupt(path: string, offset: number, what: string): StoreError {
  return new StoreError(
    "ARIA_ERR_STORE_CORRUPT",
    `Cannot read "${path}": ${what} at offset ${offset}`,
  );
}

/**
 * Reads `into.length` bytes of `path` at `position` (a file of `limit` bytes) and counts them;
 * short reads are corruption. `random`: through the file's handle without read-ahead.
 */
export async function readChunk(
  context: StoreContext,
  path: string,
  position: number,
  into: Uint8Array,
  limit: number,
  random = false,
): Promise<number> {
  const read = await context.files.with(
    path,
    (file) => readFully(file, position, into),
    random ? RANDOM_ACCESS : undefined,
  );
  if (read < into.length)
    throw corrupt(path, position + read, `file ends early (expected ${limit} bytes)`);
  context.reads.bytesRead += read;
  return read;
}

/**
 * The bytes [start, end) of `path` mapped when all of them are in the page cache (see
 * DiskFile.map), counted as read but for the `keptLength` bytes from `keptStart` a lane had read
 * already; null otherwise (the caller reads them).
 */
export async function mapRegion(
  context: StoreContext,
  path: string,
  start: number,
  end: number,
  keptStart: number,
  keptLength: number,
): Promise<Uint8Array | null> {
  const bytes = await context.files.with(path, (file) =>
    file.map === undefined ? null : file.map(start, end - start, CACHED_ONLY),
  );
  if (bytes === null) return null;
  context.reads.bytesRead +=
    end - start - Math.max(0, Math.min(end, keptStart + keptLength) - Math.max(start, keptStart));
  return bytes;
}
