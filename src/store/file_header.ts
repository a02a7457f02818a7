/**
 * file_header: the header every store file starts with, so any file can be told apart and
 * checked before it is trusted. Pure codec.
 *
 *   0  u32 magic: "AJNL" journal, "ASEG" segment, "AIDX" segment index, "AMAN" manifest,
 *          "ASTO" subtree store (subtree_store_file.ts), "APAK" pack (pack_file.ts)
 *   4  u16 format version (1)
 *   6  u16 header bytes H = 36 + name bytes
 *   8  u32 crc32 of bytes [12, H)
 *  12  u32 reserved (0)
 *  16  u64 id: journal generation or segment id (0 for the manifest)
 *  24  u64 first seq the file may hold (0 for the manifest)
 *  32  u16 name bytes: the partition of a segment or index (0 otherwise)
 *  34  u16 reserved (0)
 *  36  name (ASCII)
 *
 * A journal of format version 2 (this build's; version 1 journals are still read) follows its
 * 36-byte header with two **synced-point slots** of 16 bytes each, and its records start at 68:
 *
 *  36  slot 0: u64 synced bytes, u32 generation (low 32 bits), u32 crc32 of the slot's bytes [0, 12)
 *  52  slot 1: the same
 *
 * A slot says how far the journal's records were durable (an fsync had completed over them) when
 * the slot was written; the writer fills them in turn (journal_writer.ts, SyncSlots in
 * journal_files.ts), so a write torn by a crash spoils one slot and the other still holds. The
 * larger valid claim of a slot naming this generation counts: recovery takes a bad record before
 * it for damage, never for a torn tail (docs/storage.md, recovery). Slots are outside the
 * header's CRC: they change while the file is written; their own CRC vouches for them.
 */
import { TOPIC_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { Crc32 } from "./crc32.ts";
import { getU64, setU64 } from "./record.ts";

/** The kinds of store file. */
export type FileKind = "journal" | "segment" | "index" | "manifest" | "store" | "pack";

const MAGIC: Record<FileKind, number> = {
  journal: magicOf("AJNL"),
  segment: magicOf("ASEG"),
  index: magicOf("AIDX"),
  manifest: magicOf("AMAN"),
  store: magicOf("ASTO"),
  pack: magicOf("APAK"),
};
const VERSION = 1;
/** The journal format this build writes: the header, then the synced-point slots. */
const JOURNAL_VERSION = 2;
/** Header bytes before the name. */
export const FILE_HEADER_FIXED_BYTES = 36;
/** Bytes of one synced-point slot of a version-2 journal. */
const SYNC_SLOT_BYTES = 16;
/** Where a version-2 journal's records start: its header, then two synced-point slots. */
export const JOURNAL_HEADER_BYTES = FILE_HEADER_FIXED_BYTES + 2 * SYNC_SLOT_BYTES;

/** The fields of a file header. */
export type FileHeader = {
  kind: FileKind;
  id: number;
  firstSeq: number;
  name: string;
  /** Where the file's body starts (a version-2 journal's: after its synced-point slots). */
  bytes: number;
  version: number;
};

/** The u32 a `kind` file (or pack image) starts with. */
export function fileMagic(kind: FileKind): number {
  return MAGIC[kind];
}

function magicOf(text: string): number {
  return (
    text.charCodeAt(0) |
    (text.charCodeAt(1) << 8) |
    (text.charCodeAt(2) << 16) |
    (text.charCodeAt(3) << 24)
  );
}

/** Encodes a version-1 header; its length is FILE_HEADER_FIXED_BYTES + name length. */
export function encodeFileHeader(
  header: Omit<FileHeader, "bytes" | "version">,
  crc32: Crc32,
  version = VERSION,
): Uint8Array {
  assert(header.name.length <= TOPIC_BYTES_MAX, "file_header: name too long");
  const total = FILE_HEADER_FIXED_BYTES + header.name.length;
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC[header.kind], true);
  view.setUint16(4, version, true);
  view.setUint16(6, total, true);
  setU64(view, 16, header.id);
  setU64(view, 24, header.firstSeq);
  view.setUint16(32, header.name.length, true);
  for (let i = 0; i < header.name.length; i++)
    bytes[FILE_HEADER_FIXED_BYTES + i] = header.name.charCodeAt(i);
  view.setUint32(8, crc32(bytes.subarray(12)), true);
  return bytes;
}

