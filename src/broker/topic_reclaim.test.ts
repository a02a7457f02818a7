/**
 * Topic ids that retention freed are reclaimed without a restart (issue 28 part 4): a broker whose
 * table holds 1,000 topics, over a MemoryStore whose retention removes old messages. Once the
 * old topics have no record in the tip or the store, new topics are accepted again, taking the
 * old ids; every subscriber (live, shared groups of equal filters, exact filters, replays from
 * the store and from the tip across the point where ids were reused) gets exactly the names
 * published at each seq, and only the topics its filter matches.
 */
import { expect, test } from "bun:test";
import { PROTOCOL_VERSION } from "../constants.ts";
import { encodeFrame, FrameDecoder, FrameWriter, type OutgoingFrame } from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";
import type { Connection } from "./ports.ts";

const TOPICS_MAX = 1000;

function frameBytes(frame: OutgoingFrame): Uint8Array {
  const writer = new FrameWriter();
  encodeFrame(writer, frame);
  return writer.bytes().slice();
}

/** A broker over `store` with a table of TOPICS_MAX topics; `settle()` runs its tasks out. */
function world(store: MemoryStore, topicsMax = TOPICS_MAX) {
  // Small batches, so reclaiming takes several steps (epochs) and caches catch up across them.
  const topics = new TopicTable({ topicsMax, reclaimBatchIds: 64 });
  const tasks: (() => void)[] = [];
  let timeUs = 1_000_000;
  const tip = new Tip(topics, { capacityBytes: 64 * 1024 });
  const broker = new Broker({
    topics,
    tip,
    store,
    clock: { nowUs: () => (timeUs += 10) },
    scheduler: { soon: (task) => tasks.push(task) },
  });
  const settle = async () => {
    for (let round = 0; round < 100_000; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      if (tasks.length === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        if (tasks.length === 0) return;
      }
      for (const task of tasks.splice(0)) task();
    }
    throw new Error("settle: work never ran out");
  };
  return { broker, topics, settle, tip };
}

/** A client: its frames decoded as they arrive; DATA kept as [seq, topic] per subscription. */
function client(broker: Broker, name: string) {
  const decoder = new FrameDecoder();
  const data = new Map<number, [number, string][]>();
  const acks: { requestId: number; firstSeq: number; count: number }[] = [];
  const errors: string[] = [];
  const connection: Connection = {
    write: (bytes) => {
      decoder.push(bytes);
      for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
        if (frame.kind === "data") {
          const received = data.get(frame.subscriptionId) ?? [];
          data.set(frame.subscriptionId, received);
          const messages = frame.messages;
          while (messages.next()) received.push([messages.seq, messages.topic]);
        } else if (frame.kind === "publish_ack") acks.push(frame);
        else if (frame.kind === "error") errors.push(frame.reason);
      }
      return bytes.length;
    },
    close: () => {},
  };
  const id = broker.open(connection);
  broker.receive(
    id,
    frameBytes({ kind: "hello", version: PROTOCOL_VERSION, clientName: name, authToken: null }),
  );
  let requestId = 0;
  return {
    data,
    acks,
    errors,
    subscribe(subscriptionId: number, filter: string, start: OutgoingStart): void {
      broker.receive(
        id,
        frameBytes({ kind: "subscribe", subscriptionId, start, filter: Filter.of(filter) }),
      );
    },
    publish(topics: string[]): number {
      const payload = new Uint8Array(8);
      const messages = topics.map((topic) => ({ topic, payload }));
      broker.receive(id, frameBytes({ kind: "publish", requestId: ++requestId, messages }));
      return requestId;
    },
  };
}

type OutgoingStart = { kind: "live" } | { kind: "earliest" } | { kind: "seq"; seq: number };

