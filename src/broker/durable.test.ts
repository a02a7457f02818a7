/**
 * Durable consumers through the broker (memory store): resume after the acknowledged position
 * across reconnects and restarts, exclusivity, filter mismatch, ACK rules, retention; and a
 * property: any sequence of deliveries, acknowledgements, reconnects and restarts delivers every
 * message at least once, never skips one, and redelivers only what was not acknowledged.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
  type StartPosition,
} from "../protocol/mod.ts";
import { fcParams } from "../testing/fc_params.ts";
import { MemoryConsumerStore } from "../testing/memory_consumer_store.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { FailureThrottle, userFromRecord, Users } from "../auth/mod.ts";
import { Broker } from "./broker.ts";

const ENCODER = new TextEncoder();

/** One connection's view: seqs of DATA per subscription, and the other frames. */
class Client {
  readonly decoder = new FrameDecoder();
  readonly seqs: number[] = [];
  readonly frames: { kind: string; [key: string]: unknown }[] = [];
  sessionId = 0;
  closed = false;

  write(bytes: Uint8Array): number {
    this.decoder.push(bytes);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next())
      this.record(frame);
    return bytes.length;
  }

  private record(frame: Frame | { kind: "decode_error" }): void {
    if (frame.kind === "data") {
      while (frame.messages.next()) this.seqs.push(frame.messages.seq);
      return;
    }
    this.frames.push({ ...(frame as Record<string, unknown>), kind: frame.kind });
  }

  errors(): string[] {
    return this.frames.filter((f) => f.kind === "error").map((f) => `${f.code}: ${f.reason}`);
  }
}

/** A broker over a memory store and consumer store that a test can restart. */
class World {
  readonly store = new MemoryStore();
  readonly consumerStore: MemoryConsumerStore;
  broker!: Broker;
  private tasks: (() => void)[] = [];
  private timeUs = 1_000_000;

  constructor(options: { bufferedConsumers?: boolean; users?: Users } = {}) {
    this.consumerStore = new MemoryConsumerStore(options.bufferedConsumers === true);
    this.users = options.users;
    this.start();
  }
  private readonly users: Users | undefined;

  /** A new broker over the same stores (a restart; the tip starts empty). */
  start(): void {
    const topics = new TopicTable();
    this.broker = new Broker({
      topics,
      tip: new Tip(topics, { capacityBytes: 2048, poolBlocks: 16 }),
      store: this.store,
      clock: { nowUs: () => (this.timeUs += 10) },
      scheduler: { soon: (task) => this.tasks.push(task) },
      consumerStore: this.consumerStore,
      catchUpSliceBytes: 1024,
      signIn:
        this.users === undefined
          ? undefined
          : { users: this.users, throttle: new FailureThrottle(), scheduleAfter: () => {} },
    });
  }

  connect(token: string | null = null): Client {
    const client = new Client();
    client.sessionId = this.broker.open({
      write: (bytes) => client.write(bytes),
      close: () => {
        client.closed = true;
      },
    });
    this.send(client, {
      kind: "hello",
      version: PROTOCOL_VERSION,
      clientName: "t",
      authToken: token,
    });
    return client;
  }

  send(client: Client, frame: OutgoingFrame): void {
    const writer = new FrameWriter();
    encodeFrame(writer, frame);
    this.broker.receive(client.sessionId, writer.bytes().slice());
  }

  subscribe(client: Client, id: number, name: string, start: StartPosition = { kind: "earliest" }) {
    this.send(client, {
      kind: "subscribe",
      subscriptionId: id,
      start,
      filter: ["a/**"],
      durable: name,
    });
  }

  async publish(client: Client, count: number, topic = "a/b"): Promise<void> {
    const messages = Array.from({ length: count }, (_, i) => ({
      topic,
      payload: ENCODER.encode(`${i}`),
    }));
    this.send(client, { kind: "publish", requestId: 1, messages });
    await this.settle();
  }

