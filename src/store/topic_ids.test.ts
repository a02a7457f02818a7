/**
 * Appends that name their topic by the broker's ids as well (Store.append's topicId and
 * partitionId; context.ts, "Topics by id"): counted and placed exactly as appends by name are,
 * through sorts and a reopen, however the two kinds mix — a topic met by name first and by id
 * later, an id reused for another topic (the table reclaimed it), and a partition id that names
 * another partition (ids of another table).
 */
import { expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { Filter, TopicTable } from "../topic/mod.ts";
import { Store, type StoreOptions, type TopicVolume } from "./mod.ts";

const OPTIONS: StoreOptions = {
  segmentBytesMax: 2048,
  journalBytesMax: 4096,
  journalRetainedBytesMax: 16384,
  indexIntervalBytes: 128,
  segmentAgeUsMax: 1e15,
};

/** What was appended: per topic (record bytes = 32 + topic + payload), and each seq's topic. */
class Reference {
  readonly topics = new Map<string, TopicVolume>();
  readonly topicOfSeq: string[] = [];
  add(seq: number, topic: string, payloadBytes: number): void {
    const row = this.topics.get(topic) ?? { topic, messages: 0, recordBytes: 0, payloadBytes: 0 };
    row.messages++;
    row.recordBytes += 32 + topic.length + payloadBytes;
    row.payloadBytes += payloadBytes;
    this.topics.set(topic, row);
    this.topicOfSeq[seq] = topic;
  }
  rows(): TopicVolume[] {
    return sorted([...this.topics.values()]);
  }
}

function sorted(rows: TopicVolume[]): TopicVolume[] {
  return [...rows].sort((a, b) => (a.topic < b.topic ? -1 : 1));
}

/** Every message `filter` reads from seq 1: [seq, topic] pairs. */
async function readAll(store: Store, filter: string): Promise<[number, string][]> {
  const reader = store.read(Filter.of(filter), { seq: 1 });
  const read: [number, string][] = [];
  for (;;) {
    const batch = await reader.nextBatch();
    if (batch.length === 0) return read;
    for (const message of batch) read.push([message.seq, message.topic]);
  }
}

test("appends by ids count and place each topic as appends by name do, through sorts and a reopen", async () => {
  const disk = new SimDisk();
  const reference = new Reference();
  const { store } = await Store.open(disk.view(), OPTIONS);
  const table = new TopicTable();
  const other = new TopicTable(); // another table: its ids name other topics
  other.internValid("zz/top/one");
  other.internValid("a/b/x");
  const append = (topic: string, how: "name" | "ids" | "other ids") => {
    const seq = store.nextSeq;
    const payload = new Uint8Array(5 + (seq % 11));
    if (how === "name") store.append(seq, 1000 + seq, topic, payload);
    else {
      const ids = how === "ids" ? table : other;
      const topicId = ids.internValid(topic);
      store.append(
        seq,
        1000 + seq,
        topic,
        payload,
        0,
        payload.length,
        null,
        0,
        0,
        topicId,
        ids.partitionOfTopic(topicId),
      );
    }
    reference.add(seq, topic, payload.length);
  };
  const topics = ["a/b/c", "a/b/d", "a/e", "solo", "k/l/m/n"];
  for (let i = 0; i < 60; i++) append(topics[i % topics.length], i % 3 === 0 ? "name" : "ids");
  // Asked by name (stats), then appended by ids again: the entries made by id were filed.
  expect(sorted(store.topicVolumes())).toEqual(reference.rows());
  for (let i = 0; i < 60; i++) append(topics[i % topics.length], i % 4 === 0 ? "name" : "ids");
  // Ids of another table: its topic 0 is "zz/top/one" (partition "zz/top"), its topic 1 "a/b/x".
  append("q/r/s", "other ids");
  for (let i = 0; i < 40; i++) append(i % 2 === 0 ? "q/r/s" : "a/b/x", "other ids");
  // A reclaimed id handed out again names another topic in another partition.
  const reused = new TopicTable({ topicsMax: 1 });
  let horizon = 0;
  reused.reclaimBelow(() => horizon);
  for (let i = 0; i < 30; i++) {
    const topic = i % 2 === 0 ? "m/n/first" : "p/q/second";
    const result = reused.intern(topic, store.nextSeq);
    if (!result.ok) {
      horizon = store.nextSeq; // every record of the other topic is "gone": its id comes back
      expect(reused.reclaim()).toBe(1);
    }
    const topicId = reused.internValid(topic);
    expect(topicId).toBe(0);
    const seq = store.nextSeq;
    const payload = new Uint8Array(9);
    store.append(seq, 1000 + seq, topic, payload, 0, 9, null, 0, 0, 0, reused.partitionOfTopic(0));
    reference.add(seq, topic, payload.length);
  }
  await store.commit();
  await store.idle(); // the journal budget closes segments
  expect(store.layout().length).toBeGreaterThan(0);

  const expectHeld = async (at: Store) => {
    expect(sorted(at.topicVolumes())).toEqual(reference.rows());
    const all = reference.topicOfSeq.map((topic, seq) => [seq, topic]).filter((row) => row[1]);
    expect(await readAll(at, "**")).toEqual(all as [number, string][]);
    // Each partition holds its own topics: a read of one partition finds every message of it.
    for (const partition of ["a/b", "q/r", "m/n", "p/q", "k/l", "a/e", "solo"]) {
      const mine = all.filter(
        ([, topic]) => topic === partition || `${topic}`.startsWith(`${partition}/`),
      );
      expect(
        await readAll(
          at,
          partition === "solo" || partition === "a/e" ? partition : `${partition}/**`,
        ),
      ).toEqual(mine as [number, string][]);
    }
  };
  await expectHeld(store);
  await store.close();
  const { store: reopened } = await Store.open(disk.view(), OPTIONS);
  await expectHeld(reopened);
  await reopened.close();
});

test("retention subtracts from topics appended by ids before anything asked by name; waiting entries past one per id are filed", async () => {
  const disk = new SimDisk();
  const { store } = await Store.open(disk.view(), OPTIONS);
  const table = new TopicTable();
  const append = (topic: string) => {
    const id = table.internValid(topic);
    const seq = store.nextSeq;
    const payload = new Uint8Array(7);
    store.append(seq, 1000 + seq, topic, payload, 0, 7, null, 0, 0, id, table.partitionOfTopic(id));
  };
  for (let i = 0; i < 300; i++) append(`r/s/t${i % 40}`);
  await store.seal();
  // Nothing asked by name yet: retention's counts meet entries by id only.
  const removed = await store.retain({ bytes: 0 }, 0);
  expect(removed.segmentsRemoved + removed.storesRemoved).toBeGreaterThan(0);
  expect(store.topicVolumes()).toEqual([]);
  for (let i = 0; i < 5; i++) append("r/s/t1");
  expect(store.topicVolumes()).toEqual([
    { topic: "r/s/t1", messages: 5, recordBytes: 5 * (32 + 6 + 7), payloadBytes: 35 },
  ]);
  // One id reused for 90,000 names, nothing asked by name: past 65,536 waiting entries beyond
  // one per id, each new one files some (counts unchanged).
  // (A store of the default sizes: this many records in small journals would take long.)
  await store.close();
  const { store: big } = await Store.open(new SimDisk().view(), { fsync: "never" });
  const names = 90_000;
  for (let i = 0; i < names; i++) {
    const topic = `u/v/${i}`;
    const seq = big.nextSeq;
    big.append(seq, 1000 + seq, topic, new Uint8Array(1), 0, 1, null, 0, 0, 7, 0);
    if (i === 100) expect(big.topicVolumes().length).toBe(101); // some filed early, by name
  }
  const volumes = big.topicVolumes();
  expect(volumes.length).toBe(names);
  expect(
    volumes.every((row) => row.messages === 1 && row.recordBytes === 33 + row.topic.length),
  ).toBe(true);
  await big.close();
});
