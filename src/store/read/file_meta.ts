/**
 * file_meta: what the reader asks of a closed file's metadata — a packed segment (`SegmentMeta`
 * with `pack`), a segment of its own, or a subtree store (`SubtreeStoreMeta`, with `topics`).
 *
 * Pure questions over the manifest's records; no I/O, no state.
 */
import { SMALL_IMAGE_BYTES } from "../../constants.ts";
import type { SegmentMeta } from "../segment_index.ts";
import { isSubtreeStore, type SubtreeStoreMeta } from "../subtree_store_file.ts";

/** A file a lane reads: a segment (packed or not) or a subtree store. */
export type FileMeta = SegmentMeta | SubtreeStoreMeta;

/** True for a segment image inside a pack. */
export function isPacked(file: FileMeta): boolean {
  return !isSubtreeStore(file) && file.pack !== undefined;
}

/** The CRC-32 of `file`'s records as the manifest keeps it (packed images), else -1. */
export function recordsCrcOf(file: FileMeta): number {
  return isSubtreeStore(file) ? -1 : (file.pack?.recordsCrc ?? -1);
}

/** A packed image below SMALL_IMAGE_BYTES: a sparse reader reads it without read-ahead. */
export function smallInPack(file: FileMeta): boolean {
  return !("topics" in file) && file.pack !== undefined && file.bytes < SMALL_IMAGE_BYTES;
}