  close(client: Client): void {
    this.broker.closed(client.sessionId);
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

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("durable consumers", () => {
  test("resume after the acknowledged position: reconnect and restart", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 5);
    const first = world.connect();
    world.subscribe(first, 1, "c");
    await world.settle();
    expect(first.seqs).toEqual(range(1, 5));
    world.send(first, { kind: "ack", subscriptionId: 1, seq: 3 });
    world.close(first);
    await world.publish(publisher, 2);
    // The start kind applies only when the consumer is new: "live" resumes at the position.
    const second = world.connect();
    world.subscribe(second, 1, "c", { kind: "live" });
    await world.settle();
    expect(second.frames.find((f) => f.kind === "subscribed")?.firstSeq).toBe(4);
    expect(second.seqs).toEqual(range(4, 7));
    world.send(second, { kind: "ack", subscriptionId: 1, seq: 6 });
    await world.settle();
    world.close(second);
    world.start();
    const third = world.connect();
    world.subscribe(third, 1, "c");
    await world.settle();
    expect(third.seqs).toEqual([7]);
    expect(third.errors()).toEqual([]);
    expect(world.broker.consumerList()).toMatchObject([
      { name: "c", ackedSeq: 6, nextSeq: 7, members: 1, filter: ["a/**"], shared: false },
    ]);
  });

  test("a new consumer's position is its start, before any ACK (live: nothing published before)", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 3);
    const first = world.connect();
    world.subscribe(first, 1, "c", { kind: "live" });
    await world.settle();
    world.close(first);
    await world.publish(publisher, 2);
    const second = world.connect();
    world.subscribe(second, 1, "c", { kind: "earliest" });
    await world.settle();
    expect(second.seqs).toEqual([4, 5]);
  });

  test("busy, mismatch, ACK rules, unsubscribe keeps the position", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 4);
    const one = world.connect();
    world.subscribe(one, 1, "c");
    await world.settle();
    const two = world.connect();
    world.subscribe(two, 9, "c");
    world.send(two, {
      kind: "subscribe",
      subscriptionId: 8,
      start: { kind: "earliest" },
      filter: ["b"],
      durable: "c",
    });
    // A plain subscription may not ACK; an ACK past what was delivered is refused.
    world.send(two, {
      kind: "subscribe",
      subscriptionId: 7,
      start: { kind: "earliest" },
      filter: ["a/**"],
    });
    world.send(two, { kind: "ack", subscriptionId: 7, seq: 1 });
    world.send(one, { kind: "ack", subscriptionId: 1, seq: 5 });
    world.send(one, { kind: "ack", subscriptionId: 2, seq: 1 });
    await world.settle();
    expect(two.errors()).toEqual([
      'ARIA_ERR_CONSUMER_BUSY: durable consumer "c" already has a subscription open (one at a time)',
      'ARIA_ERR_CONSUMER_MISMATCH: durable consumer "c" has filter a/**, not b; remove it first (aria consumers rm c) or use another name',
      "ARIA_ERR_MALFORMED_FRAME: ACK for subscription 7, which is not durable (only DURABLE subscriptions acknowledge)",
    ]);
    expect(one.errors()).toEqual([
      "ARIA_ERR_MALFORMED_FRAME: ACK seq 5 of subscription 1 is above the last seq delivered to it (4); the position stays at 1",
      "ARIA_ERR_UNKNOWN_SUBSCRIPTION: ACK for subscription 2, which is not open on this connection",
    ]);
    expect(world.broker.removeConsumer("c")).toBe("busy");
    world.send(one, { kind: "ack", subscriptionId: 1, seq: 2 });
    world.send(one, { kind: "unsubscribe", subscriptionId: 1 });
    await world.settle();
    world.subscribe(two, 9, "c");
    await world.settle();
    expect(two.seqs.filter((seq) => seq <= 4)).toEqual([1, 2, 3, 4, 3, 4]);
    world.send(two, { kind: "unsubscribe", subscriptionId: 9 });
    await world.settle();
    expect(world.broker.removeConsumer("c")).toBe("removed");
    expect(world.broker.removeConsumer("c")).toBe("unknown");
    expect(world.consumerStore.load()).toEqual([]);
  });

  test("a consumer behind retention resumes at the oldest stored message", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 6);
    const first = world.connect();
    world.subscribe(first, 1, "c");
    await world.settle();
    world.send(first, { kind: "ack", subscriptionId: 1, seq: 1 });
    world.close(first);
    world.store.retainFrom(5);
    world.start();
    const second = world.connect();
    world.subscribe(second, 1, "c");
    await world.settle();
    expect(second.seqs).toEqual([5, 6]);
  });

  test("permissions apply as for SUBSCRIBE: a refused filter creates no consumer", async () => {
    const reader = userFromRecord({
      name: "reader",
      tokenHash: "fake$reader-secret",
      certSubject: null,
      publish: { allow: ["**"], deny: [] },
      subscribe: { allow: ["a/x/**"], deny: [] },
      roles: [],
    });
    const users = new Users([reader], {
      verify: async (secret, stored) => stored === `fake$${secret}`,
      digest: (token) => `digest:${token}`,
    });
    const world = new World({ users });
    const client = world.connect("reader:reader-secret");
    await world.settle();
    world.subscribe(client, 1, "c");
    await world.settle();
    expect(client.errors()).toEqual([
      'ARIA_ERR_PERMISSION_DENIED: user "reader" may not subscribe to "a/**" (a filter is refused whole, never narrowed)',
    ]);
    expect(world.broker.consumerList()).toEqual([]);
    // Nothing was left attached under the name: an allowed filter makes it anew.
    world.send(client, {
      kind: "subscribe",
      subscriptionId: 2,
      start: { kind: "earliest" },
      filter: ["a/x/**"],
      durable: "c",
    });
    await world.settle();
    expect(client.errors().length).toBe(1);
    expect(world.broker.consumerList()).toMatchObject([{ name: "c", filter: ["a/x/**"] }]);
  });

  test("property: deliveries, ACKs, reconnects and crashes never skip a message; redelivery only past the stored position", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant("publish" as const),
              count: fc.integer({ min: 1, max: 5 }),
            }),
            fc.record({ op: fc.constant("ack" as const), back: fc.nat({ max: 4 }) }),
            fc.constant({ op: "reconnect" as const }),
            fc.constant({ op: "flush" as const }),
            fc.constant({ op: "crash" as const }),
          ),
          { minLength: 1, maxLength: 25 },
        ),
        async (ops) => {
          const world = new World({ bufferedConsumers: true });
          let publisher = world.connect();
          let client = world.connect();
          world.subscribe(client, 1, "c");
          const received = new Set<number>();
          let published = 0;
          let acked = 0;
          let resumeAt = 1;
          const check = () => {
            // No gap: every seq received forms, with those before, a prefix of the published ones.
            const seqs = client.seqs;
            for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe(seqs[i - 1] + 1);
            // Resumed exactly after the stored position: no duplicate beyond the unacknowledged.
            if (seqs.length > 0) expect(seqs[0]).toBe(resumeAt);
            for (const seq of seqs) received.add(seq);
          };
          for (const step of ops) {
            if (step.op === "publish") {
              await world.publish(publisher, step.count);
              published += step.count;
            } else if (step.op === "ack") {
              await world.settle();
              const last = client.seqs[client.seqs.length - 1] ?? 0;
              const seq = Math.max(0, last - step.back);
              if (seq > 0) {
                world.send(client, { kind: "ack", subscriptionId: 1, seq });
                acked = Math.max(acked, seq);
              }
            } else if (step.op === "flush") {
              world.consumerStore.flush();
            } else {
              await world.settle();
              check();
              world.close(client);
              if (step.op === "crash") {
                world.close(publisher);
                world.consumerStore.crash();
                const stored = world.consumerStore.load()[0];
                // After a crash the resume point is the last flushed one: at most the ACKed one.
                acked = stored === undefined ? 0 : stored.nextSeq - 1;
                world.start();
                publisher = world.connect();
              }
              resumeAt = acked + 1;
              client = world.connect();
              world.subscribe(client, 1, "c");
            }
          }
          await world.settle();
          check();
          expect(client.errors()).toEqual([]);
          expect([...received].sort((a, b) => a - b)).toEqual(range(1, published));
        },
      ),
      fcParams({ runs: 60 }),
    );
  });
});

