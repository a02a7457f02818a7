import { expect, test } from "bun:test";
import { spinWindows, steadiness } from "./cpu_steadiness.ts";

test("steadiness: slow windows, stalls and their longest run, as shares of the best window", () => {
  // 100 windows of 10 ms: full speed but for a 30 ms stall at 10% and a 10 ms one at 40%, and
  // one window at 70% (below 80%, not slow).
  const work = new Float64Array(100).fill(1000);
  work[10] = work[11] = work[12] = 100;
  work[50] = 400;
  work[70] = 700;
  const found = steadiness(work);
  expect(found.windows).toBe(100);
  expect(found.medianShare).toBe(1);
  expect(found.p1Share).toBeCloseTo(0.1); // window floor(100 / 100) of the ascending order: a stall window
  expect(found.slowShare).toBeCloseTo(0.04);
  expect(found.below80Share).toBeCloseTo(0.05);
  expect(found.stallsPerSecond).toBeCloseTo(2); // two stalls in one second
  expect(found.longestStallMs).toBe(30);
});

test("steadiness of nothing, and of an even spin", () => {
  expect(steadiness(new Float64Array(0)).windows).toBe(0);
  const even = steadiness(new Float64Array(50).fill(7));
  expect(even.slowShare).toBe(0);
  expect(even.stallsPerSecond).toBe(0);
  expect(even.medianShare).toBe(1);
});

test("spinWindows counts work in each window of a fake clock", () => {
  // Each clock read advances 1 ms: every 10 ms window sees ten reads, so about ten units of work.
  let now = 0;
  const work = spinWindows(() => now++, 50);
  expect(work.length).toBe(5);
  for (const units of work) expect(units).toBeGreaterThanOrEqual(9);
});
