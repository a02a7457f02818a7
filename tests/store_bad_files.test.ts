/**
 * Bad files: garbage in a segment, zero-length files, a missing index, a damaged sealed journal,
 * a damaged manifest. Each gives a clear error naming file and offset, or a rebuild — never a
 * crash, never a loop of failing starts.
 */
import { describe, expect, test } from "bun:test";
import { crc32, repairStore, Store, StoreError } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import { packedImages, packIds, unpack } from "./fixtures/packs.ts";
import { SMALL_LIMITS, TOPICS, payloadOf } from "./fixtures/store_helpers.ts";
import { decodeFileHeader } from "../src/store/file_header.ts";
import { packPath } from "../src/store/layout.ts";

async function filled(count = 300, sort = false, options = SMALL_LIMITS): Promise<SimDisk> {
  const disk = new SimDisk({ seed: 9 });
  const { store } = await Store.open(disk, options);
  for (let seq = 1; seq <= count; seq++)
    store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
  await store.commit();
  await store.idle();
  await store.close({ sort });
  return disk;
}

async function readAll(store: Store): Promise<number> {
  let count = 0;
  for await (const _ of store.read(Filter.of("**"), { seq: 1 })) count++;
  return count;
}

const garbage = new Uint8Array(40).fill(0x5a);

