/**
 * Store.seal (what `aria split --seal` asks of the data directory's owner) on the simulated disk:
 * every record appended before the call is in a closed segment when it resolves, none is lost or
 * duplicated, and publishes that go on meanwhile neither keep it going nor get lost.
 */
import { expect, test } from "bun:test";
import { Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { SMALL_LIMITS, TOPICS, payloadOf, readSeqs, seqRange } from "./fixtures/store_helpers.ts";

/** Limits whose size and age triggers never fire in these tests: only a seal closes segments. */
const NO_TRIGGERS = {
  ...SMALL_LIMITS,
  journalBytesMax: 1 << 20,
  journalRetainedBytesMax: 1 << 24,
  segmentBytesMax: 1500,
  segmentAgeUsMax: 1e15,
};

function closedRecords(store: Store): number {
  return store
    .layout()
    .reduce(
      (sum, layout) => sum + layout.segments.reduce((s, segment) => s + segment.records, 0),
      0,
    );
}

test("seal closes every open record into segments (several per partition past the segment size)", async () => {
  const disk = new SimDisk();
  const { store } = await Store.open(disk, NO_TRIGGERS);
  for (let seq = 1; seq <= 300; seq++)
    store.append(seq, seq, TOPICS[seq % TOPICS.length], payloadOf(seq));
  expect(store.openData()).toMatchObject({ records: 300, partitions: 5 });
  expect(closedRecords(store)).toBe(0);
  const sealed = await store.seal();
  expect(sealed.records).toBe(300);
  expect(sealed.segmentsClosed).toBe(
    store.layout().reduce((sum, layout) => sum + layout.segments.length, 0),
  );
  expect(sealed.segmentsClosed).toBeGreaterThan(5); // 1500-byte segments: more than one per partition
  expect(store.openData()).toMatchObject({ records: 0, partitions: 0, oldestTimeUs: null });
  expect(closedRecords(store)).toBe(300);
  expect(await store.seal()).toEqual({ segmentsClosed: 0, records: 0, bytes: 0 });
  expect(await readSeqs(store)).toEqual(seqRange(300));
  await store.close({ sort: false });
  const { store: reopened, recovery } = await Store.open(disk, NO_TRIGGERS);
  expect(recovery.recordsReplayed).toBe(0);
  expect(await readSeqs(reopened)).toEqual(seqRange(300));
  await reopened.close();
});

test("publishes during a seal: it ends, closes what came before it, and nothing is lost", async () => {
  const { store } = await Store.open(new SimDisk(), NO_TRIGGERS);
  let seq = 0;
  const publish = (count: number) => {
    for (let i = 0; i < count; i++, seq++)
      store.append(seq + 1, seq + 1, TOPICS[(seq + 1) % TOPICS.length], payloadOf(seq + 1));
  };
  publish(200);
  const through = seq;
  let publishing = true;
  const publisher = (async () => {
    while (publishing) {
      publish(5);
      await store.commit();
    }
  })();
  let sealed: Awaited<ReturnType<typeof store.seal>>;
  try {
    sealed = await store.seal();
  } finally {
    publishing = false;
    await publisher;
  }
  expect(sealed.records).toBeGreaterThanOrEqual(through);
  // Every record appended before the seal is closed; those after it may still be open.
  for (const layout of store.layout()) expect(layout.segments.length).toBeGreaterThan(0);
  expect(closedRecords(store)).toBeGreaterThanOrEqual(through);
  expect(closedRecords(store) + store.openData().records).toBe(seq);
  expect(await readSeqs(store)).toEqual(seqRange(seq));
  await store.close();
});
