/**
 * consumers_codec: the byte format of the durable consumers' file (`DATA_DIR/consumers.log`) —
 * a header, then records appended in batches, each checked by a CRC; the last record of a name
 * wins. Pure: encoding and decoding only (src/runtime/consumer_file.ts reads and writes the file).
 *
 *   header  "ARIACNS1" (8 bytes)
 *   record  u32 body bytes | u32 crc32(body) | body
 *   body    u8 kind (1 put, 2 remove) | u8 name bytes | name
 *           put: u8 flags (1 shared, 2 group position, 4 owner) | u64 next seq | u64 last active µs |
 *                u16 entries | entries (u16 bytes, text)
 *                [flag 4: u16 bytes | the owner's user name (who created it, with --users)]
 *                [flag 2: u64 read seq | u32 count | count × u64 unacknowledged seq (ascending,
 *                 the first is next seq, each below read seq)]
 *           kind 3 (state put): u32 bytes | bytes (opaque: a door's session state, e.g. an MQTT
 *                 session's, src/mqtt/session_state.ts); kind 4 (state remove): nothing more.
 *           States are a namespace of their own (a state and a consumer may share a name).
 *
 * Reading (issue 28's rule): a record that does not check at the end of the file, with nothing
 * readable after it (bytes cut short, or zeros to the end), is a write cut by a crash and is
 * dropped; a bad record followed by more bytes is damage, reported with its offset.
 * Invariants: decode(encode(records)) gives the records back; a record's body is at most
 * CONSUMER_RECORD_BYTES_MAX.
 */
import {
  AUTH_TOKEN_BYTES_MAX,
  CONSUMER_NAME_BYTES_MAX,
  FILTER_ENTRIES_MAX,
  GROUP_POSITION_SEQS_MAX,
  TOPIC_BYTES_MAX,
} from "../constants.ts";
import type { Crc32 } from "./crc32.ts";

/** What the file says about one consumer: its record (put), or that it was removed. */
export type ConsumerEntry =
  | {
      kind: "put";
      name: string;
      filter: readonly string[];
      shared: boolean;
      nextSeq: number;
      lastActiveUs: number;
      /** A shared group's unacknowledged seqs below its read position (ConsumerRecord.group). */
      group?: { readonly readSeq: number; readonly unackedSeqs: readonly number[] };
      /** The user who created it (ConsumerRecord.owner); absent: none (no --users, older files). */
      owner?: string;
    }
  | { kind: "remove"; name: string }
  /** A door's session state (opaque bytes), or that it was removed. */
  | { kind: "state"; name: string; state: Uint8Array }
  | { kind: "unstate"; name: string };

/** The file's first bytes. */
export const CONSUMERS_FILE_MAGIC = new TextEncoder().encode("ARIACNS1");
/** Bytes before a record's body: u32 body bytes, u32 crc. */
export const CONSUMER_RECORD_HEAD_BYTES = 8;
/** Largest session state a record holds (an MQTT session: a will, flights, subscriptions). */
export const CONSUMER_STATE_BYTES_MAX = 8 * 1024 * 1024;
/** Largest record body: a longest name, a largest filter and a largest group position; a state. */
export const CONSUMER_RECORD_BYTES_MAX = Math.max(
  2 + CONSUMER_NAME_BYTES_MAX + 4 + CONSUMER_STATE_BYTES_MAX,
  2 +
    CONSUMER_NAME_BYTES_MAX +
    1 +
    16 +
    2 +
    FILTER_ENTRIES_MAX * (2 + TOPIC_BYTES_MAX + 3) +
    12 +
    8 * GROUP_POSITION_SEQS_MAX +
    2 +
    AUTH_TOKEN_BYTES_MAX,
);

const KIND_PUT = 1;
const KIND_REMOVE = 2;
const KIND_STATE = 3;
const KIND_UNSTATE = 4;
/** The kind byte of each entry kind. */
const KIND_OF = { put: KIND_PUT, remove: KIND_REMOVE, state: KIND_STATE, unstate: KIND_UNSTATE };
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** Encodes entries as records (no header), one buffer. */
export function encodeConsumerEntries(entries: readonly ConsumerEntry[], crc32: Crc32): Uint8Array {
  const parts: Uint8Array[] = entries.map((entry) => recordOf(entry, crc32));
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.length;
  }
  return bytes;
}

