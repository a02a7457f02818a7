/**
 * Bad files: garbage in a segment, zero-length files, a missing index, a damaged sealed journal,
 * a damaged manifest. Each gives a clear error naming file and offset, or a rebuild — never a
 * crash, never a loop of failing starts.
 */
import { describe, expect, test } from "bun:test";
import { Store, StoreError } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import { SMALL_LIMITS, TOPICS, payloadOf } from "./fixtures/store_helpers.ts";

async function filled(count = 300, sort = false, options = SMALL_LIMITS): Promise<SimDisk> {
  const disk = new SimDisk({ seed: 9 });
  const { store } = await Store.open(disk, options);
  for (let seq = 1; seq <= count; seq++) store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
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
  test("garbage inside a segment: open works, the read fails naming the file and offset", async () => {
    const disk = await filled(300, true);
    const segment = disk.paths().find((p) => p.endsWith(".seg")) as string;
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

  test("a missing index is rebuilt at open and reads are unchanged", async () => {
    const disk = await filled(300, true);
    const index = disk.paths().find((p) => p.endsWith(".idx")) as string;
    disk.erase(index);
    const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
    expect(recovery.filesRebuilt).toEqual([index]);
    expect(disk.snapshot(index)).not.toBeNull();
    expect(await readAll(store)).toBe(300);
    await store.close();
  });

  test("a missing segment refuses to open naming it; --repair drops it from the manifest and opens", async () => {
    const disk = await filled(300, true);
    const segment = disk.paths().find((p) => p.endsWith(".seg")) as string;
    disk.erase(segment);
    const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
    expect(error.message).toContain(segment);
    expect(error.message).toMatch(/segment file missing \(seqs \d+\.\.\d+ of "[^"]+"\)/);
    const { store, recovery } = await Store.open(disk, { ...SMALL_LIMITS, repair: true });
    expect(recovery.problems.map((p) => [p.file, p.action])).toEqual([[segment, "dropped from the manifest"]]);
    expect(await readAll(store)).toBeLessThan(300);
    await store.close();
  });

  test("a garbage index costs a scan, not an error", async () => {
    const disk = await filled(300, true);
    const index = disk.paths().find((p) => p.endsWith(".idx")) as string;
    disk.corrupt(index, 10, garbage);
    const { store } = await Store.open(disk, SMALL_LIMITS);
    expect(await readAll(store)).toBe(300);
    await store.close();
  });

  test("zero-length files: newest journal is dropped, a zero-length segment is a clear read error", async () => {
    const disk = await filled(300, false);
    const journals = disk.paths().filter((p) => p.endsWith(".wal"));
    const newest = journals[journals.length - 1];
    disk.cut(newest, 0);
    const first = await Store.open(disk, SMALL_LIMITS);
    expect(first.recovery.problems).toEqual([]);
    expect(first.recovery.cuts.map((c) => c.file)).toContain(newest);
    await first.store.close();
    const segment = disk.paths().find((p) => p.endsWith(".seg")) as string;
    disk.cut(segment, 0);
    const second = await Store.open(disk, SMALL_LIMITS);
    const error = await readAll(second.store).catch((e) => e);
    expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
    expect(error.message).toContain(segment);
    await second.store.close({ sort: false });
  });

  test("a zero-length or garbage MANIFEST is rebuilt from the segment files", async () => {
    for (const damage of ["empty", "garbage"] as const) {
      const disk = await filled(300, true);
      if (damage === "empty") disk.cut("MANIFEST", 0);
      else disk.corrupt("MANIFEST", 40, garbage);
      const { store, recovery } = await Store.open(disk, SMALL_LIMITS);
      expect(recovery.manifestRebuilt).toBe(true);
      expect(store.nextSeq).toBe(301);
      expect(await readAll(store)).toBe(300);
      await store.close();
      const again = await Store.open(disk, SMALL_LIMITS);
      expect(again.recovery.problems).toEqual([]);
      expect(again.recovery.manifestRebuilt).toBe(false);
      await again.store.close();
    }
  });

  test("garbage in a sealed journal refuses to open with file and offset; --repair opens and reports", async () => {
    const disk = await filled(300, false, { ...SMALL_LIMITS, segmentBytesMax: 1e9, journalRetainedBytesMax: 1e9, segmentAgeUsMax: 1e15 });
    const journals = disk.paths().filter((p) => p.endsWith(".wal"));
    expect(journals.length).toBeGreaterThan(1);
    const sealed = journals[0];
    disk.corrupt(sealed, 300, garbage);
    const error = await Store.open(disk, SMALL_LIMITS).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.code).toBe("ARIA_ERR_STORE_CORRUPT");
    expect(error.message).toContain(`"${sealed}" at offset`);
    expect(error.message).toContain("--repair");
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
    expect(recovery.cuts).toContainEqual({ file: newest, offset: size, bytesCut: 40, recordsAfterCut: 0 });
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
