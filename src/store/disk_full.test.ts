/**
 * A full disk under the journal (journal_writer.ts: the stall and its retries), and spare filling
 * that keeps a reserve (spare_filler.ts), on the simulated disk given a capacity. What must hold:
 * nothing is acknowledged before it is durable, a refused append takes no seq, the store resumes
 * by itself once space is freed, and after a crash every acknowledged message is there, once, in
 * seq order.
 */
import { describe, expect, test } from "bun:test";
import { Prng } from "../stdx/prng.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { Filter } from "../topic/mod.ts";
import { StoreContext, resolveOptions } from "./context.ts";
import type { StoreError } from "./layout.ts";
import { Store } from "./mod.ts";
import { SPARE_SPACE_CHECK_BYTES, SpareFiller, spareReserveBytes } from "./spare_filler.ts";

const TOPICS = ["a/x", "a/y", "b/z", "c"];
const payloadOf = (seq: number) => new TextEncoder().encode(`m${seq}:${"-".repeat(seq % 97)}`);

/**
 * Lets the simulated disk's pending operations and their follow-ups run: each is a microtask,
 * and a check callback runs once the microtask queue is empty.
 */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A store on `sim` whose retry timers the test fires by hand. */
async function openStore(sim: SimDisk, journalBytesMax = 64 * 1024, knowsSpace = true) {
  const timers: { delayMs: number; run: () => void }[] = [];
  // A disk that cannot tell its free space: spares are filled to the last byte, as before.
  const disk = knowsSpace ? sim.view() : { ...sim.view(), space: undefined };
  const { store } = await Store.open(disk, {
    fsync: "always",
    journalBytesMax,
    schedule: (delayMs, run) => void timers.push({ delayMs, run }),
  });
  const changes: (string | null)[] = [];
  store.onWritableChanged = (reason: StoreError | null) => changes.push(reason?.message ?? null);
  return { store, timers, changes };
}

function appendRange(store: Store, first: number, last: number): void {
  for (let seq = first; seq <= last; seq++)
    store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
}

/** Every message a fresh open of `sim` (after a crash) holds, checked against what was appended. */
async function recoveredSeqs(sim: SimDisk): Promise<number[]> {
  const { store } = await Store.open(sim.view());
  const seqs: number[] = [];
  for await (const message of store.read(Filter.of("**"), { seq: 1 })) {
    expect(message.topic).toBe(TOPICS[message.seq % TOPICS.length]);
    expect(message.payload).toEqual(payloadOf(message.seq));
    seqs.push(message.seq);
  }
  await store.close();
  return seqs;
}

const through = (last: number) => Array.from({ length: last }, (_, i) => i + 1);

