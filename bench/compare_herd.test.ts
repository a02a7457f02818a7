/**
 * Tests of bench/compare_herd.ts, the herd of bench/nats_compare.ts (which needs nats-server and
 * is not run by the tests): times count from the common start, the aggregate rate is every
 * client's messages over the slowest client's time, and client k reads partition k mod N.
 */
import { expect, test } from "bun:test";
import { herdPartition, runHerd, summarizeHerd } from "./compare_herd.ts";
import type { ReplayTiming } from "./compare_nats.ts";

const timing = (delivered: number, firstAt: number, endAt: number): ReplayTiming => ({
  delivered,
  wallMs: endAt - firstAt,
  firstMessageMs: 0,
  connectMs: 0,
  firstAt,
  endAt,
});

test("a herd's figures count from its common start", () => {
  const figures = summarizeHerd(1000, [
    timing(100, 1010, 1100),
    timing(100, 1020, 1200),
    timing(200, 1005, 1400),
  ]);
  expect(figures).toEqual({
    clients: 3,
    delivered: 400,
    wallMs: 400,
    perSecond: 1000,
    medianMs: 200,
    slowestMs: 400,
    fastestMs: 100,
    firstMessageMedianMs: 10,
  });
  expect(() => summarizeHerd(0, [])).toThrow();
});

test("client k of a herd replays partition k mod the partitions, all at once", async () => {
  expect(herdPartition(0, 100)).toBe(0);
  expect(herdPartition(137, 100)).toBe(37);
  const asked: number[] = [];
  let running = 0;
  let most = 0;
  const figures = await runHerd(5, 3, async (partition) => {
    asked.push(partition);
    running++;
    most = Math.max(most, running);
    await Bun.sleep(5);
    running--;
    const now = performance.now();
    return timing(partition + 1, now, now);
  });
  expect(asked).toEqual([0, 1, 2, 0, 1]);
  expect(most).toBe(5);
  expect(figures.delivered).toBe(1 + 2 + 3 + 1 + 2);
});
