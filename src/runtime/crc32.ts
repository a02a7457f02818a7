/**
 * nativeCrc32: the runtime's native CRC-32 (Bun.hash.crc32), handed to the store through
 * `StoreOptions.crc32` by runtime wiring. Equal to the pure src/store/crc32.ts, several times faster.
 */
import type { Crc32 } from "../store/crc32.ts";

/** CRC-32 (IEEE) computed natively by Bun. */
export const nativeCrc32: Crc32 = (bytes, seed = 0) => Bun.hash.crc32(bytes, seed) >>> 0;
