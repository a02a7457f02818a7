/**
 * Store.beginAt: an empty store begins at seq N (a replica of a leader whose retention removed
 * seq 1): its appends continue from N, it reopens at N (empty, and with records), reads from seq 1
 * start at N, retention and repair keep the seqs, and a store that is not empty refuses.
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { DiskOpClock, faultDisk, type LifeToken } from "../testing/sim_fault_disk.ts";
import { TraceHash } from "../testing/sim_trace.ts";
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

test("a crash at any disk operation of beginAt leaves a store that opens at seq 1 or at N", async () => {
  const seen = new Set<number>();
  for (let k = 1; ; k++) {
    const sim = new SimDisk();
    const opClock = new DiskOpClock();
    const life: LifeToken = { alive: true };
    opClock.onCrash = () => {
      life.alive = false;
      sim.crash();
    };
    const disk = faultDisk(sim.view(), opClock, new TraceHash(), life);
    const { store } = await Store.open(disk, OPTIONS);
    opClock.crashAtOp = opClock.ops + k;
    const done = await store.beginAt(900).then(
      () => life.alive,
      () => false,
    );
    if (done) {
      await store.close();
      break;
    }
    // Reopened after the crash: empty, at seq 1 (begin again) or at 900; never refused.
    const again = (await Store.open(sim.view(), OPTIONS)).store;
    seen.add(again.nextSeq);
    expect([1, 900]).toContain(again.nextSeq);
    if (again.nextSeq === 1) await again.beginAt(900);
    publish(again, 3);
    await again.commit();
    await again.close();
    const last = (await Store.open(sim.view(), OPTIONS)).store;
    expect(await seqsFrom(last, 1)).toEqual([900, 901, 902]);
    await last.close();
    expect(k).toBeLessThan(100);
  }
  // Both outcomes happened: the crash points cover the step from one journal to the other.
  expect([...seen].sort((a, b) => a - b)).toEqual([1, 900]);
});
