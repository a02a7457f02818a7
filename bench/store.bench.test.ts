import { expect, test } from "bun:test";
import { distinctBytes, runStoreBench } from "./store.bench.ts";

test("store benchmark smoke: every body runs once with tiny sizes", async () => {
  const rows = await runStoreBench({ smoke: true });
  expect(rows.length).toBe(16);
  for (const row of rows) expect(row.messages).toBeGreaterThan(0);
  // The read rows report the bytes asked for and, at most as many, the distinct ones.
  for (const row of rows.filter((r) => r.note.includes("stored ("))) {
    const [, asked, distinct] = /read ([\d.]+)% .* \(([\d.]+)% distinct\)/.exec(row.note)!;
    expect(Number(distinct)).toBeGreaterThan(0);
    expect(Number(distinct)).toBeLessThanOrEqual(Number(asked));
  }
}, 60_000);

test("distinctBytes counts overlapping and repeated ranges once, per path", () => {
  const ranges = new Map([
    ["a", [100, 200, 0, 50, 150, 260, 100, 200, 40, 60]], // [0, 60) ∪ [100, 260)
    ["b", [0, 10, 10, 20]], // [0, 20): touching ranges
    ["c", []],
  ]);
  expect(distinctBytes(ranges)).toBe(60 + 160 + 20);
  expect(distinctBytes(new Map())).toBe(0);
});
