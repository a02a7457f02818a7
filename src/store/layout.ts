/**
 * layout: the names of the files in a data directory, and the store's error type. One place, so
 * docs/storage.md and the code agree on the tree:
 *
 *   <data dir>/
 *     MANIFEST                      live closed segments (manifest_codec.ts)
 *     MANIFEST.tmp                  a manifest being rewritten (renamed over MANIFEST when done)
 *     journal/<gen:016x>.wal        write-ahead journal, every partition interleaved, seq order
 *     journal/<gen:016x>.next       the next generation while the one before is being sealed (journal_files.ts)
 *     journal/<n:016x>.spare        a file kept for the next journal generation (journal_files.ts)
 *     segments/<id:016x>.seg        one closed segment of one partition, seq order
 *     segments/<id:016x>.idx        its sparse seq/time index (also of a subtree store)
 *     segments/<id:016x>.sto        one subtree store: some topics of one partition
 *                                   (subtree_store_file.ts)
 *     segments/<id:016x>.pak        one sorter batch's segments and their indexes, back to back (pack_file.ts)
 *     damaged/<file>@<offset>+<bytes>  damaged bytes `aria repair` moved aside (repair.ts): `file` is
 *                                   the path they came from, `/` written as `_`; never read
 */

export const MANIFEST_PATH = "MANIFEST";
export const MANIFEST_TMP_PATH = "MANIFEST.tmp";
export const JOURNAL_DIR = "journal";
export const SEGMENT_DIR = "segments";
export const DAMAGED_DIR = "damaged";
const JOURNAL_SUFFIX = ".wal";
const STAGED_SUFFIX = ".next";
const SPARE_SUFFIX = ".spare";
const SEGMENT_SUFFIX = ".seg";
const INDEX_SUFFIX = ".idx";
const STORE_SUFFIX = ".sto";
const PACK_SUFFIX = ".pak";

function hex16(n: number): string {
  return n.toString(16).padStart(16, "0");
}

/** Paths kept by each `kept` path function (all of them are dropped when it passes this many). */
const PATHS_KEPT = 4096;

/**
 * `build`, each path built once per id and kept: a reader asks for the path of the file holding
 * a segment's records at every segment it reaches, and compares it with the path its buffer came
 * from at every record, which for the same string object is a pointer comparison (two equal
 * strings built apart are compared character by character; figures: docs/benchmarks.md#design-notes-figures-moved-from-code-comments).
 */
function kept(build: (id: number) => string): (id: number) => string {
  const paths = new Map<number, string>();
  return (id) => {
    let path = paths.get(id);
    if (path === undefined) {
      path = build(id);
      if (paths.size >= PATHS_KEPT) paths.clear();
      paths.set(id, path);
    }
    return path;
  };
}

/** Path of journal generation `gen`. */
export function journalPath(gen: number): string {
  return `${JOURNAL_DIR}/${hex16(gen)}${JOURNAL_SUFFIX}`;
}

/** Path of journal generation `gen` while it is staged: written before its name is (see journal_files.ts). */
export function stagedPath(gen: number): string {
  return `${JOURNAL_DIR}/${hex16(gen)}${STAGED_SUFFIX}`;
}

/** Path of spare journal file `n` (see journal_files.ts). */
export function sparePath(n: number): string {
  return `${JOURNAL_DIR}/${hex16(n)}${SPARE_SUFFIX}`;
}

/** Where `aria repair` keeps the damaged bytes [offset, offset + bytes) of `file`. */
export function damagedPath(file: string, offset: number, bytes: number): string {
  return `${DAMAGED_DIR}/${file.replaceAll("/", "_")}@${offset}+${bytes}`;
}

/** Path of segment `id`'s records. */
export const segmentPath = kept((id) => `${SEGMENT_DIR}/${hex16(id)}${SEGMENT_SUFFIX}`);

/** Path of segment `id`'s index. */
export function indexPath(id: number): string {
  return `${SEGMENT_DIR}/${hex16(id)}${INDEX_SUFFIX}`;
}

/** Path of subtree store `id`'s records (its index is indexPath(id): ids are shared with segments). */
export const subtreeStorePath = kept((id) => `${SEGMENT_DIR}/${hex16(id)}${STORE_SUFFIX}`);

/** Path of pack `id`: the segment images (records, then index) of one sorter batch. */
export const packPath = kept((id) => `${SEGMENT_DIR}/${hex16(id)}${PACK_SUFFIX}`);

/** The kinds of file a name can say. */
export type FileNameKind = "journal" | "staged" | "spare" | "segment" | "index" | "store" | "pack";
const FILE_NAME_KINDS: Record<string, FileNameKind> = {
  wal: "journal",
  next: "staged",
  spare: "spare",
  seg: "segment",
  idx: "index",
  sto: "store",
  pak: "pack",
};

/** Parses a file name of the journal or segment directory: its kind and number, or null. */
export function parseFileName(name: string): { kind: FileNameKind; n: number } | null {
  const match = /^([0-9a-f]{16})\.(wal|next|spare|seg|idx|sto|pak)$/.exec(name);
  if (match === null) return null;
  return { kind: FILE_NAME_KINDS[match[2]], n: Number.parseInt(match[1], 16) };
}

/** Stable codes of expected store failures. */
export type StoreErrorCode =
  | "ARIA_ERR_STORE_CORRUPT"
  | "ARIA_ERR_STORE_IO"
  | "ARIA_ERR_STORE_CLOSED"
  | "ARIA_ERR_STORE_FAILED"
  | "ARIA_ERR_STORE_FORMAT";

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
