/**
 * Store.firstSeqHeld: every seq below it is gone, so the broker may give back the topic ids of
 * topics with no record from there on. It moves up with each retention (the cached value is
 * recomputed), and no message below it can be read.
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { Filter } from "../topic/filter.ts";
import { Store, type StoreOptions } from "./mod.ts";

const OPTIONS: StoreOptions = {
  segmentBytesMax: 2048,
  journalBytesMax: 4096,
  journalRetainedBytesMax: 16384,
  indexIntervalBytes: 128,
  segmentAgeUsMax: 1e15,
};

async function firstReadable(store: Store): Promise<number> {
  const reader = store.read(Filter.of("**"), { seq: 1 });
  for (;;) {
    const batch = await reader.nextBatch();
    if (batch.length === 0) return store.nextSeq;
    if (batch.length > 0) return batch[0].seq;
  }
}

test("firstSeqHeld starts at 1 and moves up with each retention; nothing below it is read", async () => {
  const { store } = await Store.open(new SimDisk().view(), OPTIONS);
  const publish = (count: number) => {
    for (let i = 0; i < count; i++) {
      const seq = store.nextSeq;
      store.append(seq, 1000 + seq, `p${seq % 5}/t${seq % 11}`, new Uint8Array(20));
    }
  };
  publish(400);
  await store.commit();
  await store.idle();
  expect(store.firstSeqHeld).toBe(1);
  const held: number[] = [];
  for (const bytes of [6000, 3000]) {
    const removed = await store.retain({ bytes }, 0);
    expect(removed.segmentsRemoved).toBeGreaterThan(0);
    held.push(store.firstSeqHeld);
    expect(await firstReadable(store)).toBeGreaterThanOrEqual(store.firstSeqHeld);
  }
  expect(held[0]).toBeGreaterThan(1);
  expect(held[1]).toBeGreaterThan(held[0]);
  await store.close();
});