function recordOf(entry: ConsumerEntry, crc32: Crc32): Uint8Array {
  const name = utf8.encode(entry.name);
  const texts = entry.kind === "put" ? entry.filter.map((text) => utf8.encode(text)) : [];
  const group = entry.kind === "put" ? entry.group : undefined;
  const owner = entry.kind === "put" && entry.owner !== undefined ? utf8.encode(entry.owner) : null;
  const bodyBytes =
    2 +
    name.length +
    (entry.kind === "put" ? 1 + 16 + 2 + texts.reduce((sum, t) => sum + 2 + t.length, 0) : 0) +
    (owner === null ? 0 : 2 + owner.length) +
    (group === undefined ? 0 : 12 + 8 * group.unackedSeqs.length) +
    (entry.kind === "state" ? 4 + entry.state.length : 0);
  const bytes = new Uint8Array(CONSUMER_RECORD_HEAD_BYTES + bodyBytes);
  const view = new DataView(bytes.buffer);
  let at = CONSUMER_RECORD_HEAD_BYTES;
  bytes[at++] = KIND_OF[entry.kind];
  bytes[at++] = name.length;
  bytes.set(name, at);
  at += name.length;
  if (entry.kind === "state") {
    view.setUint32(at, entry.state.length, true);
    bytes.set(entry.state, at + 4);
  }
  if (entry.kind === "put") {
    bytes[at++] = (entry.shared ? 1 : 0) | (group === undefined ? 0 : 2) | (owner === null ? 0 : 4);
    view.setBigUint64(at, BigInt(entry.nextSeq), true);
    view.setBigUint64(at + 8, BigInt(entry.lastActiveUs), true);
    at += 16;
    view.setUint16(at, texts.length, true);
    at += 2;
    for (const text of texts) {
      view.setUint16(at, text.length, true);
      bytes.set(text, at + 2);
      at += 2 + text.length;
    }
    if (owner !== null) {
      view.setUint16(at, owner.length, true);
      bytes.set(owner, at + 2);
      at += 2 + owner.length;
    }
    if (group !== undefined) {
      view.setBigUint64(at, BigInt(group.readSeq), true);
      view.setUint32(at + 8, group.unackedSeqs.length, true);
      at += 12;
      for (const seq of group.unackedSeqs) {
        view.setBigUint64(at, BigInt(seq), true);
        at += 8;
      }
    }
  }
  view.setUint32(0, bodyBytes, true);
  view.setUint32(4, crc32(bytes.subarray(CONSUMER_RECORD_HEAD_BYTES)), true);
  return bytes;
}

/** What decoding a file found. */
export type ConsumersDecoded =
  | {
      ok: true;
      /** The consumers, by name, after every record applied in order. */
      entries: Map<string, Extract<ConsumerEntry, { kind: "put" }>>;
      /** The session states, by name, after every record applied in order. */
      states: Map<string, Uint8Array>;
      /** Bytes of the readable prefix (header and whole records): a torn tail starts here. */
      validBytes: number;
      /** Records read. */
      records: number;
    }
  | { ok: false; offset: number; reason: string; validBytes: number };

/** Decodes a whole file (header included); an empty file holds no consumer. */
export function decodeConsumersFile(bytes: Uint8Array, crc32: Crc32): ConsumersDecoded {
  const entries = new Map<string, Extract<ConsumerEntry, { kind: "put" }>>();
  const states = new Map<string, Uint8Array>();
  const magic = CONSUMERS_FILE_MAGIC;
  // The file is only ever created whole (written beside, fsynced, renamed): one shorter than its
  // header was cut, and whatever it held is gone (an absent file is the caller's: none).
  if (bytes.length < magic.length)
    return { ok: false, offset: 0, reason: shortFileReason(bytes.length), validBytes: 0 };
  if (magic.some((byte, i) => bytes[i] !== byte))
    return { ok: false, offset: 0, reason: "the file does not start with ARIACNS1", validBytes: 0 };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = magic.length;
  let records = 0;
  while (at < bytes.length) {
    const problem = recordProblem(bytes, view, at, crc32);
    if (problem !== null) {
      // A crash tears only the last append: whole records after it mean a damaged record (a
      // flipped length bit that points past the end reads as "cut short").
      if (tornAt(bytes, at, problem) && !checksAfter(bytes, view, at, crc32)) break;
      return { ok: false, offset: at, reason: problem.reason, validBytes: at };
    }
    const bodyBytes = view.getUint32(at, true);
    const entry = decodeBody(bytes.subarray(at + 8, at + 8 + bodyBytes));
    if (entry === null)
      return { ok: false, offset: at, reason: "a record's body does not decode", validBytes: at };
    applyEntry(entry, entries, states);
    records++;
    at += CONSUMER_RECORD_HEAD_BYTES + bodyBytes;
  }
  return { ok: true, entries, states, validBytes: at, records };
}

