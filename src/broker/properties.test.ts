/**
 * Message properties through the broker: a PUBLISH with properties reaches subscriptions with the
 * option PROPERTIES byte for byte (live, shared frames, from the tip, from the store) and the
 * others as v1 DATA (payload unchanged, properties dropped).
 */
import { describe, expect, test } from "bun:test";
import { PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
  type StartPosition,
} from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";

type Got = { seq: number; topic: string; payload: number[]; properties: number[] | null };

class Client {
  readonly decoder = new FrameDecoder();
  readonly frames: Frame[] = [];
  readonly got = new Map<number, Got[]>();
  /** Flags byte of every DATA frame, by subscription id. */
  readonly flags = new Map<number, number[]>();
  sessionId = 0;
  write(bytes: Uint8Array): number {
    this.decoder.push(bytes);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next()) {
      if (frame.kind === "data") {
        const m = frame.messages;
        const list = this.got.get(frame.subscriptionId) ?? [];
        const flags = this.flags.get(frame.subscriptionId) ?? [];
        flags.push(m.hasProperties ? 1 : 0);
        while (m.next())
          list.push({
            seq: m.seq,
            topic: m.topic,
            payload: [...m.payload],
            properties: m.hasProperties ? [...m.properties] : null,
          });
        this.got.set(frame.subscriptionId, list);
        this.flags.set(frame.subscriptionId, flags);
      } else if (frame.kind !== "decode_error") this.frames.push(frame);
    }
    return bytes.length;
  }
}

class World {
  readonly topics = new TopicTable();
  readonly store = new MemoryStore();
  readonly tip: Tip;
  readonly tasks: (() => void)[] = [];
  readonly broker: Broker;
  timeUs = 1_000_000;
  constructor(tipBytes = 64 * 1024) {
    this.tip = new Tip(this.topics, { capacityBytes: tipBytes, poolBlocks: 16 });
    this.broker = new Broker({
      topics: this.topics,
      tip: this.tip,
      store: this.store,
      clock: { nowUs: () => (this.timeUs += 10) },
      scheduler: { soon: (task) => this.tasks.push(task) },
    });
  }
  client(): Client {
    const client = new Client();
    client.sessionId = this.broker.open({
      write: (bytes) => client.write(bytes),
      close: () => {},
    });
    this.send(client, {
      kind: "hello",
      version: PROTOCOL_VERSION,
      clientName: "t",
      authToken: null,
    });
    return client;
  }
  send(client: Client, frame: OutgoingFrame): void {
    const writer = new FrameWriter();
    encodeFrame(writer, frame);
    this.broker.receive(client.sessionId, writer.bytes().slice());
  }
  subscribe(
    client: Client,
    id: number,
    properties: boolean,
    start: StartPosition = { kind: "live" },
  ) {
    this.send(client, {
      kind: "subscribe",
      subscriptionId: id,
      start,
      filter: ["a/**"],
      properties,
    });
  }
  async settle(): Promise<void> {
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    for (let round = 0; round < 10_000; round++) {
      await tick();
      if (this.tasks.length === 0) {
        await tick();
        if (this.tasks.length === 0) return;
      }
      for (const task of this.tasks.splice(0)) task();
    }
    throw new Error("settle: work never ran out");
  }
}

const PROPS = Uint8Array.from([0x26, 0, 1, 0x6b, 0, 1, 0x76, 0xff, 0x00]);
const messages = [
  { topic: "a/x", payload: Uint8Array.of(1, 2, 3), properties: PROPS },
  { topic: "a/y", payload: Uint8Array.of(4) },
  { topic: "a/x", payload: new Uint8Array(0), properties: Uint8Array.of(9) },
];
const withProperties: Got[] = [
  { seq: 1, topic: "a/x", payload: [1, 2, 3], properties: [...PROPS] },
  { seq: 2, topic: "a/y", payload: [4], properties: [] },
  { seq: 3, topic: "a/x", payload: [], properties: [9] },
];
const without: Got[] = withProperties.map((m) => ({ ...m, properties: null }));

describe("properties through the broker", () => {
  test("live: option PROPERTIES gets them byte for byte, a v1 subscription the same payloads", async () => {
    const world = new World();
    const reader = world.client();
    world.subscribe(reader, 1, true);
    world.subscribe(reader, 2, false);
    await world.settle();
    const publisher = world.client();
    world.send(publisher, { kind: "publish", requestId: 1, messages });
    await world.settle();
    expect(reader.got.get(1)).toEqual(withProperties);
    expect(reader.got.get(2)).toEqual(without);
    expect(reader.flags.get(2)?.every((flag) => flag === 0)).toBe(true);
    expect(world.store.messages[0].properties).toEqual(PROPS);
  });

  test("shared frames: equal filters with and without the option are separate groups", async () => {
    const world = new World();
    const readers = [world.client(), world.client(), world.client(), world.client()];
    for (const [i, reader] of readers.entries()) world.subscribe(reader, 7, i % 2 === 0);
    await world.settle();
    const publisher = world.client();
    world.send(publisher, { kind: "publish", requestId: 1, messages });
    await world.settle();
    expect(world.broker.stats().messagesDeliveredShared).toBe(12);
    for (const [i, reader] of readers.entries())
      expect(reader.got.get(7)).toEqual(i % 2 === 0 ? withProperties : without);
  });

  test("catch-up from the tip and from the store keeps them", async () => {
    for (const tipBytes of [64 * 1024, 1024]) {
      const world = new World(tipBytes);
      const publisher = world.client();
      // Enough messages that a 1 KiB tip no longer holds the first ones: those come from the store.
      for (let i = 0; i < 20; i++)
        world.send(publisher, { kind: "publish", requestId: i, messages });
      await world.settle();
      const reader = world.client();
      world.subscribe(reader, 1, true, { kind: "earliest" });
      world.subscribe(reader, 2, false, { kind: "earliest" });
      await world.settle();
      const got = reader.got.get(1) ?? [];
      expect(got.length).toBe(60);
      for (let i = 0; i < 60; i++) expect(got[i]).toEqual({ ...withProperties[i % 3], seq: i + 1 });
      const v1 = reader.got.get(2) ?? [];
      expect(v1.map((m) => m.properties)).toEqual(new Array(60).fill(null));
      expect(v1.map((m) => m.payload)).toEqual(got.map((m) => m.payload));
    }
  });
});
