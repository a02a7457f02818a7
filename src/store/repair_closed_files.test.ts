/**
 * Damage at rest in closed files (issue 28, part 1): a pack with a bit flipped, cut short or
 * deleted; a pack's index image damaged; a subtree store cut short. An open refuses what a size
 * check finds (a file cut short, a file missing), a read refuses a bad checksum, each naming the
 * file and offset; repairStore keeps every intact record, copies the damaged bytes into damaged/,
 * reports the seqs lost (an upper bound: the range between the intact neighbours), and after it
 * the store opens and reads everything else, byte for byte.
 */
import { describe, expect, test } from "bun:test";
import { executeSplit } from "../split/executor.ts";
import { inProcessRunner, storeHost } from "../split/in_process.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { unpack } from "../../tests/fixtures/packs.ts";
import { Filter } from "../topic/mod.ts";
import { crc32 } from "./crc32.ts";
import type { Disk } from "./disk.ts";
import { MANIFEST_TMP_PATH } from "./layout.ts";
import { type LostSeqs, type RepairReport, Store, type StoreOptions, repairStore } from "./mod.ts";

const OPTIONS: StoreOptions = {
  journalBytesMax: 4096,
  journalRetainedBytesMax: 8192,
  segmentBytesMax: 1500,
  segmentAgeUsMax: 50_000,
  indexIntervalBytes: 128,
};
const TOPICS = ["a/x", "a/y", "b/z"];
const COUNT = 600;

function payloadOf(seq: number): Uint8Array {
  const bytes = new Uint8Array(20 + (seq % 13));
  new DataView(bytes.buffer).setUint32(0, seq, true);
  for (let i = 4; i < bytes.length; i++) bytes[i] = (seq * 7 + i) & 0xff;
  return bytes;
}

/** COUNT messages sorted into many packs as they go, closed cleanly (the journals drained). */
async function sorted(topics = TOPICS): Promise<SimDisk> {
  const disk = new SimDisk({ seed: 8 });
  const { store } = await Store.open(disk, OPTIONS);
  for (let seq = 1; seq <= COUNT; seq++) {
    store.append(seq, seq * 1000, topics[seq % topics.length], payloadOf(seq));
    if (seq % 20 === 0) {
      await store.commit();
      await store.idle();
    }
  }
  await store.close();
  return disk;
}

async function readSeqs(store: Store): Promise<number[]> {
  const seqs: number[] = [];
  for await (const message of store.read(Filter.of("**"), { seq: 1 })) {
    expect([...message.payload]).toEqual([...payloadOf(message.seq)]);
    seqs.push(message.seq);
  }
  return seqs;
}

/** Every path's bytes. */
function image(disk: SimDisk): Map<string, string> {
  return new Map(disk.paths().map((p) => [p, (disk.snapshot(p) as Uint8Array).join(",")]));
}

/** Opens and reads everything: the error it refuses with, or null. */
async function openAndRead(disk: SimDisk): Promise<{ code: string; message: string } | null> {
  try {
    const { store } = await Store.open(disk, OPTIONS);
    try {
      await readSeqs(store);
    } finally {
      await store.close();
    }
    return null;
  } catch (error) {
    return error as { code: string; message: string };
  }
}

/** A pack holding a segment whose seqs lie well inside the stream (not the first nor the last). */
function middlePack(disk: SimDisk): string {
  const packs = disk.paths().filter((p) => p.endsWith(".pak"));
  expect(packs.length).toBeGreaterThan(5);
  return packs[packs.length >> 1];
}

/**
 * Refused (at open or at the first read) naming `file`; repaired: every seq not reported lost
 * reads back byte for byte, damaged bytes sit in damaged/, a second repair finds nothing.
 */
