import { expect, test } from "bun:test";
import { getU64, setU64 } from "./record.ts";

test("getU64 reads what setU64 wrote, around the int32 and u32 bounds and up to 2^53 - 1", () => {
  const view = new DataView(new ArrayBuffer(8));
  for (const value of [
    0,
    1,
    2 ** 31 - 1,
    2 ** 31,
    2 ** 32 - 1,
    2 ** 32,
    2 ** 32 + 7,
    1_733_000_000_000_000,
    Number.MAX_SAFE_INTEGER,
  ]) {
    setU64(view, 0, value);
    expect(getU64(view, 0)).toBe(value);
  }
});

test("getU64 gives small values as int32 in optimized code too, with large ones read by the same function", () => {
  // Pack offsets and sizes decoded as boxed doubles made the reader's optimized code exit (a
  // speculation on int32 failing) thousands of times per whole-stream read. The loop runs long
  // enough for the engine to optimize getU64 (and to inline it here), reading times (> 2^32) too.
  const { describe } = require("bun:jsc") as { describe: (value: unknown) => string };
  const view = new DataView(new ArrayBuffer(16));
  setU64(view, 0, 12_345);
  setU64(view, 8, 1_733_000_000_000_000);
  // As the manifest decode does: both kinds read into the fields of one object per record.
  const decoded: { offset: number; timeUs: number }[] = [];
  for (let i = 0; i < 300_000; i++)
    decoded.push({ offset: getU64(view, 0), timeUs: getU64(view, 8) });
  expect(
    decoded.every((record) => record.offset === 12_345 && record.timeUs === 1_733_000_000_000_000),
  ).toBe(true);
  let doubles = 0;
  for (const record of decoded) if (describe(record.offset).startsWith("Double")) doubles++;
  expect(doubles).toBe(0);
});
