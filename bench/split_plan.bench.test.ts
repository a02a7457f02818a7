/**
 * Smoke test of bench/split_plan.bench.ts: the generators are deterministic and valid, and the
 * benchmark body runs once per planner on a small table with results that make sense, so the
 * bench cannot rot.
 */
import { expect, test } from "bun:test";
import { parseVolumeTable } from "../src/split/mod.ts";
import { flatTable, planOnce, zipfTable } from "./split_plan.bench.ts";

test("generators are deterministic, valid and of the asked size", () => {
  for (const generate of [zipfTable, flatTable]) {
    const csv = generate(2_000, 7);
    expect(generate(2_000, 7)).toBe(csv);
    expect(generate(2_000, 8)).not.toBe(csv);
    const parsed = parseVolumeTable(csv);
    expect(parsed.ok ? parsed.table.topics.length : parsed.reason).toBe(2_000);
  }
});

test("planOnce: adaptive at the heuristic's budget wastes far less on the Zipf tree", () => {
  const csv = zipfTable(2_000, 7);
  const heuristic = planOnce(csv, "heuristic");
  const adaptive = planOnce(csv, "adaptive");
  expect(heuristic.topics).toBe(2_000);
  expect(heuristic.partitions).toBe(20);
  expect(adaptive.stores).toBe(heuristic.stores);
  expect(adaptive.wastedBytes * 3).toBeLessThan(heuristic.wastedBytes); // 4.2x here, 17x at 100,000 topics
  for (const run of [heuristic, adaptive])
    expect(Math.min(run.parseMs + run.planMs + run.metricsMs, run.cpuMs)).toBeGreaterThan(0);
  const flat = planOnce(flatTable(2_000, 7), "adaptive", 20);
  expect([flat.partitions, flat.stores]).toEqual([1, 20]);
});