describe("store bad files", () => {
  // Each layout: segments packed (as the sorter writes them), and a file per segment (as it
  // wrote them before packs: such directories must keep opening and reading the same).
  for (const layout of ["packs", "files"] as const) {
    const prepared = async (count: number, sort: boolean): Promise<SimDisk> => {
      const disk = await filled(count, sort);
      if (layout === "files") await unpack(disk, SMALL_LIMITS.indexIntervalBytes as number);
      return disk;
    };
    const dataFile = (disk: SimDisk) =>
      disk.paths().find((p) => p.endsWith(layout === "packs" ? ".pak" : ".seg")) as string;
    /** Offset and length of the first segment's index: inside its pack, or its own file. */
    const firstIndex = async (disk: SimDisk): Promise<{ path: string; offset: number }> => {
      if (layout === "files")
        return { path: disk.paths().find((p) => p.endsWith(".idx")) as string, offset: 0 };
      const [first] = await packedImages(disk, SMALL_LIMITS.indexIntervalBytes as number);
      const place = first.meta.pack as NonNullable<(typeof first.meta)["pack"]>;
      return { path: first.path, offset: place.offset + first.meta.bytes };
    };

    test(`${layout}: garbage inside a segment: open works, the read fails naming the file and offset`, async () => {
      const disk = await prepared(300, true);
      const segment = dataFile(disk);
      disk.corrupt(segment, 200, garbage);
      const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
      expect(recovery.problems).toEqual([]);
      const error = await readAll(store).catch((e) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
      expect(error.message).toContain(segment);
      expect(error.message).toMatch(/at offset \d+/);
      await store.close({ sort: false });
    });

    test(`${layout}: a missing segment file refuses to open naming it; --repair drops its segments from the manifest, reports their seqs lost, and opens`, async () => {
      const disk = await prepared(300, true);
      const segment = dataFile(disk);
      disk.erase(segment);
      const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
      expect(error.message).toContain(segment);
      expect(error.message).toMatch(/segment file missing \(seqs \d+\.\.\d+ of "[^"]+"\)/);
      const { store, recovery } = await Store.open(disk, { ...SMALL_LIMITS, repair: true });
      expect(recovery.problems.length).toBeGreaterThan(0);
      for (const p of recovery.problems)
        expect([p.file, p.action]).toEqual([
          segment,
          "dropped from the manifest, its seqs reported lost",
        ]);
      // Every seq of its segments (an upper bound: other partitions' seqs in the range still read).
      expect(recovery.lostSeqs.length).toBe(recovery.problems.length);
      for (const lost of recovery.lostSeqs) expect(lost.file).toBe(segment);
      const lost = recovery.lostSeqs.reduce((sum, r) => sum + r.last - r.first + 1, 0);
      const read = await readAll(store);
      expect(read).toBeLessThan(300);
      expect(read).toBeGreaterThanOrEqual(300 - lost);
      await store.close();
      // What repair dropped stays dropped: the next open finds nothing wrong.
      const again = await Store.open(disk, SMALL_LIMITS);
      expect(again.recovery.problems).toEqual([]);
      await again.store.close();
    });

    test(`${layout}: a garbage index costs a scan, not an error`, async () => {
      const disk = await prepared(300, true);
      const index = await firstIndex(disk);
      disk.corrupt(index.path, index.offset + 10, garbage);
      const { store } = await Store.open(disk, SMALL_LIMITS);
      expect(await readAll(store)).toBe(300);
      // A read from a seq inside the segment needs its index: it scans instead, and is exact.
      let count = 0;
      for await (const message of store.read(Filter.of("**"), { seq: 150 }))
        expect(message.seq).toBe(150 + count++);
      expect(count).toBe(151);
      await store.close();
    });

    test(`${layout}: zero-length files: the newest journal, which the manifest says started, is damage that repair reports; a zero-length segment file refuses the open (a size check)`, async () => {
      const disk = await prepared(300, false);
      const journals = disk.paths().filter((p) => p.endsWith(".wal"));
      const newest = journals[journals.length - 1];
      const header = decodeFileHeader(disk.snapshot(newest) as Uint8Array, "journal", crc32);
      if (typeof header === "string") throw new Error(header);
      disk.cut(newest, 0);
      // Its JOURNAL record is written only once its header is durable: emptied since, it held
      // acknowledged records (from header.firstSeq to 300: an earlier build dropped them without
      // a word), so the open refuses and repair reports every seq it could have held as lost,
      // and never gives them again.
      const refused = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
      expect(refused.code).toBe("ARIA_ERR_STORE_CORRUPT");
      expect(refused.message).toContain(newest);
      const repaired = await repairStore(disk, SMALL_LIMITS);
      expect(header.firstSeq).toBeLessThanOrEqual(300);
      expect(repaired.lostSeqs.map((range) => [range.file, range.first])).toEqual([
        [newest, header.firstSeq],
      ]);
      const first = await Store.open(disk, SMALL_LIMITS);
      expect(first.recovery.problems).toEqual([]);
      // The range is an upper bound: what the journal held that was sorted into segments before
      // it was emptied still reads back; what it alone held (up to 300) is gone.
      const kept = await readAll(first.store);
      expect(kept).toBeGreaterThanOrEqual(header.firstSeq - 1);
      expect(kept).toBeLessThan(300);
      expect(first.store.nextSeq).toBeGreaterThan(repaired.lostSeqs[0].last);
      await first.store.close();
      const segment = dataFile(disk);
      disk.cut(segment, 0);
      const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
      expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
      expect(error.message).toContain(`"${segment}" at offset 0: file ends early`);
      const salvaged = await repairStore(disk, SMALL_LIMITS);
      expect(salvaged.lostSeqs.length).toBeGreaterThan(0);
      for (const lost of salvaged.lostSeqs) expect(lost.file).toBe(segment);
      const second = await Store.open(disk, SMALL_LIMITS);
      expect(second.recovery.problems).toEqual([]);
      await readAll(second.store);
      await second.store.close({ sort: false });
    });

    test(`${layout}: a zero-length or garbage MANIFEST is rebuilt from the segment files`, async () => {
      for (const damage of ["empty", "garbage"] as const) {
        const disk = await prepared(300, true);
        if (damage === "empty") disk.cut("MANIFEST", 0);
        else disk.corrupt("MANIFEST", 40, garbage);
        const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
        expect(recovery.manifestRebuilt).toBe(true);
        expect(recovery.filesRemoved).toEqual([]);
        expect(store.nextSeq).toBe(301);
        expect(await readAll(store)).toBe(300);
        await store.close();
        const again = await Store.open(disk, SMALL_LIMITS);
        expect(again.recovery.problems).toEqual([]);
        expect(again.recovery.manifestRebuilt).toBe(false);
        await again.store.close();
      }
    });
  }

  test("a MANIFEST record of a kind this build does not know (a newer build's) refuses the open and changes nothing", async () => {
    const disk = await filled(300, true);
    const before = disk.snapshot("MANIFEST") as Uint8Array;
    // An intact record of kind 10 (9 is the last this build knows), appended after the valid ones.
    const record = new Uint8Array(20);
    const view = new DataView(record.buffer);
    view.setUint32(0, record.length, true);
    record[8] = 10;
    view.setUint32(4, crc32(record.subarray(8)), true);
    disk.corrupt("MANIFEST", before.length, record);
    const paths = disk.paths().sort();
    const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.code).toBe("ARIA_ERR_STORE_FORMAT");
    expect(error.message).toContain(`record of kind 10 at offset ${before.length}`);
    expect(disk.paths().sort()).toEqual(paths);
    expect(disk.snapshot("MANIFEST")).toEqual(new Uint8Array([...before, ...record]));
    // The same bytes damaged (the CRC fails): a torn tail, cut as before.
    disk.corrupt("MANIFEST", before.length + 12, new Uint8Array([1]));
    const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
    expect(recovery.cuts.map((cut) => cut.offset)).toEqual([before.length]);
    expect(await readAll(store)).toBe(300);
    await store.close();
  });

  test("files: a missing index is rebuilt at open and reads are unchanged", async () => {
    const disk = await filled(300, true);
    await unpack(disk, SMALL_LIMITS.indexIntervalBytes as number);
    const index = disk.paths().find((p) => p.endsWith(".idx")) as string;
    disk.erase(index);
    const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
    expect(recovery.filesRebuilt).toEqual([index]);
    expect(disk.snapshot(index)).not.toBeNull();
    expect(await readAll(store)).toBe(300);
    await store.close();
  });

  test("packs: a pack left by a close that never took effect is removed at open; its records come from the journal", async () => {
    const disk = await filled(300, true);
    const [id] = packIds(disk);
    const orphan = packPath(id + 100_000);
    const file = await disk.open(orphan, "create");
    await file.write(0, disk.snapshot(packPath(id)) as Uint8Array);
    await file.sync();
    await file.close();
    const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
    expect(recovery.problems).toEqual([]);
    expect(recovery.filesRemoved).toEqual([orphan]);
    expect(disk.snapshot(orphan)).toBeNull();
    expect(await readAll(store)).toBe(300);
    await store.close();
  });

  test("garbage in a sealed journal refuses to open with file and offset; --repair opens and reports", async () => {
    const disk = await filled(300, false, {
      ...SMALL_LIMITS,
      segmentBytesMax: 1e9,
      journalRetainedBytesMax: 1e9,
      segmentAgeUsMax: 1e15,
    });
    const journals = disk.paths().filter((p) => p.endsWith(".wal"));
    expect(journals.length).toBeGreaterThan(1);
    const sealed = journals[0];
    disk.corrupt(sealed, 300, garbage);
    const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
    expect(error.message).toContain(`"${sealed}" at offset`);
    expect(error.message).toContain("aria repair");
    // The refusal changed nothing: it refuses again, the same way.
    expect((await Store.open(disk, SMALL_LIMITS).catch((e) => e)).message).toBe(error.message);
    const repaired = await Store.open(disk, { ...SMALL_LIMITS, repair: true });
    expect(repaired.recovery.problems.length).toBeGreaterThan(0);
    expect(repaired.recovery.problems[0].file).toBe(sealed);
    expect(repaired.store.nextSeq).toBe(301);
    await repaired.store.close();
    const after = await Store.open(disk, SMALL_LIMITS);
    expect(after.recovery.problems).toEqual([]);
    await after.store.close();
  });

  test("garbage after the newest journal's last record is a torn tail: cut, reported, no problem", async () => {
    const disk = await filled(100, false);
    const journals = disk.paths().filter((p) => p.endsWith(".wal"));
    const newest = journals[journals.length - 1];
    const size = (disk.snapshot(newest) as Uint8Array).length;
    disk.corrupt(newest, size, garbage);
    const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
    expect(recovery.problems).toEqual([]);
    expect(recovery.cuts).toContainEqual({
      file: newest,
      offset: size,
      bytesCut: 40,
      recordsAfterCut: 0,
    });
    expect(await readAll(store)).toBe(100);
    await store.close();
  });

  test("a failing fsync stops the store: the commit rejects and nothing more is acknowledged", async () => {
    const disk = new SimDisk({ seed: 3 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    store.append(1, 1, "a/b", payloadOf(1));
    await store.commit();
    disk.failNextSyncs(1);
    store.append(2, 2, "a/b", payloadOf(2));
    const error = await store.commit().catch((e) => e);
    expect(error.code).toBe("ARIA_ERR_STORE_FAILED");
    expect(() => store.append(3, 3, "a/b", payloadOf(3))).toThrow(StoreError);
    await store.close();
  });
});
