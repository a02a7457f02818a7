/**
 * crc32: CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of every persisted
 * record and file header. Pure and table-driven (slicing-by-8, eight 256-entry tables built once),
 * so the store core needs no runtime hook; src/runtime/crc32.ts offers the runtime's native one,
 * which the store takes through `StoreOptions.crc32` where speed matters. Both give equal results.
 */

/**
 * A CRC-32 function over a byte range. With `seed` (the CRC-32 of the bytes before these) it
 * continues that checksum: crc32(b, crc32(a)) = crc32(a ++ b), as zlib's and Bun's take it.
 */
export type Crc32 = (bytes: Uint8Array, seed?: number) => number;

/**
 * Signed 32-bit throughout: the tables are an Int32Array and the running value starts at -1 (the
 * same bits as 0xFFFFFFFF). With a Uint32Array (entries above 2^31 read back as doubles) and an
 * unsigned start, the engine compiled this loop well in some callers and not in others (inside
 * the journal's record encoder, many times slower than standalone: docs/benchmarks.md#design-notes-figures-moved-from-code-comments).
 * Why exactly was not found; this form measured fast in every caller tried.
 */
const TABLES = buildTables();

function buildTables(): Int32Array {
  const tables = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    tables[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = tables[n];
    for (let t = 1; t < 8; t++) {
      c = tables[c & 0xff] ^ (c >>> 8);
      tables[t * 256 + n] = c;
    }
  }
  return tables;
}

/** CRC-32 of `bytes` (unsigned 32-bit result), as zlib's crc32 and Bun.hash.crc32 compute it. */
export function crc32(bytes: Uint8Array, seed = 0): number {
  return crc32Of(bytes, 0, bytes.length, seed);
}

/** Ranges up to this long are checksummed in JavaScript: as fast as a native call, and no view to allocate. */
export const RANGE_JS_BYTES_MAX = 128;

/**
 * CRC-32 of bytes[start, end): `native` over a view for long ranges, the table here for short
 * ones (every record of small messages: no allocation per record on the hot paths). With `view`
 * (a DataView whose offset i is bytes[i], as the record codec keeps them) the table loop reads
 * four bytes per load: ~0.7x the time of byte loads for a 100-byte record.
 */
export function crc32Range(
  bytes: Uint8Array,
  start: number,
  end: number,
  native: Crc32,
  view?: DataView,
): number {
  if (end - start > RANGE_JS_BYTES_MAX) return native(bytes.subarray(start, end));
  return view === undefined
    ? crc32Of(bytes, start, end, 0)
    : crc32OfView(view, bytes, start, end, 0);
}

/**
 * CRC-32 of bytes[start, end) followed by all of `tail` (a record's header and topic, then its
 * payload as the caller passed it): the same value as crc32Range over the two laid end to end,
 * with no view built for a long tail (`native` continues from the short head's CRC).
 */
export function crc32RangeThen(
  bytes: Uint8Array,
  start: number,
  end: number,
  tail: Uint8Array,
  native: Crc32,
  view?: DataView,
): number {
  const head =
    view === undefined ? crc32Of(bytes, start, end, 0) : crc32OfView(view, bytes, start, end, 0);
  return tail.length <= RANGE_JS_BYTES_MAX
    ? crc32Of(tail, 0, tail.length, head)
    : native(tail, head);
}

/** crc32Of reading bytes[start, end) eight at a time through `view` (offset i of `view` is bytes[i]). */
function crc32OfView(
  view: DataView,
  bytes: Uint8Array,
  start: number,
  end: number,
  seed: number,
): number {
  let crc = ~seed;
  let i = start | 0;
  const end8 = end - ((end - start) & 7);
  while (i < end8) {
    crc = slice8(crc ^ view.getInt32(i, true), view.getInt32(i + 4, true));
    i += 8;
  }
  return crc32Tail(bytes, i, end, crc);
}

function crc32Of(bytes: Uint8Array, start: number, end: number, seed: number): number {
  let crc = ~seed;
  let i = start;
  const end8 = end - ((end - start) & 7);
  while (i < end8) {
    const a = crc ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24));
    crc = slice8(
      a,
      bytes[i + 4] | (bytes[i + 5] << 8) | (bytes[i + 6] << 16) | (bytes[i + 7] << 24),
    );
    i += 8;
  }
  return crc32Tail(bytes, i, end, crc);
}

/** One slicing-by-8 step: the running value after eight bytes, `a` (xored with it) and `b`, little-endian words. */
function slice8(a: number, b: number): number {
  const t = TABLES;
  return (
    t[1792 + (a & 0xff)] ^
    t[1536 + ((a >>> 8) & 0xff)] ^
    t[1280 + ((a >>> 16) & 0xff)] ^
    t[1024 + (a >>> 24)] ^
    t[768 + (b & 0xff)] ^
    t[512 + ((b >>> 8) & 0xff)] ^
    t[256 + ((b >>> 16) & 0xff)] ^
    t[(b >>> 24) & 0xff]
  );
}

/** The running value `crc` continued over bytes[i, end) one byte at a time, finished. */
function crc32Tail(bytes: Uint8Array, i: number, end: number, crc: number): number {
  const t = TABLES;
  while (i < end) crc = t[(crc ^ bytes[i++]) & 0xff] ^ (crc >>> 8);
  return ~crc >>> 0;
}
