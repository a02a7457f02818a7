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

test("retention of files whose seqs the live journal still covers: firstSeqHeld is what is read", async () => {
  // One journal (64 KiB) covers every seq: its first seq (1) is no longer held once the files its records
  // were sorted into are removed (those records are not read from the journal again).
  const { store } = await Store.open(new SimDisk().view(), {
    segmentBytesMax: 4096,
    journalBytesMax: 65536,
  });
  const publish = (count: number) => {
    for (let i = 0; i < count; i++) {
      const seq = store.nextSeq;
      store.append(seq, 1000 + seq, `t/${seq % 7}`, new Uint8Array(20));
    }
  };
  publish(1000);
  await store.commit();
  await store.idle();
  store.maintain(1e12);
  await store.idle();
  expect(store.layout().flatMap((log) => log.segments).length).toBe(14);
  // Some files removed: the oldest held is the oldest seq a reader from seq 1 gets.
  await store.retain({ bytes: 40000 }, 0);
  expect(store.firstSeqHeld).toBeGreaterThan(1);
  expect(await firstReadable(store)).toBe(store.firstSeqHeld);
  // Every file removed: nothing is held, and a reader from seq 1 gets what comes next.
  await store.retain({ bytes: 1 }, 0);
  expect(store.layout()).toEqual([]);
  expect(store.firstSeqHeld).toBe(1001);
  publish(10);
  await store.commit();
  expect(store.firstSeqHeld).toBe(1001);
  const reader = store.read(Filter.of("**"), { seq: 1 });
  const seqs: number[] = [];
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
    for (const message of batch) seqs.push(message.seq);
  expect(seqs).toEqual(Array.from({ length: 10 }, (_, i) => 1001 + i));
  await store.close();
});