/** Applies one decoded record to the consumers and states read so far. */
function applyEntry(
  entry: ConsumerEntry,
  entries: Map<string, Extract<ConsumerEntry, { kind: "put" }>>,
  states: Map<string, Uint8Array>,
): void {
  if (entry.kind === "put") entries.set(entry.name, entry);
  else if (entry.kind === "remove") entries.delete(entry.name);
  else if (entry.kind === "state") states.set(entry.name, entry.state);
  else states.delete(entry.name);
}

/** What `aria repair` keeps of a damaged consumers file, and the damaged regions it skipped. */
export interface ConsumersSalvage {
  entries: Extract<ConsumerEntry, { kind: "put" }>[];
  /** The session states kept. */
  states: Extract<ConsumerEntry, { kind: "state" }>[];
  /** Byte ranges [offset, offset + bytes) that did not check and were skipped. */
  damaged: { offset: number; bytes: number; reason: string }[];
}

/**
 * Reads what checks of a consumers file: at a bad record, resyncs at the next offset where a
 * whole record checks (a CRC match), keeping the records after the damage too. A torn tail is
 * dropped without being counted as damage. A file whose header is damaged keeps nothing.
 */
export function salvageConsumersFile(bytes: Uint8Array, crc32: Crc32): ConsumersSalvage {
  const entries = new Map<string, Extract<ConsumerEntry, { kind: "put" }>>();
  const states = new Map<string, Uint8Array>();
  const damaged: ConsumersSalvage["damaged"] = [];
  const magic = CONSUMERS_FILE_MAGIC;
  if (bytes.length < magic.length || magic.some((byte, i) => bytes[i] !== byte)) {
    damaged.push({
      offset: 0,
      bytes: bytes.length,
      reason:
        bytes.length < magic.length
          ? shortFileReason(bytes.length)
          : "the file does not start with ARIACNS1",
    });
    return { entries: [], states: [], damaged };
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = magic.length;
  while (at < bytes.length) {
    const problem = recordProblem(bytes, view, at, crc32);
    const entry =
      problem === null
        ? decodeBody(bytes.subarray(at + 8, at + 8 + view.getUint32(at, true)))
        : null;
    if (entry !== null) {
      applyEntry(entry, entries, states);
      at += CONSUMER_RECORD_HEAD_BYTES + view.getUint32(at, true);
      continue;
    }
    let next = at + 1;
    while (next < bytes.length && !recordChecks(bytes, view, next, crc32)) next++;
    const torn = next === bytes.length && problem !== null && tornAt(bytes, at, problem);
    if (!torn)
      damaged.push({
        offset: at,
        bytes: next - at,
        reason: problem?.reason ?? "a record's body does not decode",
      });
    at = next;
  }
  const kept = [...states].map(([name, state]) => ({ kind: "state" as const, name, state }));
  return { entries: [...entries.values()], states: kept, damaged };
}

/** Bytes of a disk sector: a power loss loses whole sectors (reads as zeros), never part. */
const SECTOR_BYTES = 512;

/**
 * Whether the bad record at `at`, the file's last, is an append a crash tore: cut short (`kill -9`
 * stops a write after a prefix of it reached the page cache), or zeros from its start or from a
 * sector boundary inside it to the file's end (a power loss: sectors of the append never reached
 * the disk while the file's size did). A record of full length with other bytes that do not
 * check is not a crash's: damage.
 */
function tornAt(bytes: Uint8Array, at: number, problem: { cut: boolean }): boolean {
  if (problem.cut) return true;
  let zerosFrom = bytes.length;
  while (zerosFrom > at && bytes[zerosFrom - 1] === 0) zerosFrom--;
  if (zerosFrom === at) return true;
  // The zeros begin inside the record (its length field read, or itself zeroed) and run on.
  const sector = Math.ceil(zerosFrom / SECTOR_BYTES) * SECTOR_BYTES;
  const length =
    at + 4 <= bytes.length ? new DataView(bytes.buffer, bytes.byteOffset + at, 4) : null;
  const end =
    sector < at + 4 || length === null
      ? bytes.length
      : at + CONSUMER_RECORD_HEAD_BYTES + length.getUint32(0, true);
  return sector > at && sector < Math.min(end, bytes.length);
}

/** Why a file shorter than its header is damage. */
function shortFileReason(length: number): string {
  return `the file is ${length} bytes, shorter than its ${CONSUMERS_FILE_MAGIC.length}-byte header ARIACNS1: it is only ever created whole, so it was cut and every consumer and session state it held is lost (none can be named)`;
}

/** Whether a whole record that checks starts anywhere after `at` (salvage's resync, as a test). */
function checksAfter(bytes: Uint8Array, view: DataView, at: number, crc32: Crc32): boolean {
  for (let next = at + 1; next < bytes.length; next++)
    if (recordChecks(bytes, view, next, crc32)) return true;
  return false;
}

function recordChecks(bytes: Uint8Array, view: DataView, at: number, crc32: Crc32): boolean {
  if (recordProblem(bytes, view, at, crc32) !== null) return false;
  return decodeBody(bytes.subarray(at + 8, at + 8 + view.getUint32(at, true))) !== null;
}

/** Why the record at `at` does not check; `cut`: it runs past the end of the file. */
function recordProblem(
  bytes: Uint8Array,
  view: DataView,
  at: number,
  crc32: Crc32,
): { reason: string; cut: boolean } | null {
  if (bytes.length - at < CONSUMER_RECORD_HEAD_BYTES)
    return { reason: "a record header is cut short", cut: true };
  const bodyBytes = view.getUint32(at, true);
  if (bodyBytes < 2 || bodyBytes > CONSUMER_RECORD_BYTES_MAX)
    return { reason: `a record length of ${bodyBytes} bytes is out of range`, cut: false };
  if (at + CONSUMER_RECORD_HEAD_BYTES + bodyBytes > bytes.length)
    return { reason: "a record is cut short", cut: true };
  const body = bytes.subarray(
    at + CONSUMER_RECORD_HEAD_BYTES,
    at + CONSUMER_RECORD_HEAD_BYTES + bodyBytes,
  );
  if (crc32(body) !== view.getUint32(at + 4, true))
    return { reason: "checksum mismatch", cut: false };
  return null;
}

function decodeBody(body: Uint8Array): ConsumerEntry | null {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  try {
    const kind = body[0];
    const nameBytes = body[1];
    const name = utf8Decoder.decode(body.subarray(2, 2 + nameBytes));
    let at = 2 + nameBytes;
    if (kind === KIND_REMOVE) return at === body.length ? { kind: "remove", name } : null;
    if (kind === KIND_UNSTATE) return at === body.length ? { kind: "unstate", name } : null;
    if (kind === KIND_STATE) {
      const length = view.getUint32(at, true);
      if (at + 4 + length !== body.length) return null;
      return { kind: "state", name, state: body.slice(at + 4) };
    }
    if (kind !== KIND_PUT) return null;
    const flags = body[at]!;
    if (flags > 7) return null;
    const shared = (flags & 1) !== 0;
    const nextSeq = Number(view.getBigUint64(at + 1, true));
    const lastActiveUs = Number(view.getBigUint64(at + 9, true));
    const count = view.getUint16(at + 17, true);
    at += 19;
    const filter: string[] = [];
    for (let i = 0; i < count; i++) {
      const length = view.getUint16(at, true);
      if (at + 2 + length > body.length) return null;
      filter.push(utf8Decoder.decode(body.subarray(at + 2, at + 2 + length)));
      at += 2 + length;
    }
    if (nextSeq < 1 || !Number.isSafeInteger(nextSeq)) return null;
    let owner: { owner?: string } = {};
    if ((flags & 4) !== 0) {
      const length = view.getUint16(at, true);
      if (at + 2 + length > body.length) return null;
      owner = { owner: utf8Decoder.decode(body.subarray(at + 2, at + 2 + length)) };
      at += 2 + length;
    }
    if ((flags & 2) === 0) {
      if (at !== body.length) return null;
      return { kind: "put", name, filter, shared, nextSeq, lastActiveUs, ...owner };
    }
    const readSeq = Number(view.getBigUint64(at, true));
    const seqCount = view.getUint32(at + 8, true);
    at += 12;
    if (at + 8 * seqCount !== body.length || seqCount > GROUP_POSITION_SEQS_MAX) return null;
    const unackedSeqs: number[] = [];
    for (let i = 0; i < seqCount; i++, at += 8)
      unackedSeqs.push(Number(view.getBigUint64(at, true)));
    // Ascending, below the read seq, the first at the position.
    const valid = unackedSeqs.every(
      (seq, i) => seq < readSeq && (i === 0 ? seq === nextSeq : seq > unackedSeqs[i - 1]!),
    );
    if (!valid || !Number.isSafeInteger(readSeq) || (seqCount === 0 && readSeq !== nextSeq))
      return null;
    const group = { readSeq, unackedSeqs };
    return { kind: "put", name, filter, shared, nextSeq, lastActiveUs, group, ...owner };
  } catch {
    return null;
  }
}
