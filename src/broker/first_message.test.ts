/**
 * A subscription that starts behind gets its first messages soon: from the tip in the event that
 * subscribed it (written with SUBSCRIBED), not a turn of the event loop later when the catch-up
 * pump runs; from disk in a small first batch (issue 32, time to first message).
 */
import { expect, test } from "bun:test";
import { CATCH_UP_FIRST_SLICE_BYTES, PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
} from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";
import type { BrokerStore } from "./ports.ts";

/** A broker whose scheduled tasks run only when the test says. */
class World {
  readonly topics = new TopicTable();
  readonly store = new MemoryStore();
  readonly tasks: (() => void)[] = [];
  readonly broker: Broker;
  timeUs = 1_000_000;

  constructor(tipBytes: number) {
    this.broker = new Broker({
      topics: this.topics,
      tip: new Tip(this.topics, { capacityBytes: tipBytes, poolBlocks: 16 }),
      store: this.store,
      clock: { nowUs: () => (this.timeUs += 10) },
      scheduler: { soon: (task) => this.tasks.push(task) },
    });
  }

  /** A handshaken client; returns its session id and the frames it received. */
  client(): { id: number; frames: (Frame | { kind: "decode_error" })[] } {
    const decoder = new FrameDecoder();
    const frames: (Frame | { kind: "decode_error" })[] = [];
    const id = this.broker.open({
      pause: () => {},
      resume: () => {},
      write: (bytes) => {
        decoder.push(bytes);
        for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
          if (frame.kind === "data") {
            const m = frame.messages;
            while (m.next()) frames.push({ ...frame });
          } else frames.push(frame);
        }
        return bytes.length;
      },
      close: () => {},
    });
    this.send(id, { kind: "hello", version: PROTOCOL_VERSION, clientName: "t", authToken: null });
    return { id, frames };
  }

  send(id: number, frame: OutgoingFrame): void {
    const writer = new FrameWriter();
    encodeFrame(writer, frame);
    this.broker.receive(id, writer.bytes().slice());
  }

  /** Runs scheduled tasks and lets promises settle until nothing is left. */
  async settle(): Promise<void> {
    for (let round = 0; round < 10_000; round++) {
      await microtasks();
      if (this.tasks.length === 0) return;
      for (const task of this.tasks.splice(0)) task();
    }
    throw new Error("settle: work never ran out");
  }

  async publish(count: number, payloadBytes: number): Promise<void> {
    const { id } = this.client();
    const payload = new Uint8Array(payloadBytes).fill(0x61);
    for (let i = 0; i < count; i++)
      this.send(id, {
        kind: "publish",
        requestId: i + 1,
        messages: [{ topic: `app/p${i % 4}/t${i % 7}`, payload }],
      });
    await this.settle();
  }
}

/** Lets pending promises (the memory store's) settle, running no scheduled task. */
async function microtasks(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

function subscribeEarliest(world: World, id: number): void {
  world.send(id, {
    kind: "subscribe",
    subscriptionId: 1,
    start: { kind: "earliest" },
    filter: ["app/p1/**"],
  });
}

test("from the tip, the first messages are written in the event that subscribed, with SUBSCRIBED", async () => {
  const world = new World(1 << 20);
  await world.publish(200, 64);
  const { id, frames } = world.client();
  const before = frames.length;
  subscribeEarliest(world, id);
  const now = frames.slice(before).map((frame) => frame.kind);
  expect(now[0]).toBe("subscribed");
  expect(now.filter((kind) => kind === "data").length).toBeGreaterThan(0);
  // A small first slice: the rest comes from the pump.
  expect(now.filter((kind) => kind === "data").length).toBeLessThan(50);
  await world.settle();
  expect(frames.filter((frame) => frame.kind === "data").length).toBe(50);
});

test("from disk, the reader is opened with a small first batch", async () => {
  // A tip too small to hold the stream: the subscription starts on disk.
  const world = new World(4096);
  await world.publish(400, 64);
  const asked: (number | undefined)[] = [];
  const read = world.store.read.bind(world.store);
  const store = world.store as unknown as { read: BrokerStore["read"] };
  store.read = (filter, from, options) => {
    asked.push(options?.firstBatchBytesMax);
    return read(filter, from);
  };
  const { id, frames } = world.client();
  subscribeEarliest(world, id);
  await world.settle();
  expect(asked).toEqual([CATCH_UP_FIRST_SLICE_BYTES]);
  expect(frames.filter((frame) => frame.kind === "data").length).toBe(100);
});
