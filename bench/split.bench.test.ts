/** Smoke test of bench/split.bench.ts: the body runs once on 1 MB and the split pays off. */
import { expect, test } from "bun:test";
import { runSplitBench } from "./split.bench.ts";

test("split bench body runs; adaptive reads less than unsplit", async () => {
  const rows = await runSplitBench({ megabytes: 1, runs: 1 });
  const ratio = (name: string) =>
    rows.find((row) => row.case === `recover small topic, ${name}`)?.readPerDelivered as number;
  expect(ratio("adaptive")).toBeLessThan(ratio("unsplit"));
  expect(ratio("adaptive")).toBeLessThan(1.5);
}, 30_000);
