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
/** Header bytes before the name. */
export const FILE_HEADER_FIXED_BYTES = 36;

/** The fields of a file header. */
export type FileHeader = {
  kind: FileKind;
  id: number;
  firstSeq: number;
  name: string;
  bytes: number;
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

/** Encodes a header; its length is FILE_HEADER_FIXED_BYTES + name length. */
export function encodeFileHeader(header: Omit<FileHeader, "bytes">, crc32: Crc32): Uint8Array {
  assert(header.name.length <= TOPIC_BYTES_MAX, "file_header: name too long");
  const total = FILE_HEADER_FIXED_BYTES + header.name.length;
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC[header.kind], true);
  view.setUint16(4, VERSION, true);
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
  if (view.getUint16(4, true) !== VERSION)
    return `unknown ${kind} format version ${view.getUint16(4, true)}`;
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
  return { kind, id: getU64(view, 16), firstSeq: getU64(view, 24), name, bytes: total };
}