describe("durable consumers: owners and reserved names", () => {
  const everyone = (name: string) =>
    userFromRecord({
      name,
      tokenHash: `fake$${name}-secret`,
      certSubject: null,
      publish: { allow: ["**"], deny: [] },
      subscribe: { allow: ["**"], deny: [] },
      roles: [],
    });
  const users = () =>
    new Users([everyone("alice"), everyone("bob")], {
      verify: async (secret, stored) => stored === `fake$${secret}`,
      digest: (token) => `digest:${token}`,
    });

  test("a consumer belongs to the user who made it: another user's SUBSCRIBE is refused, also after a restart", async () => {
    const world = new World({ users: users() });
    const alice = world.connect("alice:alice-secret");
    await world.publish(alice, 2);
    world.subscribe(alice, 1, "c");
    await world.settle();
    world.close(alice);
    await world.settle();
    expect(world.broker.consumerList()).toMatchObject([{ name: "c", owner: "alice" }]);
    for (const restart of [false, true]) {
      if (restart) world.start();
      const bob = world.connect("bob:bob-secret");
      await world.settle();
      world.subscribe(bob, 1, "c");
      await world.settle();
      expect(bob.errors()).toEqual([
        'ARIA_ERR_PERMISSION_DENIED: durable consumer "c" belongs to another user; use another name',
      ]);
      expect(bob.seqs).toEqual([]);
      const again = world.connect("alice:alice-secret");
      await world.settle();
      world.subscribe(again, 1, "c");
      await world.settle();
      expect(again.errors()).toEqual([]);
      world.close(again);
      world.close(bob);
      await world.settle();
    }
  });

  test("the names the MQTT door makes (mqtt/…, $share/…) are refused to native clients", async () => {
    const world = new World();
    const client = world.connect();
    await world.settle();
    world.subscribe(client, 1, "mqtt/sensor.3f2a9c01b4d2/1a94c0e12f7b3");
    world.send(client, {
      kind: "subscribe",
      subscriptionId: 2,
      start: { kind: "earliest" },
      filter: ["a/**"],
      durable: "$share/g.1f2e3d4c5b6a/0a1b2c3d4e5f",
      shared: true,
    });
    await world.settle();
    expect(client.errors()).toEqual([
      "ARIA_ERR_PERMISSION_DENIED: durable consumer names starting mqtt/ or $share/ are the MQTT door's; use another name",
      "ARIA_ERR_PERMISSION_DENIED: durable consumer names starting mqtt/ or $share/ are the MQTT door's; use another name",
    ]);
    expect(world.broker.consumerList()).toEqual([]);
  });
});
