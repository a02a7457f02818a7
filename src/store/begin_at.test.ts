/**
 * Store.beginAt: an empty store begins at seq N (a replica of a leader whose retention removed
 * seq 1): its appends continue from N, it reopens at N (empty, and with records), reads from seq 1
 * start at N, retention and repair keep the seqs, and a store that is not empty refuses.
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { Filter } from "../topic/filter.ts";
import { Store, type StoreOptions } from "./mod.ts";

const OPTIONS: StoreOptions = { segmentBytesMax: 2048, journalBytesMax: 8192 };

function publish(store: Store, count: number): void {
  for (let i = 0; i < count; i++) {
    const seq = store.nextSeq;
    store.append(seq, 1000 + seq, `t/${seq % 3}`, new TextEncoder().encode(`m${seq}`));
  }
}

async function seqsFrom(store: Store, seq: number): Promise<number[]> {
  const reader = store.read(Filter.of("**"), { seq });
  const out: number[] = [];
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
    for (const message of batch) out.push(message.seq);
  return out;
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("an empty store begins at seq N, durably; appends, reads, retention and repair go on from N", async () => {
  const sim = new SimDisk();
  let { store } = await Store.open(sim.view(), OPTIONS);
  await store.beginAt(5000);
  expect(store.nextSeq).toBe(5000);
  expect(store.committedSeq).toBe(4999);
  expect(store.firstSeqHeld).toBe(5000);
  await store.close();
  // Empty, reopened: still at N (the journal header's first seq).
  ({ store } = await Store.open(sim.view(), OPTIONS));
  expect(store.nextSeq).toBe(5000);
  expect(store.firstSeqHeld).toBe(5000);
  publish(store, 600);
  await store.commit();
  expect(await seqsFrom(store, 1)).toEqual(range(5000, 5599));
  // A crash (no clean close): the journals give the seqs back.
  sim.crash();
  ({ store } = await Store.open(sim.view(), OPTIONS));
  expect(store.nextSeq).toBe(5600);
  expect(await seqsFrom(store, 1)).toEqual(range(5000, 5599));
  expect(store.firstSeqHeld).toBe(5000);
  // Retention: the oldest files go, the rest still read, and the seqs go on.
  await store.sortAll();
  const removed = await store.retain({ bytes: 4096 }, 0);
  expect(removed.segmentsRemoved).toBeGreaterThan(0);
  const held = store.firstSeqHeld;
  expect(held).toBeGreaterThan(5000);
  expect((await seqsFrom(store, 1))[0]).toBe(held);
  publish(store, 10);
  await store.close();
  // Repair reads it the same way.
  ({ store } = await Store.open(sim.view(), { ...OPTIONS, repair: true }));
  expect(store.nextSeq).toBe(5610);
  const seqs = await seqsFrom(store, 1);
  expect(seqs[0]).toBe(held);
  expect(seqs[seqs.length - 1]).toBe(5609);
  await store.close();
});

test("beginAt is durable once it resolves: a crash right after keeps seq N", async () => {
  const sim = new SimDisk();
  const { store } = await Store.open(sim.view(), OPTIONS);
  await store.beginAt(77);
  sim.crash();
  const again = (await Store.open(sim.view(), OPTIONS)).store;
  expect(again.nextSeq).toBe(77);
  await again.close();
  const last = (await Store.open(sim.view(), OPTIONS)).store;
  expect(last.nextSeq).toBe(77);
  await last.close();
});

test("beginAt refuses a store that holds or held anything", async () => {
  const { store } = await Store.open(new SimDisk().view(), OPTIONS);
  publish(store, 1);
  await store.commit();
  await expect(store.beginAt(100)).rejects.toThrow("not empty");
  expect(store.nextSeq).toBe(2);
  await store.close();
});
