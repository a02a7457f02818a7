/**
 * What the data directory holds per topic (Store.topicVolumes, the admin app's persisted volumes):
 * counted at append and journal replay, kept per closed file in the manifest's TOPICS records
 * (kind 8), so a reopen — clean or after a crash — gives the same without reading any file;
 * retention and a split's switch subtract what they remove; files closed by an earlier build
 * (no TOPICS record) are measured once by countFiles.
 */
import { expect, test } from "bun:test";
import { executeSplit } from "../split/executor.ts";
import { inProcessRunner, storeHost } from "../split/in_process.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { crc32 } from "./crc32.ts";
import { MANIFEST_PATH } from "./layout.ts";
import { decodeManifestRecords, encodeManifestRecords, MANIFEST_TOPICS } from "./manifest_codec.ts";
import { Store, type StoreOptions, type TopicVolume } from "./mod.ts";

const OPTIONS: StoreOptions = {
  segmentBytesMax: 2048,
  journalBytesMax: 4096,
  journalRetainedBytesMax: 16384,
  indexIntervalBytes: 128,
  segmentAgeUsMax: 1e15,
};
const TOPICS = ["app/orders/new", "app/orders/paid", "app/users/eu", "ops/logs", "solo"];

/** The reference: what was appended, per topic (record bytes = 32 + topic + payload). */
class Reference {
  readonly topics = new Map<string, TopicVolume>();
  add(topic: string, payloadBytes: number, sign = 1): void {
    const row = this.topics.get(topic) ?? { topic, messages: 0, recordBytes: 0, payloadBytes: 0 };
    row.messages += sign;
    row.recordBytes += sign * (32 + topic.length + payloadBytes);
    row.payloadBytes += sign * payloadBytes;
    this.topics.set(topic, row);
  }
  rows(): TopicVolume[] {
    return sorted([...this.topics.values()].filter((row) => row.messages > 0));
  }
}

function sorted(rows: TopicVolume[]): TopicVolume[] {
  return [...rows].sort((a, b) => (a.topic < b.topic ? -1 : 1));
}

function publish(store: Store, reference: Reference, count: number): void {
  for (let i = 0; i < count; i++) {
    const seq = store.nextSeq;
    const topic = TOPICS[(seq * 7) % TOPICS.length];
    const payload = new Uint8Array(10 + (seq % 13));
    store.append(seq, 1000 + seq, topic, payload);
    reference.add(topic, payload.length);
  }
}

test("counted at append; kept through sorts, a clean reopen and a reopen after kill -9 or power loss, without reading data files", async () => {
  const disk = new SimDisk();
  const reference = new Reference();
  const { store } = await Store.open(disk.view(), OPTIONS);
  expect(store.topicVolumes()).toEqual([]);
  publish(store, reference, 400);
  await store.commit();
  await store.idle(); // the journal budget closes segments
  expect(store.layout().length).toBeGreaterThan(0);
  expect(sorted(store.topicVolumes())).toEqual(reference.rows());
  await store.close();

  const { store: reopened, recovery } = await Store.open(disk.view(), OPTIONS);
  expect(recovery.recordsReplayed).toBe(0);
  expect(reopened.uncountedFiles).toBe(0);
  expect(reopened.stats().bytesRead).toBe(0);
  expect(sorted(reopened.topicVolumes())).toEqual(reference.rows());
  await reopened.close({ sort: false });
  for (const crash of [() => disk.kill(), () => disk.crash()]) {
    // Committed (fsynced) and partly sorted: the journal's unsorted records are replayed, the
    // closed files' counts read from the manifest.
    const { store: before } = await Store.open(disk.view(), OPTIONS);
    publish(before, reference, 300);
    await before.commit();
    await before.idle();
    publish(before, reference, 7);
    await before.commit();
    crash();
    const { store: after, recovery: replay } = await Store.open(disk.view(), OPTIONS);
    expect(replay.recordsReplayed).toBeGreaterThan(0);
    expect(after.layout().length).toBeGreaterThan(0);
    expect(sorted(after.topicVolumes())).toEqual(reference.rows());
    await after.close({ sort: false });
  }
});

test("retention subtracts the files it removes; a split's switch keeps every topic's count", async () => {
  const disk = new SimDisk();
  const reference = new Reference();
  const { store } = await Store.open(disk, OPTIONS);
  publish(store, reference, 400);
  await store.seal();
  const report = await executeSplit(storeHost(store), inProcessRunner(disk, { crc32 }), disk, {
    plan: { algorithm: "adaptive" },
    workers: 1,
    intervalBytes: 128,
  });
  expect(report.switched).toBe(true);
  expect(sorted(store.topicVolumes())).toEqual(reference.rows());
  publish(store, reference, 100);
  await store.seal();
  const before = sorted(store.topicVolumes());
  expect(before).toEqual(reference.rows());
  // Retention of everything closed leaves the journal's records only: none here (all sealed).
  const removed = await store.retain({ bytes: 0 }, 0);
  expect(removed.storesRemoved + removed.segmentsRemoved).toBeGreaterThan(0);
  expect(store.topicVolumes()).toEqual([]);
  publish(store, reference, 10);
  await store.close();
  const { store: reopened } = await Store.open(disk, OPTIONS);
  expect(reopened.topicVolumes().reduce((sum, row) => sum + row.messages, 0)).toBe(10);
  await reopened.close();
});

test("files closed without TOPICS records (an earlier build) are left out until countFiles measures them, once", async () => {
  const disk = new SimDisk();
  const reference = new Reference();
  const { store } = await Store.open(disk, OPTIONS);
  publish(store, reference, 300);
  await store.close(); // everything sorted into segments
  // The directory as an earlier build left it: its manifest without TOPICS records.
  const file = await disk.open(MANIFEST_PATH, "write");
  const bytes = new Uint8Array(await file.size());
  await file.read(0, bytes);
  const headerBytes = new DataView(bytes.buffer).getUint16(6, true);
  const records = decodeManifestRecords(bytes.subarray(headerBytes), crc32).records.filter(
    (record) => record.kind !== MANIFEST_TOPICS,
  );
  const body = encodeManifestRecords(records, crc32);
  await file.truncate(0);
  await file.write(0, bytes.subarray(0, headerBytes));
  await file.write(headerBytes, body);
  await file.sync();
  await file.close();

  const { store: old } = await Store.open(disk, OPTIONS);
  expect(old.uncountedFiles).toBeGreaterThan(0);
  expect(old.topicVolumes()).toEqual([]);
  expect(await old.countFiles()).toBe(
    old.layout().reduce((sum, layout) => sum + layout.segments.length, 0),
  );
  expect(old.uncountedFiles).toBe(0);
  expect(sorted(old.topicVolumes())).toEqual(reference.rows());
  await old.close();
  const { store: reopened } = await Store.open(disk, OPTIONS);
  expect(reopened.uncountedFiles).toBe(0);
  expect(sorted(reopened.topicVolumes())).toEqual(reference.rows());
  await reopened.close();
});