test("a full table takes new topics again once retention removed the old ones; every subscriber gets the right names", async () => {
  const store = new MemoryStore();
  const { broker, topics, settle, tip } = world(store);
  /** The topic published at each seq. */
  const published: string[] = [];
  const publisher = client(broker, "p");
  const publish = async (names: string[]) => {
    const requestId = publisher.publish(names);
    await settle();
    const ack = publisher.acks.find((a) => a.requestId === requestId);
    if (ack === undefined) return false;
    for (let i = 0; i < names.length; i++) published[ack.firstSeq + i] = names[i];
    return true;
  };
  // Live subscribers: all, two equal filters of the old topics (a shared group), exact ones.
  const live = client(broker, "live");
  const filters = ["**", "old/**", "old/**", "new/**", "old/7", "new/7"];
  for (const [i, filter] of filters.entries()) live.subscribe(i + 1, filter, { kind: "live" });
  await settle();

  for (let batch = 0; batch < TOPICS_MAX / 100; batch++)
    expect(await publish(Array.from({ length: 100 }, (_, i) => `old/${batch * 100 + i}`))).toBe(
      true,
    );
  expect(await publish(["new/0"])).toBe(false);
  expect(publisher.errors.at(-1)).toContain("limit");

  // old/0 goes on until the ring holds nothing else; retention keeps only its newest records.
  for (let round = 0; round < 30; round++)
    expect(await publish(Array.from({ length: 100 }, () => "old/0"))).toBe(true);
  const reclaimPoint = store.nextSeq;
  store.retainFrom(reclaimPoint - 50);

  // Held topics keep their ids; new topics take the freed ones, without a restart.
  const old0 = topics.lookup("old/0");
  for (let batch = 0; batch < 9; batch++)
    expect(await publish(Array.from({ length: 100 }, (_, i) => `new/${batch * 100 + i}`))).toBe(
      true,
    );
  expect(topics.lookup("old/0")).toBe(old0);
  expect(topics.lookup("old/5")).toBe(-1);
  expect(topics.topicCount).toBe(TOPICS_MAX);
  // Reclaimed in batches as new topics needed them: the ids freed and not yet taken are unknown.
  expect(topics.topicsReclaimed).toBeGreaterThanOrEqual(900);
  expect(topics.stats().known).toBe(TOPICS_MAX - (topics.topicsReclaimed - 900));
  // Mixed with the one old topic held, in one batch.
  expect(await publish(["old/0", "new/900", "old/0", "new/7"])).toBe(true);

  // Replays across the reuse: from the store (everything retained) and from the tip. From the
  // earliest, the oldest held comes first: the tip's, when it holds seqs retention removed.
  const oldestHeld = Math.min(tip.records.firstSeq, store.firstSeqHeld);
  const replay = client(broker, "replay");
  replay.subscribe(1, "**", { kind: "earliest" });
  replay.subscribe(2, "old/**", { kind: "seq", seq: reclaimPoint - 20 });
  replay.subscribe(3, "new/**", { kind: "seq", seq: reclaimPoint - 20 });
  await settle();

  const expected = (filter: string, fromSeq: number) => {
    const matcher = Filter.of(filter);
    const rows: [number, string][] = [];
    for (let seq = fromSeq; seq < published.length; seq++)
      if (matcher.matches(published[seq])) rows.push([seq, published[seq]]);
    return rows;
  };
  filters.forEach((filter, i) => {
    expect({ filter, rows: live.data.get(i + 1) ?? [] }).toEqual({
      filter,
      rows: expected(filter, 1),
    });
  });
  expect(replay.data.get(1)).toEqual(expected("**", oldestHeld));
  expect(replay.data.get(2)).toEqual(expected("old/**", reclaimPoint - 20));
  expect(replay.data.get(3)).toEqual(expected("new/**", reclaimPoint - 20));
  expect(live.errors).toEqual([]);
  expect(replay.errors).toEqual([]);

  // Published volumes by name: the reclaimed topics' counts went with their ids.
  const volumes = new Map(broker.topicVolumes().map((row) => [row.topic, row.messages]));
  expect(volumes.get("old/0")).toBe(1 + 30 * 100 + 2);
  expect(volumes.get("new/7")).toBe(2);
  expect(volumes.get("new/900")).toBe(1);
  expect(volumes.has("old/5")).toBe(false);
});

test("a batch naming a topic about to be reclaimed and a new one keeps both names apart", async () => {
  const store = new MemoryStore();
  const { broker, settle } = world(store, 4);
  const publisher = client(broker, "p");
  const subscriber = client(broker, "s");
  subscriber.subscribe(1, "**", { kind: "live" });
  await settle();
  publisher.publish(["a", "b", "c", "d"]);
  await settle();
  // Only d is held after this; a, b and c are in neither the tip nor the store.
  for (let round = 0; round < 30; round++) publisher.publish(new Array(100).fill("d"));
  await settle();
  store.retainFrom(store.nextSeq - 1);
  // Interning e finds the table full: a reclaim step must not free a, named before it.
  publisher.publish(["a", "e"]);
  await settle();
  expect(publisher.errors).toEqual([]);
  expect(
    subscriber.data
      .get(1)
      ?.slice(-2)
      .map(([, topic]) => topic),
  ).toEqual(["a", "e"]);
});