/** Decodes the header of a `kind` file from its first bytes: the header, or why it is invalid. */
export function decodeFileHeader(
  bytes: Uint8Array,
  kind: FileKind,
  crc32: Crc32,
): FileHeader | string {
  if (bytes.length < FILE_HEADER_FIXED_BYTES)
    return `file header cut short (${bytes.length} bytes)`;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (view.getUint32(0, true) !== MAGIC[kind]) return `not a ${kind} file (bad magic)`;
  const version = view.getUint16(4, true);
  if (version !== VERSION && !(kind === "journal" && version === JOURNAL_VERSION))
    return `unknown ${kind} format version ${version}`;
  const total = view.getUint16(6, true);
  const nameBytes = view.getUint16(32, true);
  if (total !== FILE_HEADER_FIXED_BYTES + nameBytes) return "file header length mismatch";
  if (bytes.length < total) return `file header cut short (${bytes.length} of ${total} bytes)`;
  if (view.getUint32(8, true) !== crc32(bytes.subarray(12, total)))
    return "file header checksum mismatch";
  const name = String.fromCharCode.apply(
    null,
    bytes.subarray(FILE_HEADER_FIXED_BYTES, total) as unknown as number[],
  );
  const bytesBefore = version === JOURNAL_VERSION ? JOURNAL_HEADER_BYTES : total;
  return {
    kind,
    id: getU64(view, 16),
    firstSeq: getU64(view, 24),
    name,
    bytes: bytesBefore,
    version,
  };
}

/** A version-2 journal's first JOURNAL_HEADER_BYTES: its header, then two empty slots. */
export function encodeJournalHeader(gen: number, firstSeq: number, crc32: Crc32): Uint8Array {
  const bytes = new Uint8Array(JOURNAL_HEADER_BYTES);
  bytes.set(
    encodeFileHeader({ kind: "journal", id: gen, firstSeq, name: "" }, crc32, JOURNAL_VERSION),
  );
  return bytes;
}

/** Slot `slot` (0 or 1) of generation `gen` claiming `syncedBytes`, and where it goes in the file. */
export function encodeSyncSlot(
  gen: number,
  slot: number,
  syncedBytes: number,
  crc32: Crc32,
): { position: number; bytes: Uint8Array } {
  const bytes = new Uint8Array(SYNC_SLOT_BYTES);
  const view = new DataView(bytes.buffer);
  setU64(view, 0, syncedBytes);
  view.setUint32(8, gen >>> 0, true);
  view.setUint32(12, crc32(bytes.subarray(0, 12)), true);
  return { position: FILE_HEADER_FIXED_BYTES + (slot & 1) * SYNC_SLOT_BYTES, bytes };
}

/**
 * The synced point a version-2 journal of generation `gen` claims, from its first bytes
 * `header`: the larger valid slot's bytes, 0 when neither is valid (or a version-1 journal).
 */
export function decodeSyncedBytes(header: Uint8Array, gen: number, crc32: Crc32): number {
  if (header.length < JOURNAL_HEADER_BYTES) return 0;
  const view = new DataView(header.buffer, header.byteOffset, header.length);
  if (view.getUint16(4, true) !== JOURNAL_VERSION) return 0;
  let synced = 0;
  for (let slot = 0; slot < 2; slot++) {
    const at = FILE_HEADER_FIXED_BYTES + slot * SYNC_SLOT_BYTES;
    const bytes = header.subarray(at, at + SYNC_SLOT_BYTES);
    if (view.getUint32(at + 12, true) !== crc32(bytes.subarray(0, 12))) continue;
    if (view.getUint32(at + 8, true) !== gen >>> 0) continue;
    synced = Math.max(synced, getU64(view, at));
  }
  return synced;
}
