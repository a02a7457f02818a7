/**
 * table: renders scenario results as markdown tables and formats their numbers (rates with SI
 * prefixes, bytes, milliseconds). Pure: strings in, strings out. Numbers are right-aligned,
 * text left-aligned; a missing value prints as "-".
 */

/** One column of a results table: which field of a row, its header, how to print it. */
export interface Column {
  key: string;
  header: string;
  format?: (value: number) => string;
}

/** A results row: named numbers and labels (also what `--json` prints). */
export type Row = Record<string, number | string | boolean | null>;

/** A markdown table of `rows` under `columns`. */
export function markdownTable(columns: readonly Column[], rows: readonly Row[]): string {
  const cells = rows.map((row) => columns.map((column) => formatCell(row[column.key], column)));
  const numeric = columns.map((column) => rows.some((row) => typeof row[column.key] === "number"));
  const widths = columns.map((column, i) =>
    Math.max(3, column.header.length, ...cells.map((line) => line[i].length)),
  );
  const pad = (text: string, i: number) =>
    numeric[i] ? text.padStart(widths[i]) : text.padEnd(widths[i]);
  const lines = [
    `| ${columns.map((column, i) => pad(column.header, i)).join(" | ")} |`,
    `| ${widths.map((width, i) => (numeric[i] ? `${"-".repeat(width - 1)}:` : "-".repeat(width))).join(" | ")} |`,
    ...cells.map((line) => `| ${line.map(pad).join(" | ")} |`),
  ];
  return `${lines.join("\n")}\n`;
}

/** One value of a row as its column prints it ("-" when missing). */
export function formatCell(value: Row[string] | undefined, column: Column): string {
  if (value === undefined || value === null) return "-";
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "-";
    return column.format !== undefined ? column.format(value) : formatNumber(value);
  }
  if (typeof value === "boolean") return value ? "yes" : "no";
  return value;
}

/** A plain number: integers with thousands separators, others with 3 significant digits. */
export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return value.toPrecision(3);
}

export { formatBytes } from "../stdx/format_bytes.ts";

/** A count or rate with an SI prefix: 1.23 M, 456 k, 789. */
export function formatSi(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1e9) return `${(value / 1e9).toFixed(2)} G`;
  if (magnitude >= 1e6) return `${(value / 1e6).toFixed(2)} M`;
  if (magnitude >= 1e4) return `${(value / 1e3).toFixed(0)} k`;
  if (magnitude >= 1e3) return `${(value / 1e3).toFixed(1)} k`;
  return value.toFixed(0);
}

/** Milliseconds with precision that fits their size: 0.123, 4.56, 78.9, 1234. */
export function formatMs(ms: number): string {
  if (ms >= 1000) return ms.toFixed(0);
  if (ms >= 100) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(2);
  return ms.toFixed(3);
}

/** A ratio as "12.3x". */
export function formatRatio(ratio: number): string {
  return `${ratio >= 100 ? ratio.toFixed(0) : ratio.toFixed(1)}x`;
}

/** Megabytes (10^6) per second with one decimal. */
export function formatMBps(bytesPerSecond: number): string {
  return (bytesPerSecond / 1e6).toFixed(1);
}
