/**
 * latestOf: the newest message of each topic matching a filter (MQTT's retained messages), from the
 * tip and from the store, with properties; the same answer after a restart on the same store;
 * a message is answered only once durable.
 */
import { describe, expect, test } from "bun:test";
import { PROTOCOL_VERSION } from "../constants.ts";
import { encodeFrame, FrameWriter, type OutgoingFrame } from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";
import type { LatestMessage } from "./latest.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const ascii = (value: string) => new TextEncoder().encode(value);

/** A broker over `store` (a restart: a new broker, tip refilled with the store's newest). */
function start(store: MemoryStore, tipBytes: number) {
  const topics = new TopicTable();
  const tip = new Tip(topics, { capacityBytes: tipBytes, poolBlocks: 16 });
  const tasks: (() => void)[] = [];
  for (const message of store.messages.slice(-3)) {
    const properties = message.properties;
    tip.append(
      topics.internValid(message.topic),
      message.seq,
      message.timeUs,
      message.payload,
      0,
      message.payload.length,
      properties,
      0,
      properties?.length ?? 0,
    );
  }
  let timeUs = 1_000_000;
  const broker = new Broker({
    topics,
    tip,
    store,
    clock: { nowUs: () => (timeUs += 10) },
    scheduler: { soon: (task) => tasks.push(task) },
  });
  const sessionId = broker.open({ write: (bytes) => bytes.length, close: () => {} });
  const send = (frame: OutgoingFrame) => {
    const writer = new FrameWriter();
    encodeFrame(writer, frame);
    broker.receive(sessionId, writer.bytes().slice());
  };
  send({ kind: "hello", version: PROTOCOL_VERSION, clientName: "t", authToken: null });
  const settle = async () => {
    for (let round = 0; round < 1000; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      if (tasks.length === 0) return;
      for (const task of tasks.splice(0)) task();
    }
  };
  let requestId = 0;
  const publish = (topic: string, payload: string, properties?: Uint8Array) =>
    send({
      kind: "publish",
      requestId: ++requestId,
      messages: [{ topic, payload: ascii(payload), properties }],
    });
  return { broker, publish, settle };
}

const plain = (messages: LatestMessage[]) =>
  messages.map((m) => `${m.seq} ${m.topic}=${text(m.payload)} [${[...m.properties]}]`);

describe("latestOf", () => {
  test("newest per topic for exact, ** and * filters; the same after a restart", async () => {
    const store = new MemoryStore();
    const first = start(store, 1024);
    first.publish("home/kitchen/temp", "20", Uint8Array.of(1, 2));
    first.publish("home/hall/temp", "18");
    first.publish("home/kitchen/temp", "21", Uint8Array.of(3));
    first.publish("home/kitchen/hum", "40");
    first.publish("office/temp", "22");
    // Enough of another topic that a 1 KiB tip no longer holds the ones above: read from the store.
    for (let i = 0; i < 30; i++) first.publish("noise/x", `n${i}`.padEnd(40, "."));
    first.publish("home/hall/temp", "19", Uint8Array.of(9, 9));
    await first.settle();
    const answers = async (broker: Broker) => [
      plain(await broker.latestOf(Filter.of("home/kitchen/temp"))),
      plain(await broker.latestOf(Filter.of("home/**"))),
      plain(await broker.latestOf(Filter.of("home/*/temp"))),
      plain(await broker.latestOf(Filter.of("nothing/here"))),
      (await broker.latestOf(Filter.of("**"))).length,
    ];
    const before = await answers(first.broker);
    expect(before).toEqual([
      ["3 home/kitchen/temp=21 [3]"],
      ["3 home/kitchen/temp=21 [3]", "4 home/kitchen/hum=40 []", "36 home/hall/temp=19 [9,9]"],
      ["3 home/kitchen/temp=21 [3]", "36 home/hall/temp=19 [9,9]"],
      [],
      5,
    ]);
    const second = start(store, 1024);
    expect(await answers(second.broker)).toEqual(before);
    // After the restart, a newer message of a topic wins over the stored one.
    second.publish("home/kitchen/temp", "23");
    await second.settle();
    expect(plain(await second.broker.latestOf(Filter.of("home/kitchen/temp")))).toEqual([
      "37 home/kitchen/temp=23 []",
    ]);
  });

  test("a message not yet durable is answered once it is", async () => {
    const store = new MemoryStore();
    const world = start(store, 64 * 1024);
    store.holdCommits = true;
    world.publish("a/b", "x");
    let answer = null as string[] | null;
    const asked = world.broker.latestOf(Filter.of("a/b")).then((m) => {
      answer = plain(m);
    });
    await world.settle();
    expect(answer).toBeNull();
    store.holdCommits = false;
    store.release();
    await world.settle();
    await asked;
    expect(answer).toEqual(["1 a/b=x []"]);
  });

  test("a topic whose newest message retention removed has none", async () => {
    const store = new MemoryStore();
    const world = start(store, 1024);
    world.publish("old/t", "gone");
    for (let i = 0; i < 40; i++) world.publish("new/t", `m${i}`.padEnd(40, "."));
    await world.settle();
    store.retainFrom(2);
    const restarted = start(store, 1024);
    expect(plain(await restarted.broker.latestOf(Filter.of("old/t")))).toEqual([]);
    expect(plain(await restarted.broker.latestOf(Filter.of("new/t")))).toEqual([
      `41 new/t=${"m39".padEnd(40, ".")} []`,
    ]);
  });

  test("the store is scanned once for all filters, also by callers asking at once", async () => {
    const store = new MemoryStore();
    const first = start(store, 1024);
    for (let i = 0; i < 8; i++) first.publish(`dt/${i}`, `v${i}`);
    await first.settle();
    const restarted = start(store, 1024);
    const read = store.read.bind(store);
    let scans = 0;
    store.read = (filter: Filter, from: { seq: number } | { timeUs: number }) => {
      // A scan reads a filter; a message is read by its topic.
      if (filter.toString().includes("*")) scans++;
      return read(filter, from);
    };
    const asked = await Promise.all([
      ...Array.from({ length: 20 }, () => restarted.broker.latestOf(Filter.of("dt/**"))),
      restarted.broker.latestOf(Filter.of("dt/3")),
      restarted.broker.latestOf(Filter.of("dt/*")),
    ]);
    expect(asked.map((messages) => messages.length)).toEqual([...Array(20).fill(8), 1, 8]);
    expect(scans).toBe(1);
  });
});