async function refusedThenRepaired(disk: SimDisk, file: string): Promise<RepairReport> {
  const refused = await openAndRead(disk);
  expect(refused?.code).toBe("ARIA_ERR_STORE_CORRUPT");
  expect(refused?.message).toContain(`"${file}"`);
  expect(refused?.message).toContain("offset");
  // A dry run reports the same and changes no byte.
  const before = image(disk);
  const dry = await repairStore(disk, { ...OPTIONS, dryRun: true });
  expect(image(disk)).toEqual(before);
  const report = await repairStore(disk, OPTIONS);
  expect([report.lostSeqs, report.moved]).toEqual([dry.lostSeqs, dry.moved]);
  for (const moved of report.moved) expect(disk.snapshot(moved.to)?.length).toBe(moved.bytes);
  expect(report.nextSeq).toBe(COUNT + 1);
  const { store, recovery } = await Store.open(disk, OPTIONS);
  expect(recovery.problems).toEqual([]);
  const lost = (seq: number) => report.lostSeqs.some((r) => r.first <= seq && seq <= r.last);
  const expected: number[] = [];
  for (let seq = 1; seq <= COUNT; seq++) if (!lost(seq)) expected.push(seq);
  const read = await readSeqs(store);
  // Lost ranges are upper bounds: seqs of other partitions inside them still read.
  for (const seq of expected) expect(read).toContain(seq);
  expect(read.length).toBeLessThan(COUNT);
  await store.close();
  const again = await repairStore(disk, OPTIONS);
  expect([again.lostSeqs, again.moved, again.recovery.problems]).toEqual([[], [], []]);
  return report;
}

function span(lost: LostSeqs[]): number {
  return lost.reduce((sum, r) => sum + r.last - r.first + 1, 0);
}

