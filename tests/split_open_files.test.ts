/**
 * A split task writes its stores' files one after another at the end: a partition planned into
 * thousands of stores (most too small to be written before the end) keeps few files open at once.
 */
import { expect, test } from "bun:test";
import { sourcesOf } from "../src/split/executor.ts";
import { runSplitTask } from "../src/split/rewrite_files.ts";
import { crc32, Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { wrapDisk, wrapFile } from "./fixtures/disk_wrappers.ts";

test("a split task of 2,000 single-topic stores holds at most a few files open at once, and closes them all", async () => {
  const sim = new SimDisk({ seed: 4 });
  const inner = sim.view();
  let open = 0;
  let most = 0;
  const disk = wrapDisk(inner, {
    open: async (path, mode, hints) => {
      const file = await inner.open(path, mode, hints);
      most = Math.max(most, ++open);
      return wrapFile(file, {
        close: () => {
          open--;
          return file.close();
        },
      });
    },
  });
  const count = 2000;
  const { store } = await Store.open(inner, { crc32 });
  for (let i = 0; i < count * 2; i++)
    store.append(store.nextSeq, 1000 + store.nextSeq, `p/q/t${i % count}`, new Uint8Array(50));
  await store.commit();
  await store.sortAll();
  const layout = store.layout()[0];
  const stores = Array.from({ length: count }, (_, i) => ({
    id: 1_000_000 + i,
    label: `t${i}`,
    topics: [`p/q/t${i}`],
  }));
  const result = await runSplitTask(
    disk,
    {
      partition: "p/q",
      generation: 1_000_000,
      sources: sourcesOf(layout),
      subtrees: stores,
      intervalBytes: 4096,
    },
    { crc32 },
  );
  expect(result.metas.length).toBe(count);
  expect(open).toBe(0);
  expect(most).toBeLessThan(16);
  expect(result.metas.reduce((sum, meta) => sum + meta.records, 0)).toBe(count * 2);
  await store.close({ sort: false });
});
