/**
 * u64 fields as JS numbers. Seqs, times and tokens are u64 on the wire but numbers in Aria, which
 * is exact only up to 2^53 - 1: reading returns -1 for a value above that (the caller turns it into
 * a decode error), writing asserts the value is a safe non-negative integer (a bug otherwise).
 */
import { assert } from "../stdx/assert.ts";

const TWO_POW_32 = 2 ** 32;
/** High word of Number.MAX_SAFE_INTEGER (2^53 - 1). */
const SAFE_HIGH_MAX = 0x1f_ffff;

/** The little-endian u64 at `at`, or -1 when it exceeds Number.MAX_SAFE_INTEGER. */
export function readU64(view: DataView, at: number): number {
  const high = view.getUint32(at + 4, true);
  if (high > SAFE_HIGH_MAX) return -1;
  return high * TWO_POW_32 + view.getUint32(at, true);
}

/** Writes `value` as a little-endian u64 at `at`. */
export function writeU64(view: DataView, at: number, value: number): void {
  assert(Number.isSafeInteger(value) && value >= 0, "u64 field holds a safe non-negative integer");
  const low = value % TWO_POW_32;
  view.setUint32(at, low, true);
  view.setUint32(at + 4, (value - low) / TWO_POW_32, true);
}
