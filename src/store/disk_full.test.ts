/**
 * A full disk under the journal (journal_writer.ts: the stall and its retries), under the sorter
 * (its packs, sorter.ts) and the manifest (appends cut back, a rewrite's tmp removed: manifest.ts),
 * and spare filling that keeps a reserve (spare_filler.ts), on the simulated disk given a capacity
 * or refusing chosen files. What must hold: nothing is acknowledged before it is durable, a refused
 * append takes no seq, no half-written file stays in force, the store resumes by itself once space
 * is freed, and after a crash every acknowledged message is there, once, in seq order.
 */
import { describe, expect, test } from "bun:test";
import { executeSplit } from "../split/executor.ts";
import { inProcessRunner, storeHost } from "../split/in_process.ts";
import { Prng } from "../stdx/prng.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { Filter } from "../topic/mod.ts";
import { StoreContext, type StoreOptions, resolveOptions } from "./context.ts";
import { type Disk, DiskError, type DiskFile } from "./disk.ts";
import { encodeFileHeader } from "./file_header.ts";
import { MANIFEST_PATH, MANIFEST_TMP_PATH, type StoreError, packPath } from "./layout.ts";
import {
  appendManifest,
  loadManifest,
  openManifestForAppend,
  rewriteManifest,
} from "./manifest.ts";
import {
  MANIFEST_JOURNAL,
  MANIFEST_REMOVE,
  MANIFEST_TOPICS,
  decodeManifestRecords,
  encodeManifestRecords,
} from "./manifest_codec.ts";
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

/**
 * A store on `sim` whose retry timers the test fires by hand; `wrap` may put a refusing disk
 * between (see refusing).
 */
async function openStore(
  sim: SimDisk,
  journalBytesMax = 64 * 1024,
  knowsSpace = true,
  options: StoreOptions & { wrap?: (disk: Disk) => Disk } = {},
) {
  const timers: { delayMs: number; run: () => void }[] = [];
  // A disk that cannot tell its free space: spares are filled to the last byte, as before.
  const view = knowsSpace ? sim.view() : { ...sim.view(), space: undefined };
  const disk = options.wrap?.(view) ?? view;
  const { store } = await Store.open(disk, {
    fsync: "always",
    journalBytesMax,
    ...options,
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

/**
 * `disk` whose writes (`bytes` given) and fsyncs of a file fail with ENOSPC while `full` says so
 * (the bytes are not written; an fsync that fails leaves the file's writes unsynced, as Linux may
 * keep them in the page cache): a full disk aimed at one kind of file. `gate`: a promise a write
 * of `path` waits for first (a slow disk), or undefined.
 */
function refusing(
  disk: Disk,
  full: (path: string, op: "write" | "sync", bytes?: Uint8Array) => boolean,
  gate: (path: string) => Promise<void> | undefined = () => undefined,
): Disk {
  const refuse = (path: string, op: "write" | "sync", bytes?: Uint8Array) => {
    if (full(path, op, bytes))
      throw new DiskError("ENOSPC", `${op} "${path}": no space left on device`);
  };
  return {
    ...disk,
    open: async (path, mode, hints) => {
      const file = await disk.open(path, mode, hints);
      const wrapped: DiskFile = {
        path: file.path,
        read: (position, into) => file.read(position, into),
        write: async (position, bytes) => {
          await gate(path);
          refuse(path, "write", bytes);
          return file.write(position, bytes);
        },
        size: () => file.size(),
        sync: async () => {
          refuse(path, "sync");
          return file.sync();
        },
        truncate: (size) => file.truncate(size),
        close: () => file.close(),
      };
      // No writeNow: every write goes through `write`, where `gate` may hold it.
      if (file.map !== undefined) wrapped.map = file.map.bind(file);
      return wrapped;
    },
  };
}

/** Pack files on `sim`, and the packs the store's segments in force lie in: the same when no half pack is left. */
function packs(sim: SimDisk, store: Store): { onDisk: string[]; inForce: string[] } {
  const ids = new Set<number>();
  for (const partition of store.layout())
    for (const segment of partition.segments) if (segment.pack) ids.add(segment.pack.pack);
  return {
    onDisk: sim.paths().filter((path) => path.endsWith(".pak")),
    inForce: [...ids].map(packPath).sort(),
  };
}

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

  test("random full disks, failed fsyncs, rolls and sorts: every acknowledged message survives a crash, once and in order, and no seq is given twice", async () => {
    let stalls = 0;
    let resumes = 0;
    let sortStalls = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const prng = new Prng(seed);
      const sim = new SimDisk({ seed });
      // Small journals: rolls (staging, sealing, promotion) land on a full disk too, and (where
      // the disk cannot tell its space) so do recycled spares that run out of room.
      // Small segments: sorts (packs, manifest appends, retired journals) land on it too.
      const { store, timers, changes } = await openStore(sim, 8 * 1024, seed % 4 === 1, {
        segmentBytesMax: 1024,
      });
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
      // Said once each way, whichever parts stall (journal, sorter, both): never twice in a row.
      expect(changes.map((change) => change === null)).toEqual(changes.map((_, i) => i % 2 === 1));
      stalls += changes.filter((change) => change !== null).length;
      sortStalls += changes.filter((change) => change?.includes("cannot sort") === true).length;
      resumes += changes.filter((change) => change === null).length;
    }
    // The runs did stall and resume, many times.
    expect(stalls).toBeGreaterThan(20);
    // Some of them began in the sorter (a pack or a manifest append), not the journal.
    expect(sortStalls).toBeGreaterThan(5);
    expect(resumes).toBeGreaterThan(10);
  });
});

