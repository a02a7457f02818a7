/**
 * layout: the names of the files in a data directory, and the store's error type. One place, so
 * docs/storage.md and the code agree on the tree:
 *
 *   <data dir>/
 *     MANIFEST                      live closed segments (manifest_codec.ts)
 *     MANIFEST.tmp                  a manifest being rewritten (renamed over MANIFEST when done)
 *     journal/<gen:016x>.wal        write-ahead journal, every partition interleaved, seq order
 *     segments/<id:016x>.seg        one closed segment of one partition, seq order
 *     segments/<id:016x>.idx        its sparse seq/time index (also of a subtree store)
 *     segments/<id:016x>.sto        one subtree store: some topics of one partition (store_file.ts)
 */

export const MANIFEST_PATH = "MANIFEST";
export const MANIFEST_TMP_PATH = "MANIFEST.tmp";
export const JOURNAL_DIR = "journal";
export const SEGMENT_DIR = "segments";
const JOURNAL_SUFFIX = ".wal";
const SEGMENT_SUFFIX = ".seg";
const INDEX_SUFFIX = ".idx";
const STORE_SUFFIX = ".sto";

function hex16(n: number): string {
  return n.toString(16).padStart(16, "0");
}

/** Path of journal generation `gen`. */
export function journalPath(gen: number): string {
  return `${JOURNAL_DIR}/${hex16(gen)}${JOURNAL_SUFFIX}`;
}

/** Path of segment `id`'s records. */
export function segmentPath(id: number): string {
  return `${SEGMENT_DIR}/${hex16(id)}${SEGMENT_SUFFIX}`;
}

/** Path of segment `id`'s index. */
export function indexPath(id: number): string {
  return `${SEGMENT_DIR}/${hex16(id)}${INDEX_SUFFIX}`;
}

/** Path of subtree store `id`'s records (its index is indexPath(id): ids are shared with segments). */
export function storePath(id: number): string {
  return `${SEGMENT_DIR}/${hex16(id)}${STORE_SUFFIX}`;
}

/** Parses a file name of the journal or segment directory: its kind and number, or null. */
export function parseFileName(name: string): { kind: "journal" | "segment" | "index" | "store"; n: number } | null {
  const match = /^([0-9a-f]{16})\.(wal|seg|idx|sto)$/.exec(name);
  if (match === null) return null;
  const kind = match[2] === "wal" ? "journal" : match[2] === "seg" ? "segment" : match[2] === "sto" ? "store" : "index";
  return { kind, n: Number.parseInt(match[1], 16) };
}

/** Stable codes of expected store failures. */
export type StoreErrorCode = "ARIA_ERR_STORE_CORRUPT" | "ARIA_ERR_STORE_IO" | "ARIA_ERR_STORE_CLOSED" | "ARIA_ERR_STORE_FAILED";

/** An expected store failure: corrupt data (with file and offset), an I/O error, a closed store. */
export class StoreError extends Error {
  override name = "StoreError";
  constructor(
    readonly code: StoreErrorCode,
    message: string,
  ) {
    super(message);
  }
}
