/**
 * Mapped lane reads (LaneBuffer.mapRecords, src/store/read/): where the disk maps files, a lane
 * reading a packed image larger than its chunk maps the chunk, then the rest of the image from
 * its first record, instead of copying chunks into buffers. What it yields must be exactly what
 * a disk that does not map yields — copied and borrowed, from the start, from a seq and from a
 * time — it must read each image's bytes once, and damage in a mapped image must still be
 * reported with file and offset.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import type { Disk } from "../src/store/disk.ts";
import { type ReadFrom, Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { WatchedDisk } from "../src/testing/watched_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import { payloadOf, tempDir } from "./fixtures/store_helpers.ts";

const PARTITIONS = 4;
const COUNT = 6000;
const topicOf = (seq: number) => `m${(seq * 5) % PARTITIONS}/x`;
const payload = (seq: number) => payloadOf(seq, 40 + (seq % 200));
const timeOf = (seq: number) => 1_000_000 + seq * 10;
/** Lane chunks of 4 KiB (16 KiB over 4 partitions): each image is ~100 KiB, many chunks. */
const OPTIONS = { readBufferBytes: 16 * 1024, readBatchBytesMax: 8192 };

/** A disk over `inner` that counts the bytes read from packs and the mappings given; `mapping` false: its files do not map. */
function watched(
  inner: Disk,
  mapping: boolean,
): { disk: Disk; packBytesRead: () => number; maps: () => number } {
  let packBytesRead = 0;
  let maps = 0;
  const disk = new WatchedDisk(inner, {
    maps: mapping,
    read: (path, _position, bytes) => {
      if (path.endsWith(".pak")) packBytesRead += bytes;
    },
    map: () => {
      maps++;
    },
  });
  return { disk, packBytesRead: () => packBytesRead, maps: () => maps };
}

/** Writes COUNT messages over PARTITIONS partitions into `disk`, sorted in two batches (two images per partition), and closes. */
async function fill(disk: Disk): Promise<void> {
  const { store } = await Store.open(disk, OPTIONS);
  for (let seq = 1; seq <= COUNT; seq++) {
    store.append(seq, timeOf(seq), topicOf(seq), payload(seq));
    if (seq === COUNT / 2) await store.commit().then(() => store.sortAll());
  }
  await store.commit();
  await store.close();
}

/** The seqs of a read of `filter` from `from` over `disk`, each message checked against what was appended; the store's bytes read. */
async function readAll(
  disk: Disk,
  filter: Filter,
  from: ReadFrom,
  borrow: boolean,
): Promise<{ seqs: number[]; bytesRead: number }> {
  const { store } = await Store.open(disk, OPTIONS);
  const reader = store.read(filter, from, { borrow });
  const seqs: number[] = [];
  for (;;) {
    const batch = await reader.nextBatch();
    if (batch.length === 0) break;
    for (const message of batch) {
      expect(message.timeUs).toBe(timeOf(message.seq));
      expect(message.topic).toBe(topicOf(message.seq));
      const bytes =
        message.length === undefined
          ? message.payload
          : message.source!.subarray(message.start, message.start! + message.length);
      expect([...bytes]).toEqual([...payload(message.seq)]);
      seqs.push(message.seq);
    }
  }
  const bytesRead = store.stats().bytesRead;
  await store.close({ sort: false });
  return { seqs, bytesRead };
}

const upTo = (first: number, last: number) =>
  Array.from({ length: last - first + 1 }, (_, i) => first + i);

const dir = tempDir("aria-read-mapped-");
afterAll(dir.remove);

