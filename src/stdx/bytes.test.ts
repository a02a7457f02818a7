import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import {
  COPY_LOOP_BYTES_MAX,
  COPY_VIEWS_BYTES_MAX,
  ViewCache,
  copyBytes,
  copyBytesViews,
} from "./bytes.ts";

/** `copy` into a fresh array must put src[start, start + length) at `at` and touch nothing else. */
function expectCopied(
  src: Uint8Array,
  start: number,
  length: number,
  at: number,
  copy: (dst: Uint8Array) => void,
): void {
  const dst = new Uint8Array(at + length + 8).fill(0xee);
  copy(dst);
  expect([...dst.subarray(at, at + length)]).toEqual([...src.subarray(start, start + length)]);
  expect(dst.subarray(0, at).every((x) => x === 0xee)).toBe(true);
  expect(dst.subarray(at + length).every((x) => x === 0xee)).toBe(true);
}

test("copyBytes copies exactly the range, by loop or by set(), and nothing else", () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 3 * COPY_LOOP_BYTES_MAX }),
      fc.nat(),
      fc.nat(),
      fc.nat(64),
      (src, a, b, at) => {
        const start = a % (src.length + 1);
        const length = b % (src.length - start + 1);
        expectCopied(src, start, length, at, (dst) => copyBytes(dst, at, src, start, length));
      },
    ),
    fcParams(),
  );
});

test("copyBytesViews copies exactly the range, through the views or by set(), at any offsets of the arrays", () => {
  const views = new ViewCache();
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 3 * COPY_VIEWS_BYTES_MAX }),
      fc.nat(7),
      fc.nat(),
      fc.nat(),
      fc.nat(64),
      (bytes, shift, a, b, at) => {
        // The source as a view at an odd offset of a larger buffer, like a frame inside a socket read.
        const src = new Uint8Array(bytes.length + shift).subarray(shift);
        src.set(bytes);
        const start = a % (src.length + 1);
        const length = b % (src.length - start + 1);
        expectCopied(src, start, length, at, (dst) =>
          copyBytesViews(dst, new DataView(dst.buffer), at, src, views, start, length),
        );
      },
    ),
    fcParams(),
  );
});

test("ViewCache builds one view per array and a new one for another array", () => {
  const views = new ViewCache();
  const a = new Uint8Array(16).subarray(4);
  const b = new Uint8Array(8);
  const view = views.of(a);
  expect(views.of(a)).toBe(view);
  expect([view.byteOffset, view.byteLength]).toEqual([4, 12]);
  expect(views.of(b)).not.toBe(view);
  expect(views.of(b).byteLength).toBe(8);
});
