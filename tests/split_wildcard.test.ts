/**
 * A `*` filter over a partition split into subtree stores: the read is exact (the model's
 * messages), and it reads only the stores that hold a matching topic, so it reads a fraction of
 * the bytes a read of the whole partition reads.
 */
import { expect, test } from "bun:test";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { executeSplit } from "../src/split/executor.ts";
import { inProcessRunner, storeHost } from "../src/split/in_process.ts";
import { crc32, Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import { wrapDisk, wrapFile } from "./fixtures/disk_wrappers.ts";
import { payloadOf } from "./fixtures/store_helpers.ts";

const REGIONS = ["eu", "us", "asia", "africa", "oceania", "america", "arctic", "moon"];
const KINDS = ["created", "paid", "shipped", "refund"];

test("a * read of a split partition is exact and reads only stores holding a matching topic", async () => {
  const sim = new SimDisk({ seed: 11 });
  const { store } = await Store.open(sim.view(), { crc32 });
  const topics: string[] = [];
  for (let seq = 1; seq <= 4000; seq++) {
    // Refunds are rare: 1 message in 40; the rest spread over the other kinds.
    const kind = seq % 40 === 0 ? "refund" : KINDS[seq % 3];
    const topic = `shop/orders/${REGIONS[seq % REGIONS.length]}/${kind}`;
    topics.push(topic);
    store.append(seq, 1000 + seq, topic, payloadOf(seq, 200));
  }
  await store.commit();
  await store.sortAll();
  const report = await executeSplit(
    storeHost(store),
    inProcessRunner(sim.view(), { crc32: nativeCrc32 }),
    sim.view(),
    { plan: { algorithm: "adaptive", maxStores: 64 }, workers: 1, intervalBytes: 256 },
  );
  expect(report.switched).toBe(true);
  await store.idle();
  await store.close({ sort: false });

  let bytesRead = 0;
  const disk = wrapDisk(sim.view(), {
    open: async (path, mode, hints) => {
      const file = await sim.view().open(path, mode, hints);
      return wrapFile(file, {
        read: async (position, into) => {
          const read = await file.read(position, into);
          bytesRead += read;
          return read;
        },
        map: undefined,
      });
    },
  });
  const read = async (text: string) => {
    const { store: reopened } = await Store.open(disk, { crc32 });
    const stores = reopened.layout()[0].stores.length;
    bytesRead = 0;
    const seqs: number[] = [];
    for await (const message of reopened.read(Filter.of(text), { seq: 1 })) seqs.push(message.seq);
    const bytes = bytesRead;
    await reopened.close({ sort: false });
    return { seqs, bytes, stores };
  };
  const want = (re: RegExp) => topics.flatMap((t, i) => (re.test(t) ? [i + 1] : []));

  const all = await read("shop/orders/**");
  expect(all.stores).toBeGreaterThan(4);
  expect(all.seqs).toEqual(want(/./));
  const refunds = await read("shop/orders/*/refund");
  expect(refunds.seqs).toEqual(want(/\/refund$/));
  const leading = await read("*/orders/*/refund");
  expect(leading.seqs).toEqual(refunds.seqs);
  // The refunds are 1/40 of the bytes; the stores holding them, a small part of the rest.
  expect(refunds.bytes).toBeLessThan(all.bytes / 4);
  expect(leading.bytes).toBeLessThan(all.bytes / 4);
  const eu = await read("shop/*/eu/*");
  expect(eu.seqs).toEqual(want(/^shop\/orders\/eu\//));
});
