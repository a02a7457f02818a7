/**
 * crc32: CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of every persisted
 * record and file header. Pure and table-driven (slicing-by-8, eight 256-entry tables built once),
 * so the store core needs no runtime hook; src/runtime/crc32.ts offers the runtime's native one,
 * which the store takes through `StoreOptions.crc32` where speed matters. Both give equal results.
 */

/** A CRC-32 function over a byte range. */
export type Crc32 = (bytes: Uint8Array) => number;

const TABLES = buildTables();

function buildTables(): Uint32Array {
  const tables = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    tables[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = tables[n];
    for (let t = 1; t < 8; t++) {
      c = tables[c & 0xff] ^ (c >>> 8);
      tables[t * 256 + n] = c >>> 0;
    }
  }
  return tables;
}

/** CRC-32 of `bytes` (unsigned 32-bit result), as zlib's crc32 and Bun.hash.crc32 compute it. */
export function crc32(bytes: Uint8Array): number {
  const t = TABLES;
  let crc = 0xffffffff;
  let i = 0;
  const length = bytes.length;
  const end8 = length - (length & 7);
  while (i < end8) {
    const a = (crc ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24))) >>> 0;
    const b = bytes[i + 4] | (bytes[i + 5] << 8) | (bytes[i + 6] << 16) | (bytes[i + 7] << 24);
    crc =
      t[1792 + (a & 0xff)] ^
      t[1536 + ((a >>> 8) & 0xff)] ^
      t[1280 + ((a >>> 16) & 0xff)] ^
      t[1024 + (a >>> 24)] ^
      t[768 + (b & 0xff)] ^
      t[512 + ((b >>> 8) & 0xff)] ^
      t[256 + ((b >>> 16) & 0xff)] ^
      t[(b >>> 24) & 0xff];
    i += 8;
  }
  while (i < length) crc = t[(crc ^ bytes[i++]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
