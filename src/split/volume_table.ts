/**
 * VolumeTable: measured per-topic volumes, the input of every split planner, and its CSV parser.
 *
 * Owns: parsing and validating `topic,bytes,messages` CSV text (RFC 4180 quoting, CRLF or LF, an
 * optional UTF-8 BOM) and building a table from rows. Does not read files (src/runtime does).
 * Invariants of a built table: 1..SPLIT_TOPICS_MAX topics, each valid (validateTopic), unique,
 * sorted segment by segment (code-unit order with "/" first: `a/b`, `a/b/c`, `a/b-x`), so every
 * subtree is one contiguous run and every planner and metric is deterministic whatever the input
 * order; bytes and messages are safe non-negative integers; bytesTotal <= SPLIT_VOLUME_BYTES_MAX.
 * Bad input is an expected failure: a reason naming the line (or row) and what is wrong.
 */
import {
  SPLIT_TOPICS_MAX,
  SPLIT_VOLUME_BYTES_MAX,
  SPLIT_VOLUMES_FILE_BYTES_MAX,
} from "../constants.ts";
import { validateTopic } from "../topic/mod.ts";

/** Per-topic volumes, sorted segment by segment (every subtree a contiguous run). */
export interface VolumeTable {
  readonly topics: readonly string[];
  readonly bytes: Float64Array;
  readonly messages: Float64Array;
  readonly bytesTotal: number;
}

/** One measured topic, as a caller builds a table without CSV. */
export interface VolumeRow {
  topic: string;
  bytes: number;
  messages: number;
}

/** A table, or why the input is not one. */
export type VolumeTableResult = { ok: true; table: VolumeTable } | { ok: false; reason: string };

/** The header line every volume table starts with. */
export const VOLUME_TABLE_HEADER = "topic,bytes,messages";

/** Parses CSV text with the header `topic,bytes,messages`; the reason names the line at fault. */
export function parseVolumeTable(text: string): VolumeTableResult {
  if (text.length > SPLIT_VOLUMES_FILE_BYTES_MAX) {
    return fail(
      `the table is ${text.length} bytes, more than the limit of ${SPLIT_VOLUMES_FILE_BYTES_MAX}`,
    );
  }
  const lines = text.split("\n");
  const header = stripLine(lines[0]).replace(/^\uFEFF/, "");
  if (header !== VOLUME_TABLE_HEADER) {
    return fail(
      `line 1: header is ${JSON.stringify(header.slice(0, 80))}, expected "${VOLUME_TABLE_HEADER}"`,
    );
  }
  const builder = new TableBuilder("line");
  for (let index = 1; index < lines.length; index++) {
    const line = stripLine(lines[index]);
    if (line.length === 0) {
      if (lines.slice(index).every((rest) => stripLine(rest).length === 0)) break; // trailing newlines
      return fail(`line ${index + 1}: empty line`);
    }
    // Fast path: an unquoted line of exactly two commas; anything else goes through splitCsvLine.
    const first = line.indexOf(",");
    const second = first < 0 ? -1 : line.indexOf(",", first + 1);
    let fields: string[] | string;
    if (second >= 0 && line.indexOf(",", second + 1) < 0 && line.indexOf('"') < 0) {
      fields = [line.slice(0, first), line.slice(first + 1, second), line.slice(second + 1)];
    } else {
      fields = splitCsvLine(line);
      if (typeof fields === "string") return fail(`line ${index + 1}: ${fields}`);
      if (fields.length !== 3)
        return fail(
          `line ${index + 1}: ${fields.length} fields, expected 3 (topic,bytes,messages)`,
        );
    }
    const reason = builder.add(
      fields[0],
      parseWhole(fields[1], "bytes"),
      parseWhole(fields[2], "messages"),
      index + 1,
    );
    if (reason !== null) return fail(reason);
  }
  return builder.build();
}

/** Builds a table from rows (tests, benchmarks, measured stats); the reason names the row index. */
export function volumeTableOf(rows: readonly VolumeRow[]): VolumeTableResult {
  const builder = new TableBuilder("row");
  for (let index = 0; index < rows.length; index++) {
    const { topic, bytes, messages } = rows[index];
    const reason = builder.add(
      topic,
      checkWhole(bytes, "bytes"),
      checkWhole(messages, "messages"),
      index,
    );
    if (reason !== null) return fail(reason);
  }
  return builder.build();
}

function fail(reason: string): VolumeTableResult {
  return { ok: false, reason };
}

/** A field's value, or the reason it is not a safe whole number. */
type Whole = number | { reason: string };

