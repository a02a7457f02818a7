/**
 * A reader's read-ahead (ReadOptions.bufferBytes): its partition reads share it, so a reader that
 * hands out a little at a time — a subscriber's catch-up, whose client may never read — reads and
 * holds little. Before, every reader's partition reads shared the store's 64 MiB: a reader of
 * `**` over 16 partitions read 1 MiB per partition for each of its 16 lanes, and a catch-up
 * reader of messages still in the journal held ~84 MB after two 4 MiB batches. And a borrowing
 * reader's pool keeps a round of its lanes' chunks, so reading on allocates little.
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../../testing/sim_disk.ts";
import { Filter } from "../../topic/filter.ts";
import { Store } from "../mod.ts";

const PARTITIONS = 16;
const PAYLOAD_BYTES = 1024;
const MESSAGES = 8192;

async function filledStore(): Promise<Store> {
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(3);
  for (let seq = 1; seq <= MESSAGES; seq++) {
    store.append(seq, seq, `bench/p${seq % PARTITIONS}/t${seq % 64}`, payload);
    if (seq % 1024 === 0) await store.commit();
  }
  await store.commit();
  return store;
}

/** Bytes the store read for a borrowing reader's first batch of 64 KiB, with `bufferBytes`. */
async function firstBatchReadBytes(store: Store, bufferBytes?: number): Promise<number> {
  const before = store.stats().bytesRead;
  const reader = store.read(
    Filter.of("**"),
    { seq: 1 },
    { borrow: true, batchBytesMax: 64 * 1024, bufferBytes },
  );
  const batch = await reader.nextBatch();
  expect(batch.length).toBeGreaterThan(0);
  expect(batch[0].seq).toBe(1);
  return store.stats().bytesRead - before;
}

test("a reader's partition reads share its bufferBytes: a small one reads a small chunk per partition", async () => {
  const store = await filledStore();
  // 8 MiB of messages: the store's default read-ahead gives each of the 16 partition reads
  // 1 MiB chunks; 256 KiB over 16 gives each its smallest chunk (16 KiB).
  const small = await firstBatchReadBytes(store, 256 * 1024);
  const whole = await firstBatchReadBytes(store);
  // Measured: 1.25 MiB (16 KiB chunks of the journal, where each partition has 1/16 of the
  // records) against 16 MiB.
  expect(small).toBeLessThanOrEqual(2 * 1024 * 1024);
  expect(whole).toBeGreaterThan(8 * small);
  // Smaller chunks change what is read, not what is delivered.
  const all = store.read(Filter.of("**"), { seq: 1 }, { borrow: true, bufferBytes: 256 * 1024 });
  let next = 1;
  for (let batch = await all.nextBatch(); batch.length > 0; batch = await all.nextBatch())
    for (const message of batch) expect(message.seq).toBe(next++);
  expect(next).toBe(MESSAGES + 1);
  await store.close();
});

test("a borrowing reader reuses its lanes' buffers from batch to batch instead of allocating each read afresh", async () => {
  const store = await filledStore();
  const reader = store.read(
    Filter.of("**"),
    { seq: 1 },
    { borrow: true, batchBytesMax: 256 * 1024, bufferBytes: 4 * 1024 * 1024 },
  );
  let messages = 0;
  for (let i = 0; i < 24; i++) messages += (await reader.nextBatch()).length;
  expect(messages).toBeGreaterThan(6000);
  // A subscriber's catch-up reader (256 KiB batches, 4 MiB read-ahead) over 16 partitions in the
  // journal reads ~100 MB for these 6 MiB; measured: 8.4 MB of it in fresh buffers, 64.5 MB when
  // the pool kept only two batches and a chunk.
  expect(reader.bufferBytesAllocated).toBeLessThanOrEqual(16 * 1024 * 1024);
  await store.close();
});