describe("store: a full disk", () => {
  test("ENOSPC on a journal write: appends refused without a seq, commits wait, retries back off, and it resumes by itself once space is freed", async () => {
    const sim = new SimDisk({ seed: 1 });
    const { store, timers, changes } = await openStore(sim);
    appendRange(store, 1, 100);
    await store.commit();
    // Not a byte more: the records after the last page the journal has written need room.
    sim.capacityBytes = sim.usedBytes();
    appendRange(store, 101, 300);
    let settled = false;
    const waiting = store.commit().then(() => {
      settled = true;
    });
    await settle();
    expect(store.unwritable?.code).toBe("ARIA_ERR_STORE_IO");
    expect(store.unwritable?.message).toContain("no space left on device");
    expect(store.stats().unwritable).toContain("no space left on device");
    expect(store.failure).toBeNull();
    expect(settled).toBe(false);
    expect(store.committedSeq).toBe(100);
    expect(() => store.append(301, 301_000, "a/x", payloadOf(301))).toThrow(/retries by itself/);
    expect(store.nextSeq).toBe(301);
    expect(timers.map((timer) => timer.delayMs)).toEqual([100]);
    // Still full: the retry fails and the next one waits twice as long.
    timers.shift()?.run();
    await settle();
    expect(store.unwritable).not.toBeNull();
    expect(settled).toBe(false);
    expect(timers.map((timer) => timer.delayMs)).toEqual([200]);
    sim.capacityBytes = Number.POSITIVE_INFINITY;
    timers.shift()?.run();
    await waiting;
    expect(store.unwritable).toBeNull();
    expect(store.committedSeq).toBe(300);
    appendRange(store, 301, 400);
    await store.commit();
    expect(changes.length).toBe(2);
    expect(changes[0]).toContain("no space left on device");
    expect(changes[1]).toBeNull();
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(400));
  });

  test("a failed fsync that drops the unsynced pages: the retry writes them again before it fsyncs, so what it acknowledges survives a crash", async () => {
    const sim = new SimDisk({ seed: 2 });
    const { store, timers } = await openStore(sim);
    appendRange(store, 1, 50);
    await store.commit();
    sim.failNextSyncs(1, { dropUnsynced: true, code: "ENOSPC" });
    appendRange(store, 51, 80);
    const waiting = store.commit();
    await settle();
    expect(store.unwritable).not.toBeNull();
    expect(store.committedSeq).toBe(50);
    timers.shift()?.run();
    await waiting;
    expect(store.committedSeq).toBe(80);
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(80));
  });

  test("random full disks, failed fsyncs and rolls: every acknowledged message survives a crash, once and in order, and no seq is given twice", async () => {
    let stalls = 0;
    let resumes = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const prng = new Prng(seed);
      const sim = new SimDisk({ seed });
      // Small journals: rolls (staging, sealing, promotion) land on a full disk too, and (where
      // the disk cannot tell its space) so do recycled spares that run out of room.
      const { store, timers, changes } = await openStore(sim, 8 * 1024, seed % 4 === 1);
      let next = 1;
      let acked = 0;
      let rejected = 0;
      const commits: Promise<void>[] = [];
      for (let step = 0; step < 60; step++) {
        const action = prng.nextInt(10);
        if (action < 5) {
          const last = next + prng.nextInt(20);
          try {
            appendRange(store, next, last);
            next = last + 1;
          } catch {
            // Refused whole (the store cannot write): no seq taken.
            expect(store.unwritable).not.toBeNull();
            expect(store.nextSeq).toBe(next);
          }
          const through = next - 1;
          commits.push(
            store.commit().then(
              () => {
                acked = Math.max(acked, through);
              },
              () => {
                rejected++;
              },
            ),
          );
        } else if (action < 7) {
          sim.capacityBytes = sim.usedBytes() + prng.nextInt(12_000);
        } else if (action === 7) {
          sim.failNextSyncs(1, { dropUnsynced: true, code: "ENOSPC" });
        } else if (action === 8) {
          sim.capacityBytes = Number.POSITIVE_INFINITY;
        } else {
          for (const timer of timers.splice(0)) timer.run();
        }
        await settle();
        // Nothing is acknowledged past what the store says is committed.
        expect(acked).toBeLessThanOrEqual(store.committedSeq);
      }
      if (seed % 2 === 0) {
        // Space comes back: everything appended is acknowledged without a restart.
        sim.capacityBytes = Number.POSITIVE_INFINITY;
        for (let round = 0; round < 20 && store.unwritable !== null; round++) {
          for (const timer of timers.splice(0)) timer.run();
          await settle();
        }
        await Promise.all(commits);
        expect(acked).toBe(next - 1);
      }
      expect(store.failure).toBeNull();
      expect(rejected).toBe(0);
      sim.crash();
      sim.capacityBytes = Number.POSITIVE_INFINITY;
      sim.clearSyncFailures();
      const seqs = await recoveredSeqs(sim);
      // A prefix of what was appended (no hole, no duplicate), holding every acknowledged seq.
      expect(seqs).toEqual(through(seqs.length));
      expect(seqs.length).toBeGreaterThanOrEqual(acked);
      expect(seqs.length).toBeLessThanOrEqual(next - 1);
      stalls += changes.filter((change) => change !== null).length;
      resumes += changes.filter((change) => change === null).length;
    }
    // The runs did stall and resume, many times.
    expect(stalls).toBeGreaterThan(20);
    expect(resumes).toBeGreaterThan(10);
  });
});

describe("spare journals and free space", () => {
  test("a spare is filled only while the free space stays above the reserve, max(2 journals, 5%)", async () => {
    const journalBytesMax = 16 * 1024 * 1024;
    const sim = new SimDisk({ seed: 3 });
    const disk = sim.view();
    const context = new StoreContext(disk, resolveOptions({ fsync: "always", journalBytesMax }));
    await disk.mkdir("journal");
    const filler = new SpareFiller(context);
    const capacity = 64 * 1024 * 1024;
    const reserve = spareReserveBytes(capacity, journalBytesMax);
    expect(reserve).toBe(2 * journalBytesMax);
    expect(spareReserveBytes(100 * capacity, journalBytesMax)).toBe(5 * capacity);
    // Free space one check's bytes and 70 KiB above the reserve: that many bytes (64 KiB pieces),
    // then no more until space is freed.
    sim.capacityBytes = capacity;
    const { freeBytes } = await sim.space();
    const file = await disk.open("filler", "create");
    await file.write(0, new Uint8Array(freeBytes - reserve - SPARE_SPACE_CHECK_BYTES - 70 * 1024));
    await file.close();
    const pieces = SPARE_SPACE_CHECK_BYTES / (64 * 1024);
    for (let i = 0; i < pieces + 10; i++) {
      filler.step(64 * 1024);
      await settle();
    }
    expect((await sim.space()).freeBytes).toBeGreaterThanOrEqual(reserve);
    expect(filler.fillingBytes).toBe(SPARE_SPACE_CHECK_BYTES);
    expect(filler.skippedForSpace).toBe(10);
    // Space freed: filling goes on.
    await disk.remove("filler");
    for (let i = 0; i < 3; i++) {
      filler.step(64 * 1024);
      await settle();
    }
    expect(filler.fillingBytes).toBe(SPARE_SPACE_CHECK_BYTES + 3 * 64 * 1024);
    await filler.stop();
  });
});