describe("mapped lane reads", () => {
  test("on the real disk, a read of images larger than a chunk maps them: exact, no pack bytes copied, each image's bytes counted once", async () => {
    const path = `${dir.path}/real`;
    await fill(new BunDisk(path));
    const { store } = await Store.open(new BunDisk(path), OPTIONS);
    const stored = store.stats().segmentBytes;
    await store.close({ sort: false });
    for (const borrow of [false, true]) {
      const mapped = watched(new BunDisk(path), true);
      const read = await readAll(mapped.disk, Filter.of("**"), { seq: 1 }, borrow);
      expect(read.seqs).toEqual(upTo(1, COUNT));
      // Only the images' indexes (loaded once per file) may come through read.
      expect(mapped.packBytesRead()).toBeLessThan(stored / 20);
      // A chunk of each image, then the rest of it: at most two mappings per image (8 images).
      expect(mapped.maps()).toBeGreaterThan(0);
      expect(mapped.maps()).toBeLessThanOrEqual(2 * 2 * PARTITIONS);
      // The rest of an image mapped from its first record again is not counted twice.
      expect(read.bytesRead).toBeLessThan(stored * 1.05);
      expect(read.bytesRead).toBeGreaterThan(stored * 0.9);

      const copied = watched(new BunDisk(path), false);
      const plain = await readAll(copied.disk, Filter.of("**"), { seq: 1 }, borrow);
      expect(plain.seqs).toEqual(upTo(1, COUNT));
      expect(copied.maps()).toBe(0);
      expect(copied.packBytesRead()).toBeGreaterThan(stored * 0.9);
    }
  });

  test("from a seq, from a time, and of one partition, a mapping disk yields what a copying one does", async () => {
    const sim = new SimDisk({ seed: 71 });
    await fill(sim.view());
    const starts: ReadFrom[] = [
      { seq: 1 },
      { seq: 1777 },
      { afterSeq: 4200 },
      { timeUs: timeOf(3001) - 5 },
    ];
    for (const from of starts) {
      for (const filter of [Filter.of("**"), Filter.of("m1/**"), Filter.of("m2/x", "m3/**")]) {
        for (const borrow of [false, true]) {
          const mapped = await readAll(watched(sim.view(), true).disk, filter, from, borrow);
          const copied = await readAll(watched(sim.view(), false).disk, filter, from, borrow);
          expect(mapped.seqs.length).toBeGreaterThan(0);
          expect(mapped.seqs).toEqual(copied.seqs);
        }
      }
    }
  });

  test("an image larger than a lane maps at once is mapped in pieces from where the lane is: exact, each piece bounded", async () => {
    // One partition, 16 KiB chunks: a lane maps at most 256 chunks (4 MiB) of a file at once, and
    // the partition's one image is ~7 MB (before, the rest of any file was mapped whole: a
    // subtree store past 2 GiB gave the lane negative int32 offsets).
    const path = `${dir.path}/large`;
    const options = { readBufferBytes: 16 * 1024 };
    const count = 40_000;
    const big = (seq: number) => payloadOf(seq, 100 + (seq % 150));
    {
      const { store } = await Store.open(new BunDisk(path), options);
      for (let seq = 1; seq <= count; seq++) store.append(seq, timeOf(seq), "one/x", big(seq));
      await store.commit();
      await store.close();
    }
    const pieces: number[] = [];
    const disk = new WatchedDisk(new BunDisk(path), {
      map: (_path, _position, bytes) => pieces.push(bytes),
    });
    const { store } = await Store.open(disk, options);
    const stored = store.stats().segmentBytes;
    expect(stored).toBeGreaterThan(6e6);
    const reader = store.read(Filter.of("**"), { seq: 1 });
    let next = 1;
    for (;;) {
      const batch = await reader.nextBatch();
      if (batch.length === 0) break;
      for (const message of batch) {
        expect(message.seq).toBe(next++);
        expect([...message.payload]).toEqual([...big(message.seq)]);
      }
    }
    await store.close({ sort: false });
    expect(next).toBe(count + 1);
    // The first chunk, then pieces of at most 4 MiB (and the record the lane stands on) to the end.
    expect(pieces.length).toBeGreaterThanOrEqual(3);
    for (const bytes of pieces) expect(bytes).toBeLessThanOrEqual(4 * 1024 * 1024 + 16 * 1024);
    expect(pieces.reduce((a, b) => a + b, 0)).toBeGreaterThan(stored * 0.95);
  });

  test("a damaged byte in a mapped image fails its one CRC, and the damaged record is reported with file and offset", async () => {
    const sim = new SimDisk({ seed: 72 });
    await fill(sim.view());
    const pack = (await sim.list("segments")).find((name) => name.endsWith(".pak")) as string;
    const bytes = sim.snapshot(`segments/${pack}`) as Uint8Array;
    const at = Math.floor(bytes.length / 3);
    sim.corrupt(`segments/${pack}`, at, new Uint8Array([bytes[at] ^ 0xff]));
    const error = await readAll(
      watched(sim.view(), true).disk,
      Filter.of("**"),
      { seq: 1 },
      true,
    ).then(
      () => null,
      (e: Error) => e,
    );
    expect(error?.message).toContain(pack);
    expect(error?.message).toMatch(/at offset \d+/);
  });
});
