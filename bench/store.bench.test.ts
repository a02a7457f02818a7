import { expect, test } from "bun:test";
import { runStoreBench } from "./store.bench.ts";

test("store benchmark smoke: every body runs once with tiny sizes", async () => {
  const rows = await runStoreBench({ smoke: true });
  expect(rows.length).toBe(16);
  for (const row of rows) expect(row.messages).toBeGreaterThan(0);
}, 60_000);
