/**
 * index_cache: loads a closed file's sparse seq/time index into the store's index cache
 * (`context.reads.indexes`, shared by every reader), evicting the oldest entries past
 * STORE_INDEXES_CACHED_MAX.
 *
 *   lane.advance: index of file id? ── miss ──▶ want {path, position, bytes} ──▶ loadIndex
 *                                                  └──▶ context.reads.indexes.set(id, index | null)
 *
 * Does not seek (the lane does, with `seekIndex`). Invariant: an unreadable index is cached as
 * null — the lane then scans the file from its start — never an error.
 */
import { STORE_INDEXES_CACHED_MAX } from "../../constants.ts";
import type { StoreContext } from "../context.ts";
import { readFully } from "../disk.ts";
import { decodeSegmentIndex, type SegmentIndex } from "../segment_index.ts";

/** Loads the index of file `id`: `bytes` at `position` of `path` (bytes < 0: the whole file). */
export async function loadIndex(
  context: StoreContext,
  want: { id: number; path: string; position: number; bytes: number },
): Promise<void> {
  const id = want.id;
  let index: SegmentIndex | null = null;
  try {
    const bytes = await context.files.with(want.path, async (file) => {
      const into = new Uint8Array(want.bytes < 0 ? await file.size() : want.bytes);
      return into.subarray(0, await readFully(file, want.position, into));
    });
    const decoded = decodeSegmentIndex(bytes, context.crc32);
    // An unreadable index costs a scan from the segment's start, not an error.
    index = typeof decoded === "string" ? null : decoded;
  } catch {
    index = null;
  }
  const cache = context.reads.indexes;
  cache.set(id, index);
  const max = STORE_INDEXES_CACHED_MAX;
  if (cache.size > max) {
    for (const key of cache.keys()) {
      cache.delete(key);
      if (cache.size <= max) break;
    }
  }
}
