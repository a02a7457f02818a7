import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { COPY_LOOP_BYTES_MAX, copyBytes } from "./bytes.ts";

test("copyBytes copies exactly the range, by loop or by set(), and nothing else", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 3 * COPY_LOOP_BYTES_MAX }), fc.nat(), fc.nat(), fc.nat(64), (src, a, b, at) => {
      const start = a % (src.length + 1);
      const length = b % (src.length - start + 1);
      const dst = new Uint8Array(at + length + 8).fill(0xee);
      copyBytes(dst, at, src, start, length);
      expect([...dst.subarray(at, at + length)]).toEqual([...src.subarray(start, start + length)]);
      expect(dst.subarray(0, at).every((x) => x === 0xee)).toBe(true);
      expect(dst.subarray(at + length).every((x) => x === 0xee)).toBe(true);
    }),
    fcParams(),
  );
});