describe("repair: damaged closed files", () => {
  test("a bit flipped in a pack's record: the read refuses naming the pack; repair loses one record's range", async () => {
    const disk = await sorted();
    const pack = middlePack(disk);
    const bytes = disk.snapshot(pack) as Uint8Array;
    const at = bytes.length >> 1;
    disk.corrupt(pack, at, Uint8Array.of(bytes[at] ^ 16));
    const report = await refusedThenRepaired(disk, pack);
    expect(report.moved.map((m) => m.file)).toEqual([pack]);
    expect(report.lostSeqs.every((r) => r.file === pack)).toBe(true);
    // One record between its neighbours: at most the seqs between them.
    expect(span(report.lostSeqs)).toBeGreaterThan(0);
    expect(span(report.lostSeqs)).toBeLessThanOrEqual(TOPICS.length * 2);
  });

  test("a repair cut by a crash just before its manifest rewrite loses no intact record: the damaged file stays until the new manifest is in force", async () => {
    // A file per segment: the salvaged one is replaced whole (an orphan once the manifest moves).
    const disk = await sorted();
    await unpack(disk, OPTIONS.indexIntervalBytes as number);
    const segs = disk.paths().filter((p) => p.endsWith(".seg"));
    const pack = segs[segs.length >> 1];
    const bytes = disk.snapshot(pack) as Uint8Array;
    const at = bytes.length >> 1;
    disk.corrupt(pack, at, Uint8Array.of(bytes[at] ^ 16));
    // The process dies as the repair starts writing the new manifest.
    const view = disk.view();
    const dying: Disk = {
      ...view,
      open: (path, mode) =>
        path === MANIFEST_TMP_PATH ? Promise.reject(new Error("crash")) : view.open(path, mode),
    };
    expect(await repairStore(dying, OPTIONS).catch((e) => e.message)).toBe("crash");
    disk.crash();
    const report = await refusedThenRepaired(disk, pack);
    expect(span(report.lostSeqs)).toBeLessThanOrEqual(TOPICS.length * 2);
  });

  test("a pack cut short: the open refuses (a size check); repair keeps the records before the cut", async () => {
    const disk = await sorted();
    const pack = middlePack(disk);
    const bytes = disk.snapshot(pack) as Uint8Array;
    disk.cut(pack, Math.floor(bytes.length * 0.6));
    const error = await Store.open(disk, OPTIONS).catch((e) => e);
    expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
    expect(error.message).toContain(`"${pack}" at offset ${Math.floor(bytes.length * 0.6)}`);
    const report = await refusedThenRepaired(disk, pack);
    expect(report.lostSeqs.length).toBeGreaterThan(0);
  });

  test("a pack deleted: the open refuses naming it; repair reports its segments' seqs lost", async () => {
    const disk = await sorted();
    const pack = middlePack(disk);
    disk.erase(pack);
    const report = await refusedThenRepaired(disk, pack);
    expect(report.lostSeqs.length).toBeGreaterThan(0);
    expect(report.lostSeqs.every((r) => r.file === pack)).toBe(true);
  });

  test("a pack's index image damaged: repair rewrites the segment, nothing lost", async () => {
    const disk = await sorted();
    const pack = middlePack(disk);
    const bytes = disk.snapshot(pack) as Uint8Array;
    // The last bytes of a pack are its last image's index entries.
    disk.corrupt(pack, bytes.length - 3, Uint8Array.of(bytes[bytes.length - 3] ^ 1));
    const report = await repairStore(disk, OPTIONS);
    expect(report.lostSeqs).toEqual([]);
    expect(report.moved.map((m) => m.file)).toEqual([pack]);
    const { store, recovery } = await Store.open(disk, OPTIONS);
    expect(recovery.problems).toEqual([]);
    expect(await readSeqs(store)).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
    await store.close();
  });

  test("a pack's own header damaged: reads do not need it, a rebuilt manifest does; repair rewrites its images, nothing lost", async () => {
    const disk = await sorted();
    const pack = middlePack(disk);
    const bytes = disk.snapshot(pack) as Uint8Array;
    disk.corrupt(pack, 20, Uint8Array.of(bytes[20] ^ 2));
    const report = await repairStore(disk, OPTIONS);
    expect(report.lostSeqs).toEqual([]);
    expect(report.moved.map((m) => [m.file, m.offset])).toEqual([[pack, 0]]);
    expect(disk.paths()).not.toContain(pack);
    // The MANIFEST lost now: rebuilt from the files, every record is there.
    disk.erase("MANIFEST");
    const { store, recovery } = await Store.open(disk, OPTIONS);
    expect(recovery.problems).toEqual([]);
    expect(await readSeqs(store)).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
    await store.close();
  });

  test("a legacy .seg with a record damaged: repair rewrites its intact records into a pack; a damaged .idx is rebuilt, nothing lost", async () => {
    const disk = await sorted();
    await unpack(disk, OPTIONS.indexIntervalBytes as number);
    const segs = disk.paths().filter((p) => p.endsWith(".seg"));
    expect(segs.length).toBeGreaterThan(5);
    const seg = segs[segs.length >> 1];
    const bytes = disk.snapshot(seg) as Uint8Array;
    const at = bytes.length >> 1;
    disk.corrupt(seg, at, Uint8Array.of(bytes[at] ^ 64));
    const idx = segs[1].replace(".seg", ".idx");
    const index = disk.snapshot(idx) as Uint8Array;
    disk.corrupt(idx, index.length - 2, Uint8Array.of(index[index.length - 2] ^ 1));
    const report = await refusedThenRepaired(disk, seg);
    expect(report.lostSeqs.every((r) => r.file === seg)).toBe(true);
    expect(report.moved.map((m) => m.file).sort()).toEqual([idx, seg].sort());
    expect(report.recovery.filesRebuilt).toContain(idx);
    // The damaged .seg went (its bytes are in damaged/); its records live in a new pack.
    expect(disk.paths()).not.toContain(seg);
    expect(disk.paths().filter((p) => p.endsWith(".pak")).length).toBe(1);
  });

  test("a subtree store cut short: the open refuses; repair keeps the records before the cut", async () => {
    const disk = await sorted(["app/orders/new", "app/orders/paid", "app/users/eu", "ops/logs"]);
    const { store } = await Store.open(disk, OPTIONS);
    const split = await executeSplit(storeHost(store), inProcessRunner(disk, { crc32 }), disk, {
      plan: { algorithm: "heuristic" },
      workers: 1,
      intervalBytes: 128,
    });
    expect(split.switched).toBe(true);
    await store.close();
    const stores = disk.paths().filter((p) => p.endsWith(".sto"));
    expect(stores.length).toBeGreaterThan(0);
    const cut = stores[0];
    const bytes = disk.snapshot(cut) as Uint8Array;
    disk.cut(cut, Math.floor(bytes.length * 0.7));
    const report = await refusedThenRepaired(disk, cut);
    expect(report.lostSeqs.length).toBeGreaterThan(0);
  });
});
