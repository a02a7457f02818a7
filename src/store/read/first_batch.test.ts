/**
 * ReadOptions.firstBatchBytesMax: a reader's first batch is small (a subscriber's first message
 * leaves sooner), the ones after it are of batchBytesMax, and together they are the whole read.
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../../testing/sim_disk.ts";
import { Filter } from "../../topic/filter.ts";
import { Store } from "../mod.ts";

test("the first batch stops at firstBatchBytesMax, the next ones at batchBytesMax", async () => {
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const payload = new Uint8Array(100).fill(1);
  for (let seq = 1; seq <= 3000; seq++) store.append(seq, seq, `app/p${seq % 3}/t`, payload);
  await store.commit();
  await store.sortAll();
  const reader = store.read(
    Filter.of("**"),
    { seq: 1 },
    { borrow: true, batchBytesMax: 64 * 1024, firstBatchBytesMax: 1024 },
  );
  const sizes: number[] = [];
  let next = 1;
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch()) {
    sizes.push(batch.length);
    for (const message of batch) expect(message.seq).toBe(next++);
  }
  expect(next).toBe(3001);
  // 1 KiB of 100-byte payloads (and their topics) is 10 messages; 64 KiB about 600.
  expect(sizes[0]).toBeLessThanOrEqual(10);
  expect(sizes[1]).toBeGreaterThan(500);
  await store.close();
});

test("a reader with a small first batch reads little before it: its lanes' first reads are small", async () => {
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const payload = new Uint8Array(1000).fill(1);
  for (let seq = 1; seq <= 4000; seq++) store.append(seq, seq, `app/p${seq % 2}/t`, payload);
  await store.commit();
  await store.sortAll();
  const readFirstBatch = async (firstBatchBytesMax?: number) => {
    const before = store.stats().bytesRead;
    const reader = store.read(
      Filter.of("app/p1/**"),
      { seq: 1 },
      { borrow: true, batchBytesMax: 256 * 1024, bufferBytes: 4 << 20, firstBatchBytesMax },
    );
    const batch = await reader.nextBatch();
    expect(batch[0].seq).toBe(1);
    return store.stats().bytesRead - before;
  };
  // 2 MB of the partition's records: a chunk of 1 MiB read first without, 16 KiB with.
  expect(await readFirstBatch()).toBeGreaterThanOrEqual(1 << 20);
  expect(await readFirstBatch(4096)).toBeLessThanOrEqual(64 * 1024);
  await store.close();
});
