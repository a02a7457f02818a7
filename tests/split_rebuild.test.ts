/**
 * A manifest rebuilt from the files after a re-split a crash cut short: the complete split
 * before it and the segments after that are kept, whatever the cut-short generation holds.
 */
import { expect, test } from "bun:test";
import { executeSplit, type SplitHost } from "../src/split/executor.ts";
import { inProcessRunner, storeHost } from "../src/split/in_process.ts";
import type { SplitPlan } from "../src/split/plan.ts";
import type { VolumeTable } from "../src/split/volume_table.ts";
import { crc32, Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter, partitionOf } from "../src/topic/mod.ts";
import { SMALL_LIMITS } from "./fixtures/store_helpers.ts";

const TOPICS = ["app/orders/a", "app/orders/b"];

/** One store per topic. */
function storePerTopic(table: VolumeTable): SplitPlan {
  return {
    algorithm: "adaptive",
    subtrees: table.topics.map((topic, index) => ({
      id: topic.replaceAll("/", "+"),
      partition: partitionOf(topic),
      topics: Int32Array.from([index]),
      bytes: table.bytes[index],
    })),
    budget: null,
    budgetRaisedTo: null,
  };
}

for (const [what, pick] of [
  ["its newest store", -1],
  ["its other store", -2],
] as const) {
  test(`the manifest lost after a re-split cut short (${what} never written): the rebuild keeps every record`, async () => {
    const disk = new SimDisk({ seed: 3 });
    const options = { ...SMALL_LIMITS, crc32 };
    let store = (await Store.open(disk, options)).store;
    const publish = async (count: number, topicOf: (seq: number) => string) => {
      for (let i = 0; i < count; i++)
        store.append(
          store.nextSeq,
          1000 + store.nextSeq,
          topicOf(store.nextSeq),
          new Uint8Array(20),
        );
      await store.commit();
      await store.sortAll();
    };
    const runner = inProcessRunner(disk, { crc32, chunkBytes: 256 });
    const split = (host: SplitHost) =>
      executeSplit(host, runner, disk, { plan: storePerTopic, workers: 1, intervalBytes: 128 });
    await publish(100, (seq) => TOPICS[seq % 2]);
    expect((await split(storeHost(store))).switched).toBe(true); // G1: seqs 1–100
    await publish(100, (seq) => (seq % 4 === 0 ? TOPICS[1] : TOPICS[0])); // segments 101–200
    // G2, a re-split of everything, whose switch never comes (a crash after its files).
    await split({
      ...storeHost(store),
      switchLayout: async () => Promise.reject(new Error("crash before the SWAP")),
    }).catch(() => {});
    await store.close({ sort: false });
    const g2 = disk
      .paths()
      .filter((path) => path.endsWith(".sto"))
      .sort()
      .at(pick) as string;
    disk.erase(g2);
    disk.erase(g2.replace(".sto", ".idx"));
    disk.erase("MANIFEST");
    const opened = await Store.open(disk, options);
    store = opened.store;
    expect(opened.recovery.manifestRebuilt).toBe(true);
    const seqs: number[] = [];
    for await (const message of store.read(Filter.of("**"), { seq: 1 })) seqs.push(message.seq);
    expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    await store.close({ sort: false });
  });
}