describe("store: a full disk under the sorter and the manifest", () => {
  test("ENOSPC on a sort's pack: the half pack goes, the store says so once and goes on journaling, retries on the backoff, and sorts once space is back", async () => {
    const sim = new SimDisk({ seed: 4 });
    let packsFull = false;
    let packsRefused = 0;
    const { store, timers, changes } = await openStore(sim, 64 * 1024, true, {
      segmentBytesMax: 1024,
      wrap: (disk) =>
        refusing(disk, (path) => packsFull && path.endsWith(".pak") && ++packsRefused > 0),
    });
    appendRange(store, 1, 60);
    await store.commit();
    await store.idle();
    const segmentsBefore = store.stats().segments;
    expect(segmentsBefore).toBeGreaterThan(0);
    packsFull = true;
    appendRange(store, 61, 200);
    await store.commit();
    await store.idle();
    expect(store.failure).toBeNull();
    expect(store.unwritable?.message).toMatch(/cannot sort its journal.*no space left on device/);
    expect(store.stats().unwritable).toContain("no space left on device");
    expect(store.retrying).toBe(true);
    expect(changes).toEqual([store.unwritable?.message ?? ""]);
    // No half pack: every pack file on the disk is one the manifest holds segments in.
    const { onDisk, inForce } = packs(sim, store);
    expect(onDisk).toEqual(inForce);
    // The journal keeps the records: appends go on while under the backlog bound, and flushes
    // do not retry the sort (only the backoff's timer does).
    const refused = packsRefused;
    for (let first = 201; first <= 260; first += 10) {
      appendRange(store, first, first + 9);
      await store.commit();
      await store.idle();
    }
    expect(store.committedSeq).toBe(260);
    expect(packsRefused).toBe(refused);
    expect(timers.map((timer) => timer.delayMs)).toEqual([100]);
    timers.shift()?.run();
    await store.idle();
    expect(store.unwritable).not.toBeNull();
    expect(timers.map((timer) => timer.delayMs)).toEqual([200]);
    expect(packs(sim, store).onDisk).toEqual(packs(sim, store).inForce);
    packsFull = false;
    timers.shift()?.run();
    await store.idle();
    expect(store.unwritable).toBeNull();
    expect(store.retrying).toBe(false);
    expect(changes.length).toBe(2);
    expect(changes[1]).toBeNull();
    expect(store.stats().segments).toBeGreaterThan(segmentsBefore);
    // Back on the shortest wait: a new stall's first retry comes after 100 ms again.
    packsFull = true;
    appendRange(store, 261, 320);
    await store.commit();
    await store.idle();
    expect(timers.map((timer) => timer.delayMs)).toEqual([100]);
    packsFull = false;
    timers.shift()?.run();
    await store.idle();
    expect(store.unwritable).toBeNull();
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(320));
  });

  test("the journal and the sorter stalled at once, then the sorter going through while the journal's retry is in flight and fails: the store stays unwritable, said once each way", async () => {
    const sim = new SimDisk({ seed: 9 });
    let packsFull = false;
    let journalFull = false;
    // Holds the journal's write (its retry in flight) until the test opens it.
    let gate: Promise<void> | undefined;
    let open = () => {};
    const { store, timers, changes } = await openStore(sim, 64 * 1024, true, {
      segmentBytesMax: 1024,
      fsync: "interval",
      wrap: (disk) =>
        refusing(
          disk,
          (path) => (packsFull && path.endsWith(".pak")) || (journalFull && path.endsWith(".wal")),
          (path) => (path.endsWith(".wal") ? gate : undefined),
        ),
    });
    packsFull = true;
    appendRange(store, 1, 100);
    await store.commit();
    await store.idle();
    journalFull = true;
    appendRange(store, 101, 110);
    const waiting = store.commit();
    await settle();
    expect(changes.length).toBe(1);
    packsFull = false;
    gate = new Promise((resolve) => {
      open = resolve;
    });
    for (const timer of timers.splice(0)) timer.run();
    // The sorter's retry goes through while the journal's waits on its write.
    for (let round = 0; round < 100; round++) await settle();
    expect(store.stats().segments).toBeGreaterThan(0);
    expect(store.unwritable?.message).toContain("cannot write its journal");
    expect(changes.length).toBe(1);
    gate = undefined;
    open();
    await settle();
    expect(store.unwritable?.message).toContain("cannot write its journal");
    expect(changes.length).toBe(1);
    journalFull = false;
    for (let round = 0; round < 3 && store.unwritable !== null; round++) {
      for (const timer of timers.splice(0)) timer.run();
      await settle();
    }
    await waiting;
    await store.idle();
    expect(store.unwritable).toBeNull();
    expect(changes.length).toBe(2);
    expect(changes[1]).toBeNull();
  });

  test("a seal, then a clean close, with no room for packs: the seal is refused without failing the store (a seal once there is room ends the stall), the close leaves the records in the journal, and the next open has them all", async () => {
    const sim = new SimDisk({ seed: 10 });
    let packsFull = false;
    const { store, timers } = await openStore(sim, 64 * 1024, true, {
      wrap: (disk) => refusing(disk, (path) => packsFull && path.endsWith(".pak")),
    });
    appendRange(store, 1, 100);
    await store.commit();
    packsFull = true;
    await expect(store.seal()).rejects.toThrow(/cannot sort its journal.*retries by itself/);
    expect(store.failure).toBeNull();
    expect(store.retrying).toBe(true);
    expect(timers.length).toBe(1);
    // Space back: a seal goes through before the retry, and the stall is over with it.
    packsFull = false;
    expect((await store.seal()).segmentsClosed).toBeGreaterThan(0);
    expect(store.unwritable).toBeNull();
    const inForce = packs(sim, store).inForce;
    packsFull = true;
    appendRange(store, 101, 120);
    await store.commit();
    await store.close();
    expect(packs(sim, store).onDisk).toEqual(inForce);
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(120));
  });

  test("the sorter stalled and the journals past the backlog bound: appends are refused before a batch, without a seq (not paused), a batch that started goes through whole, and they go on once it sorts again", async () => {
    const sim = new SimDisk({ seed: 5 });
    let packsFull = true;
    const { store, timers } = await openStore(sim, 4 * 1024, true, {
      segmentBytesMax: 2 * 1024,
      journalRetainedBytesMax: 8 * 1024,
      wrap: (disk) => refusing(disk, (path) => packsFull && path.endsWith(".pak")),
    });
    // Batches of 7, each checked before it starts (as the sequencer does): the bound is crossed
    // inside one, which still goes through whole (it threw in the middle of a PUBLISH batch).
    let next = 1;
    let refused: Error | null = null;
    for (let i = 0; i < 1000 && refused === null; i++) {
      refused = store.refusal;
      if (refused !== null) break;
      appendRange(store, next, next + 6);
      next += 7;
      await store.commit();
      await store.idle();
    }
    expect(refused?.message).toMatch(/cannot sort its journal/);
    expect(store.nextSeq).toBe(next);
    expect(() => appendRange(store, next, next + 6)).not.toThrow();
    next += 7;
    expect(store.retrying).toBe(true);
    expect(store.backlogged).toBe(false);
    expect(store.failure).toBeNull();
    packsFull = false;
    for (let round = 0; round < 5 && store.unwritable !== null; round++) {
      for (const timer of timers.splice(0)) timer.run();
      await store.idle();
    }
    expect(store.unwritable).toBeNull();
    appendRange(store, next, next + 9);
    await store.commit();
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(next + 9));
  });

  test("a manifest append whose fsync fails for lack of space is cut back to where it began (no ADD of a removed pack can survive a crash), and the batch is retried", async () => {
    for (let seed = 1; seed <= 8; seed++) {
      const sim = new SimDisk({ seed });
      let manifestSyncFailures = 0;
      const { store, timers, changes } = await openStore(sim, 64 * 1024, true, {
        segmentBytesMax: 2 * 1024,
        wrap: (disk) =>
          refusing(
            disk,
            (path, op) => path === MANIFEST_PATH && op === "sync" && manifestSyncFailures-- > 0,
          ),
      });
      appendRange(store, 1, 60);
      await store.commit();
      await store.idle();
      const manifestBytes = sim.snapshot(MANIFEST_PATH)?.length;
      manifestSyncFailures = 1;
      appendRange(store, 61, 200);
      await store.commit();
      await store.idle();
      expect(store.failure).toBeNull();
      expect(changes.length).toBe(1);
      expect(sim.snapshot(MANIFEST_PATH)?.length).toBe(manifestBytes);
      expect(packs(sim, store).onDisk).toEqual(packs(sim, store).inForce);
      if (seed % 2 === 0) {
        // A power loss now: the cut is durable, so the open finds every record, none twice.
        sim.crash();
        expect(await recoveredSeqs(sim)).toEqual(through(200));
        continue;
      }
      for (const timer of timers.splice(0)) timer.run();
      await store.idle();
      expect(store.unwritable).toBeNull();
      sim.crash();
      expect(await recoveredSeqs(sim)).toEqual(through(200));
    }
  });

  test("a manifest rewrite with no room for MANIFEST.tmp: the tmp goes, the old manifest stays in use, and a later rewrite goes through", async () => {
    const sim = new SimDisk({ seed: 6 });
    let tmpFull = false;
    const disk = refusing(
      sim.view(),
      (path, op) => tmpFull && path === MANIFEST_TMP_PATH && op === "write",
    );
    const context = new StoreContext(disk, resolveOptions({}));
    const header = encodeFileHeader(
      { kind: "manifest", id: 0, firstSeq: 0, name: "" },
      context.crc32,
    );
    const file = await disk.open(MANIFEST_PATH, "create");
    await file.write(0, header);
    await file.sync();
    await file.close();
    await openManifestForAppend(context, header.length, 0);
    await appendManifest(context, [{ kind: MANIFEST_REMOVE, id: 7 }]);
    const before = sim.snapshot(MANIFEST_PATH);
    tmpFull = true;
    await expect(rewriteManifest(context)).rejects.toThrow(/no space left on device/);
    expect(sim.paths()).not.toContain(MANIFEST_TMP_PATH);
    expect(sim.snapshot(MANIFEST_PATH)).toEqual(before);
    // Still open for appends where it was.
    await appendManifest(context, [{ kind: MANIFEST_REMOVE, id: 8 }]);
    tmpFull = false;
    await rewriteManifest(context);
    expect(sim.paths()).not.toContain(MANIFEST_TMP_PATH);
    const loaded = await loadManifest(context);
    expect(loaded.ok).toBe(true);
    await context.manifest.file?.close();
  });

  test("retention whose manifest append finds no room: nothing is removed, the store says so once without failing or throwing, and the next retention goes through or finds nothing to remove", async () => {
    const sim = new SimDisk({ seed: 7 });
    let manifestFull = false;
    const { store, changes } = await openStore(sim, 64 * 1024, true, {
      segmentBytesMax: 2 * 1024,
      wrap: (disk) =>
        refusing(disk, (path, op) => manifestFull && path === MANIFEST_PATH && op === "write"),
    });
    appendRange(store, 1, 200);
    await store.commit();
    await store.idle();
    const segments = store.stats().segments;
    expect(segments).toBeGreaterThan(2);
    manifestFull = true;
    // Nothing removed, said once (a server calls it every second): no error at each call.
    expect((await store.retain({ bytes: 0 }, 0)).segmentsRemoved).toBe(0);
    expect((await store.retain({ bytes: 0 }, 0)).segmentsRemoved).toBe(0);
    expect(store.failure).toBeNull();
    expect(store.stats().segments).toBe(segments);
    expect(store.unwritable?.message).toContain("no space left on device");
    expect(changes.length).toBe(1);
    manifestFull = false;
    const removed = await store.retain({ bytes: 0 }, 0);
    expect(removed.segmentsRemoved).toBe(segments);
    expect(store.unwritable).toBeNull();
    expect(changes).toEqual([expect.stringContaining("manifest"), null]);
    // Stalled again, then space back and nothing left to remove (the limits allow it all): the
    // stall ends there too, instead of lasting until some retention removes a file.
    appendRange(store, 201, 400);
    await store.commit();
    await store.idle();
    manifestFull = true;
    expect((await store.retain({ bytes: 0 }, 0)).segmentsRemoved).toBe(0);
    expect(store.unwritable?.message).toContain("manifest");
    manifestFull = false;
    expect((await store.retain({ bytes: 1e12 }, 0)).segmentsRemoved).toBe(0);
    expect(store.unwritable).toBeNull();
    expect(changes.slice(2)).toEqual([expect.stringContaining("manifest"), null]);
    await store.close();
  });

  test("a split's switch, and the counting of a file's topics, whose manifest append finds no room: refused, nothing changes, the store goes on, and both go through later", async () => {
    const sim = new SimDisk({ seed: 11 });
    let manifestFull = false;
    const options = { segmentBytesMax: 2048, indexIntervalBytes: 128, segmentAgeUsMax: 1e15 };
    const wrap = (disk: Disk) =>
      refusing(disk, (path, op) => manifestFull && path === MANIFEST_PATH && op === "write");
    const { store } = await Store.open(wrap(sim.view()), options);
    appendRange(store, 1, 200);
    await store.close();
    // The manifest as an earlier build wrote it, without TOPICS records: files to count.
    const crc32 = resolveOptions({}).crc32;
    const bytes = sim.snapshot(MANIFEST_PATH) as Uint8Array;
    const headerBytes = new DataView(bytes.buffer, bytes.byteOffset).getUint16(6, true);
    const kept = decodeManifestRecords(bytes.subarray(headerBytes), crc32).records.filter(
      (record) => record.kind !== MANIFEST_TOPICS,
    );
    const file = await sim.view().open(MANIFEST_PATH, "write");
    await file.truncate(headerBytes);
    await file.write(headerBytes, encodeManifestRecords(kept, crc32));
    await file.sync();
    await file.close();

    const { store: reopened } = await Store.open(wrap(sim.view()), options);
    const uncounted = reopened.uncountedFiles;
    expect(uncounted).toBeGreaterThan(0);
    const layout = reopened.layout();
    manifestFull = true;
    await expect(reopened.countFiles()).rejects.toThrow(/no space left on device/);
    expect(reopened.uncountedFiles).toBe(uncounted);
    const split = () =>
      executeSplit(storeHost(reopened), inProcessRunner(sim.view(), { crc32 }), sim.view(), {
        plan: { algorithm: "heuristic" },
        workers: 1,
        intervalBytes: 128,
      });
    await expect(split()).rejects.toThrow(/no space left on device/);
    expect(reopened.failure).toBeNull();
    expect(reopened.layout()).toEqual(layout);
    manifestFull = false;
    expect(await reopened.countFiles()).toBe(uncounted);
    expect((await split()).switched).toBe(true);
    expect(reopened.layout()).not.toEqual(layout);
    await reopened.close();
    expect(await recoveredSeqs(sim)).toEqual(through(200));
  });

  test("a drained journal whose retirement finds no room in the manifest stays listed, and is retired once there is room", async () => {
    const sim = new SimDisk({ seed: 8 });
    let retireFull = false;
    const crc32 = resolveOptions({}).crc32;
    const retires = (bytes: Uint8Array | undefined) =>
      bytes !== undefined &&
      decodeManifestRecords(bytes, crc32).records.some(
        (record) => record.kind === MANIFEST_JOURNAL && record.event === "retired",
      );
    const { store, timers } = await openStore(sim, 4 * 1024, true, {
      fsync: "interval",
      segmentBytesMax: 1024,
      wrap: (disk) =>
        refusing(
          disk,
          (path, op, bytes) =>
            retireFull && path === MANIFEST_PATH && op === "write" && retires(bytes),
        ),
    });
    const journalFiles = () => sim.paths().filter((path) => path.endsWith(".wal")).length;
    retireFull = true;
    for (let first = 1; first <= 400; first += 20) {
      appendRange(store, first, first + 19);
      await store.commit();
      await store.sync();
      await store.idle();
    }
    expect(store.failure).toBeNull();
    expect(store.stats().journals).toBeGreaterThan(2);
    // Every journal file is one the store lists: none was dropped from the list unretired.
    expect(journalFiles()).toBe(store.stats().journals);
    retireFull = false;
    for (const timer of timers.splice(0)) timer.run();
    appendRange(store, 401, 420);
    await store.commit();
    await store.sync();
    await store.idle();
    expect(journalFiles()).toBe(store.stats().journals);
    expect(store.stats().journals).toBeLessThanOrEqual(2);
    sim.crash();
    expect(await recoveredSeqs(sim)).toEqual(through(420));
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
