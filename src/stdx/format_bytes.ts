/**
 * format_bytes: a byte count as people read it, in binary units (the units of the size flags,
 * `--tip-bytes 256MiB`). One format for every human output: the CLI, the benchmarks' tables and,
 * by a test that keeps its copy equal, the web UI (src/admin/ui/format.js).
 */

/** Bytes in binary units: 512 B, 4.0 KiB, 256 MiB. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0
    ? `${value.toFixed(0)} B`
    : `${value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
}
