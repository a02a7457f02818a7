import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { crc32, crc32Range, crc32RangeThen } from "./crc32.ts";

describe("crc32", () => {
  test("known vectors (IEEE, as zlib)", () => {
    const enc = new TextEncoder();
    expect(crc32(new Uint8Array(0))).toBe(0);
    expect(crc32(enc.encode("123456789")).toString(16)).toBe("cbf43926");
    expect(crc32(enc.encode("The quick brown fox jumps over the lazy dog")).toString(16)).toBe(
      "414fa339",
    );
    expect(crc32(new Uint8Array(32)).toString(16)).toBe("190a55ad");
  });

  test("equals the runtime's native crc32 on any bytes and any split offset", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(7), (bytes, skip) => {
        const view = bytes.subarray(Math.min(skip, bytes.length));
        expect(crc32(view)).toBe(Bun.hash.crc32(view) >>> 0);
      }),
      fcParams(),
    );
  });

  test("crc32Range equals crc32 of the range, short (JavaScript) and long (native) alike", () => {
    const native = (bytes: Uint8Array) => Bun.hash.crc32(bytes) >>> 0;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.nat(400), fc.nat(400), (bytes, a, b) => {
        const start = Math.min(a, b, bytes.length);
        const end = Math.min(Math.max(a, b), bytes.length);
        expect(crc32Range(bytes, start, end, native)).toBe(crc32(bytes.subarray(start, end)));
        // Through a DataView of the same bytes (four at a time), at any offset and alignment.
        const shifted = new Uint8Array(bytes.length + 3).subarray(3);
        shifted.set(bytes);
        const view = new DataView(shifted.buffer, shifted.byteOffset, shifted.length);
        expect(crc32Range(shifted, start, end, native, view)).toBe(
          crc32(bytes.subarray(start, end)),
        );
      }),
      fcParams(),
    );
  });

  test("a seed continues a checksum: crc32(b, crc32(a)) = crc32(a ++ b), pure and native alike", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 300 }), (a, b) => {
        const joined = new Uint8Array(a.length + b.length);
        joined.set(a);
        joined.set(b, a.length);
        expect(crc32(b, crc32(a))).toBe(crc32(joined));
        expect(Bun.hash.crc32(b, crc32(a)) >>> 0).toBe(crc32(joined));
      }),
      fcParams(),
    );
  });

  test("crc32RangeThen equals crc32 of the range followed by the tail, short and long tails alike", () => {
    const native = (bytes: Uint8Array, seed?: number) => Bun.hash.crc32(bytes, seed) >>> 0;
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.nat(200),
        fc.nat(200),
        fc.uint8Array({ maxLength: 400 }),
        (bytes, a, b, tail) => {
          const start = Math.min(a, b, bytes.length);
          const end = Math.min(Math.max(a, b), bytes.length);
          const joined = new Uint8Array(end - start + tail.length);
          joined.set(bytes.subarray(start, end));
          joined.set(tail, end - start);
          expect(crc32RangeThen(bytes, start, end, tail, native)).toBe(crc32(joined));
          expect(
            crc32RangeThen(
              bytes,
              start,
              end,
              tail,
              native,
              new DataView(bytes.buffer, bytes.byteOffset, bytes.length),
            ),
          ).toBe(crc32(joined));
        },
      ),
      fcParams(),
    );
  });
});