/** Collects validated rows; duplicates are found after sorting (they end up side by side). */
class TableBuilder {
  private readonly topics: string[] = [];
  private readonly bytes: number[] = [];
  private readonly messages: number[] = [];
  private readonly positions: number[] = [];
  private bytesTotal = 0;

  /** `unit` names a position in reasons: "line" (1-based CSV lines) or "row" (0-based indexes). */
  constructor(private readonly unit: "line" | "row") {}

  add(topic: string, bytes: Whole, messages: Whole, position: number): string | null {
    const where = `${this.unit} ${position}`;
    const invalid = validateTopic(topic);
    if (invalid !== null)
      return `${where}: invalid topic ${JSON.stringify(topic.slice(0, 300))}: ${invalid}`;
    if (typeof bytes !== "number") return `${where}: ${bytes.reason}`;
    if (typeof messages !== "number") return `${where}: ${messages.reason}`;
    if (this.topics.length === SPLIT_TOPICS_MAX)
      return `${where}: more than the limit of ${SPLIT_TOPICS_MAX} topics`;
    this.bytesTotal += bytes;
    if (this.bytesTotal > SPLIT_VOLUME_BYTES_MAX)
      return `${where}: the table's bytes pass the limit of ${SPLIT_VOLUME_BYTES_MAX}`;
    this.topics.push(topic);
    this.bytes.push(bytes);
    this.messages.push(messages);
    this.positions.push(position);
    return null;
  }

  build(): VolumeTableResult {
    const count = this.topics.length;
    if (count === 0) return fail("the table lists no topics");
    // Segment-wise order: "/" sorts before every character a topic may hold (all above 0x20).
    const keys = this.topics.map((topic) => topic.replaceAll("/", "\x01"));
    const order = Array.from({ length: count }, (_, index) => index);
    order.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b));
    let duplicate = -1;
    for (let rank = 1; rank < count; rank++) {
      if (
        keys[order[rank]] === keys[order[rank - 1]] &&
        (duplicate < 0 || order[rank] < order[duplicate])
      )
        duplicate = rank;
    }
    if (duplicate >= 0) {
      const [first, again] = [order[duplicate - 1], order[duplicate]];
      return fail(
        `${this.unit} ${this.positions[again]}: duplicate topic "${this.topics[again]}" (first on ${this.unit} ${this.positions[first]})`,
      );
    }
    const bytes = new Float64Array(count);
    const messages = new Float64Array(count);
    for (let rank = 0; rank < count; rank++) {
      bytes[rank] = this.bytes[order[rank]];
      messages[rank] = this.messages[order[rank]];
    }
    const topics = order.map((index) => this.topics[index]);
    return { ok: true, table: { topics, bytes, messages, bytesTotal: this.bytesTotal } };
  }
}

function stripLine(line: string): string {
  return line.endsWith("\r") ? line.slice(0, -1) : line;
}

function parseWhole(text: string, column: string): Whole {
  let value = 0;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9 || i === 16)
      return { reason: `${column} ${JSON.stringify(text.slice(0, 40))} is not a whole number` };
    value = value * 10 + digit; // at most 16 digits: below 2^64, exact until checkWhole's 2^53 test
  }
  if (text.length === 0) return { reason: `${column} "" is not a whole number` };
  return checkWhole(value, column);
}

function checkWhole(value: number, column: string): Whole {
  if (!Number.isSafeInteger(value) || value < 0)
    return { reason: `${column} ${value} is not a whole number` };
  if (value > SPLIT_VOLUME_BYTES_MAX)
    return { reason: `${column} ${value} is more than the limit of ${SPLIT_VOLUME_BYTES_MAX}` };
  return value;
}

/** Splits one CSV line into fields (RFC 4180 quotes, `""` inside quotes); a string is a reason. */
export function splitCsvLine(line: string): string[] | string {
  const fields: string[] = [];
  let at = 0;
  for (;;) {
    if (line.charCodeAt(at) === 0x22) {
      let value = "";
      let from = at + 1;
      for (;;) {
        const quote = line.indexOf('"', from);
        if (quote < 0) return `unterminated quoted field at column ${at + 1}`;
        value += line.slice(from, quote);
        if (line.charCodeAt(quote + 1) === 0x22) {
          value += '"';
          from = quote + 2;
          continue;
        }
        at = quote + 1;
        break;
      }
      fields.push(value);
      if (at === line.length) return fields;
      if (line.charCodeAt(at) !== 0x2c)
        return `unexpected character after a quoted field at column ${at + 1}`;
      at++;
      continue;
    }
    const comma = line.indexOf(",", at);
    if (comma < 0) {
      fields.push(line.slice(at));
      return fields;
    }
    fields.push(line.slice(at, comma));
    at = comma + 1;
  }
}
