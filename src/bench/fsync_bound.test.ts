/**
 * fsync_bound: one append + sync per round on the probe file, the median of the measured rounds,
 * the probe removed afterwards, and the rate bound derived from it.
 */
import { describe, expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { boundRate, measureFsyncBound } from "./fsync_bound.ts";

describe("measureFsyncBound", () => {
  test("times append + sync per round, on a growing file it removes afterwards", async () => {
    const disk = new SimDisk();
    // Each clock read advances 0.25 ms: a round (read before, read after) measures 250 µs.
    let now = 0;
    const nowMs = () => (now += 0.25);
    const bound = await measureFsyncBound(disk, { roundBytes: 6_400, rounds: 30, nowMs });
    expect(bound.medianUs).toBeCloseTo(250, 6);
    expect(bound.p90Us).toBeCloseTo(250, 6);
    expect(bound.rounds).toBe(30);
    // The 20 warm-up rounds and the 30 measured ones: one write and one sync each.
    expect(disk.stats.syncs).toBe(50);
    expect(disk.stats.bytesWritten).toBe(50 * 6_400);
    expect(await disk.list("")).toEqual([]);
    expect(boundRate(bound, 64)).toBeCloseTo(256_000, 3);
  });
});
