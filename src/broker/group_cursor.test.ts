/**
 * Shared groups through the broker (memory store): SUBSCRIBE DURABLE | SHARED members of one
 * group share its filter's messages — each to one member, per-topic order, a closed member's
 * unacknowledged messages to another, the window, ACK rules, resume after a restart.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { GROUP_MEMBER_INFLIGHT_MAX, PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
} from "../protocol/mod.ts";
import { fcParams } from "../testing/fc_params.ts";
import { MemoryConsumerStore } from "../testing/memory_consumer_store.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";

const ENCODER = new TextEncoder();

/** One connection's view: DATA messages (seq, topic) in arrival order, and the other frames. */
class Client {
  readonly decoder = new FrameDecoder();
  readonly got: { seq: number; topic: string; properties: number[] }[] = [];
  readonly frames: { kind: string; [key: string]: unknown }[] = [];
  sessionId = 0;
  /** While true the connection takes nothing (a client that stopped reading). */
  blocked = false;
  /** Called for each message as it arrives. */
  onMessage: ((seq: number, topic: string) => void) | null = null;

  write(bytes: Uint8Array): number {
    if (this.blocked) return 0;
    this.decoder.push(bytes);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next())
      this.record(frame);
    return bytes.length;
  }

  private record(frame: Frame | { kind: "decode_error" }): void {
    if (frame.kind === "data") {
      while (frame.messages.next()) {
        const m = frame.messages;
        const properties = [
          ...m.frame.subarray(m.propertiesStart, m.propertiesStart + m.propertiesBytes),
        ];
        this.got.push({ seq: m.seq, topic: m.topic, properties });
        this.onMessage?.(m.seq, m.topic);
      }
      return;
    }
    this.frames.push({ ...(frame as Record<string, unknown>), kind: frame.kind });
  }

  seqs(): number[] {
    return this.got.map((m) => m.seq);
  }

  errors(): string[] {
    return this.frames
      .filter((f) => f.kind === "error" || f.kind === "decode_error")
      .map((f) => `${f.code}: ${f.reason}`);
  }
}

/** A broker over a memory store and consumer store that a test can restart. */
class World {
  readonly store = new MemoryStore();
  readonly consumerStore = new MemoryConsumerStore(false);
  broker!: Broker;
  private tasks: (() => void)[] = [];
  private timeUs = 1_000_000;

  constructor(private readonly sendQueueBytesMax?: number) {
    this.start();
  }

  start(): void {
    const topics = new TopicTable();
    this.broker = new Broker({
      topics,
      tip: new Tip(topics, { capacityBytes: 64 * 1024, poolBlocks: 64 }),
      store: this.store,
      clock: { nowUs: () => (this.timeUs += 10) },
      scheduler: { soon: (task) => this.tasks.push(task) },
      consumerStore: this.consumerStore,
      sendQueueBytesMax: this.sendQueueBytesMax,
    });
  }

  /** Moves the broker's clock on. */
  advanceUs(us: number): void {
    this.timeUs += us;
  }

  connect(): Client {
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

  join(client: Client, id = 1, name = "g", shared = true, properties = false): void {
    this.send(client, {
      kind: "subscribe",
      subscriptionId: id,
      start: { kind: "earliest" },
      filter: ["a/**"],
      durable: name,
      shared,
      properties,
    });
  }

  ack(client: Client, seq: number, id = 1): void {
    this.send(client, { kind: "ack", subscriptionId: id, seq });
  }

  /** Publishes `count` messages over topics a/t0 .. a/t(topics-1), round robin. */
  async publish(client: Client, count: number, topics: number, payloadBytes = 0): Promise<void> {
    for (let from = 0; from < count; from += 1000) {
      const messages = Array.from({ length: Math.min(1000, count - from) }, (_, i) => ({
        topic: `a/t${(from + i) % topics}`,
        payload: payloadBytes > 0 ? new Uint8Array(payloadBytes) : ENCODER.encode(`${from + i}`),
      }));
      this.send(client, { kind: "publish", requestId: 1, messages });
      await this.settle();
    }
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

/** Checks that per topic, each client got ascending seqs, and topics are split between clients. */
function expectTopicsOwned(clients: Client[]): void {
  const owner = new Map<string, Client>();
  for (const client of clients) {
    const last = new Map<string, number>();
    for (const { seq, topic } of client.got) {
      expect(seq).toBeGreaterThan(last.get(topic) ?? 0);
      last.set(topic, seq);
      expect(owner.get(topic) ?? client).toBe(client);
      owner.set(topic, client);
    }
  }
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("shared groups", () => {
  test("three members: each message to exactly one, per-topic order, every message", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 30, 12); // before the group: read from the tip
    const members = [world.connect(), world.connect(), world.connect()];
    for (const member of members) world.join(member);
    await world.settle();
    await world.publish(publisher, 90, 12); // live
    const all = members.flatMap((m) => m.seqs()).sort((a, b) => a - b);
    expect(all).toEqual(range(1, 120));
    for (const member of members) {
      expect(member.errors()).toEqual([]);
      expect(member.got.length).toBeGreaterThan(0);
      expect(member.frames.find((f) => f.kind === "subscribed")).toBeDefined();
    }
    expectTopicsOwned(members);
    // Metrics: a member is as far behind as the group's cursor (here: at the end).
    const lags = world.broker.largestLags(10).filter((lag) => lag.filter === "a/**");
    expect(lags.map((lag) => lag.seqsBehind)).toEqual([0, 0, 0]);
    expect(world.broker.consumerList()).toMatchObject([
      { name: "g", shared: true, members: 3, filter: ["a/**"] },
    ]);
  });

  test("a closed member's unacknowledged messages go to another, in order", async () => {
    const world = new World();
    const publisher = world.connect();
    const one = world.connect();
    const two = world.connect();
    world.join(one);
    world.join(two);
    await world.settle();
    await world.publish(publisher, 40, 8);
    const oneSeqs = one.seqs();
    expect(oneSeqs.length).toBeGreaterThan(0);
    world.ack(one, oneSeqs[4]!); // acknowledges its first five
    await world.settle();
    world.close(one);
    await world.settle();
    const moved = oneSeqs.slice(5);
    // Two got the rest of one's messages, each topic's in seq order.
    const twoSeqs = two.seqs();
    for (const seq of moved) expect(twoSeqs).toContain(seq);
    expect([...oneSeqs.slice(0, 5), ...twoSeqs].sort((a, b) => a - b)).toEqual(range(1, 40));
    const last = new Map<string, number>();
    const afterClose = two.got.slice(two.got.length - moved.length);
    for (const { seq, topic } of afterClose) {
      expect(seq).toBeGreaterThan(last.get(topic) ?? 0);
      last.set(topic, seq);
    }
    expect(two.errors()).toEqual([]);
    world.ack(two, twoSeqs.at(-1)!);
    await world.settle();
    // Two acknowledged everything it holds; the position is past it all.
    expect(world.broker.consumerList()[0]).toMatchObject({ nextSeq: 41, members: 1 });
  });

  test("the group resumes after a restart at its oldest unacknowledged message", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 20, 1); // one topic: one member gets it all, in order
    const member = world.connect();
    world.join(member);
    await world.settle();
    expect(member.seqs()).toEqual(range(1, 20));
    world.ack(member, 12);
    await world.settle();
    world.start();
    const again = [world.connect(), world.connect()];
    for (const m of again) world.join(m);
    await world.settle();
    expect(again.flatMap((m) => m.seqs()).sort((a, b) => a - b)).toEqual(range(13, 20));
    expect(world.broker.consumerList()[0]).toMatchObject({ nextSeq: 13, members: 2 });
  });

  test("ACK above what the member was given is refused; shared vs not shared mismatch", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 3, 1);
    const member = world.connect();
    world.join(member);
    await world.settle();
    world.ack(member, 9);
    await world.settle();
    expect(member.errors()).toEqual([
      "ARIA_ERR_MALFORMED_FRAME: ACK of subscription 1: seq 9 was not delivered to this subscription",
    ]);
    const plain = world.connect();
    world.join(plain, 1, "g", false);
    await world.settle();
    expect(plain.errors()[0]).toStartWith("ARIA_ERR_CONSUMER_MISMATCH");
  });

  test("a member holds at most its window; ACKs let the rest through", async () => {
    const world = new World();
    const publisher = world.connect();
    const member = world.connect();
    world.join(member);
    await world.settle();
    const count = GROUP_MEMBER_INFLIGHT_MAX + 500;
    await world.publish(publisher, count, 1);
    expect(member.got.length).toBe(GROUP_MEMBER_INFLIGHT_MAX);
    world.ack(member, member.seqs().at(-1)!);
    await world.settle();
    expect(member.seqs()).toEqual(range(1, count));
  });

  test("a member whose client stops reading gets more once its connection drains", async () => {
    const world = new World();
    const publisher = world.connect();
    const member = world.connect();
    world.join(member);
    await world.settle();
    member.blocked = true;
    await world.publish(publisher, 300, 1, 1024);
    expect(member.got.length).toBe(0);
    member.blocked = false;
    for (let round = 0; round < 20 && member.got.length < 300; round++) {
      world.broker.writable(member.sessionId);
      await world.settle();
      if (member.got.length > 0) world.ack(member, member.seqs().at(-1)!);
      await world.settle();
    }
    expect(member.seqs()).toEqual(range(1, 300));
  });

  test("the cursor's disk read fails: every member gets STORAGE_FAILED; counts stay right", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 1500, 3, 100); // more than the tip holds: earliest is on disk
    world.store.read = () => ({ nextBatch: () => Promise.reject(new Error("disk gone")) });
    const members = [world.connect(), world.connect()];
    for (const member of members) world.join(member);
    await world.settle();
    for (const member of members)
      expect(member.errors()).toEqual([
        "ARIA_ERR_STORAGE_FAILED: reading subscription 1 from disk failed: disk gone",
      ]);
    expect(world.broker.consumerList()).toMatchObject([{ name: "g", members: 0 }]);
    for (const member of members) world.close(member);
    await world.settle();
  });

  test("a member with option PROPERTIES gets each message's properties; one without, none", async () => {
    const world = new World();
    const publisher = world.connect();
    world.send(publisher, {
      kind: "publish",
      requestId: 1,
      messages: [
        { topic: "a/x", payload: ENCODER.encode("1"), properties: new Uint8Array([1, 2, 3]) },
        { topic: "a/x", payload: ENCODER.encode("2") },
      ],
    });
    await world.settle();
    const withProperties = world.connect();
    world.join(withProperties, 1, "p", true, true);
    await world.settle();
    expect(withProperties.got).toEqual([
      { seq: 1, topic: "a/x", properties: [1, 2, 3] },
      { seq: 2, topic: "a/x", properties: [] },
    ]);
    world.close(withProperties);
    await world.settle();
    const without = world.connect();
    world.join(without, 1, "p");
    await world.settle();
    expect(without.got.map((m) => m.properties)).toEqual([[], []]);
    expect(without.errors()).toEqual([]);
  });

  test("the last member leaving stores what is unacknowledged: only that comes again, also after a shutdown", async () => {
    const world = new World();
    const publisher = world.connect();
    const [a, b] = [world.connect(), world.connect()];
    world.join(a);
    world.join(b);
    await world.settle();
    await world.publish(publisher, 40, 8);
    world.ack(a, a.seqs().at(-1)!); // a acknowledges all it got, b nothing
    await world.settle();
    const unacked = b.seqs().sort((x, y) => x - y);
    expect(unacked[0]).toBeLessThan(a.seqs().at(-1)!); // some of a's acked seqs are above it
    world.close(a);
    world.close(b);
    await world.settle();
    expect(world.consumerStore.load()[0]).toMatchObject({
      nextSeq: unacked[0],
      group: { readSeq: 41, unackedSeqs: unacked },
    });
    const c = world.connect();
    world.join(c);
    await world.settle();
    expect(c.seqs().sort((x, y) => x - y)).toEqual(unacked);
    // c acknowledges half of them; the server shuts down; after it only the rest comes.
    const half = c.seqs()[Math.floor(c.seqs().length / 2)]!;
    world.ack(c, half);
    await world.settle();
    const rest = c.seqs().slice(c.seqs().indexOf(half) + 1);
    await world.broker.shutdown();
    world.start();
    const d = world.connect();
    world.join(d);
    await world.settle();
    expect(d.seqs().sort((x, y) => x - y)).toEqual(rest.sort((x, y) => x - y));
  });

  test("after a crash only what was unacknowledged (or acknowledged within the write interval) comes again", async () => {
    const world = new World();
    const publisher = world.connect();
    const [a, b] = [world.connect(), world.connect()];
    world.join(a);
    world.join(b);
    await world.settle();
    await world.publish(publisher, 40, 8);
    world.advanceUs(1_000_000); // a write interval has passed: the next ACK stores it all
    world.ack(a, a.seqs().at(-1)!); // a acknowledges all it got, b nothing
    await world.settle();
    const unacked = b.seqs().sort((x, y) => x - y);
    expect(unacked[0]).toBeLessThan(a.seqs().at(-1)!); // some of a's acked seqs are above it
    // Within the interval b acknowledges its first: the stored list keeps the rest.
    world.ack(b, b.seqs()[0]!);
    await world.settle();
    unacked.splice(unacked.indexOf(b.seqs()[0]!), 1);
    // kill -9: no member leaves, no shutdown; a new broker on what was stored.
    world.start();
    const c = world.connect();
    world.join(c);
    await world.settle();
    expect(c.seqs().sort((x, y) => x - y)).toEqual(unacked);
  });

  test("a stored read position past the visible end (seqs a crash lost) is cut back to it", async () => {
    const world = new World();
    const publisher = world.connect();
    await world.publish(publisher, 10, 2);
    // As if seqs up to 49 had been read before a crash that lost 11..49 (fsync not always).
    world.consumerStore.save({
      name: "g",
      filter: ["a/**"],
      shared: true,
      nextSeq: 3,
      lastActiveUs: 1,
      group: { readSeq: 50, unackedSeqs: [3, 7] },
    });
    world.start();
    const again = world.connect();
    await world.publish(again, 5, 2); // seqs 11..15 again, new messages
    const member = world.connect();
    world.join(member);
    await world.settle();
    expect(member.seqs().sort((x, y) => x - y)).toEqual([3, 7, ...range(11, 15)]);
  });

  test("the last member leaving keeps the position; the next member starts there", async () => {
    const world = new World();
    const publisher = world.connect();
    const member = world.connect();
    world.join(member);
    await world.settle();
    await world.publish(publisher, 10, 2);
    world.ack(member, member.seqs()[3]!);
    world.close(member);
    await world.settle();
    const next = world.connect();
    world.join(next);
    await world.settle();
    expect(next.seqs()).toEqual(range(5, 10));
  });
});

// ---- Property: random members, publishes, ACKs, stalls and restarts through the broker ---------

type GroupOp =
  | { kind: "publish"; count: number; topic: number }
  | { kind: "join" }
  | { kind: "leave"; pick: number }
  | { kind: "ack"; pick: number; index: number }
  | { kind: "block"; pick: number; blocked: boolean }
  | { kind: "restart" };

const groupOp: fc.Arbitrary<GroupOp> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("publish" as const),
      count: fc.integer({ min: 1, max: 6 }),
      topic: fc.nat(5),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("join" as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("leave" as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("ack" as const), pick: fc.nat(), index: fc.nat() }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("block" as const),
      pick: fc.nat(),
      blocked: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restart" as const) }) },
);

/**
 * Runs `ops` against a broker and a model: each delivery goes to a current member, never a
 * message acknowledged since the group last started, never one held by another member, and in
 * its topic's order (every older message of its topic acknowledged or held by the same member);
 * at the end a member that acknowledges everything gets every message published.
 */
async function runGroup(ops: GroupOp[]): Promise<void> {
  const world = new World(600); // a member backs up after a few messages
  let publisher = world.connect();
  const topicOf = new Map<number, string>(); // seq -> topic, in publish order
  let members: Client[] = [];
  const held = new Map<Client, number[]>(); // what each member holds unacknowledged, in order
  const holder = new Map<number, Client>();
  let acked = new Set<number>(); // acknowledged since the group (re)started
  const everAcked = new Set<number>();

  const watch = (client: Client): void => {
    held.set(client, []);
    client.onMessage = (seq, topic) => {
      expect(members).toContain(client);
      expect(topicOf.get(seq)).toBe(topic);
      expect(acked.has(seq)).toBe(false);
      expect(holder.has(seq)).toBe(false);
      for (const [earlier, earlierTopic] of topicOf) {
        if (earlier >= seq) break;
        if (earlierTopic === topic && !acked.has(earlier)) expect(holder.get(earlier)).toBe(client);
      }
      held.get(client)!.push(seq);
      holder.set(seq, client);
    };
  };
  /**
   * The group (re)starts from its stored record: below its read position what it lists as
   * unacknowledged comes again; without the list, everything from its position may.
   */
  const regroup = (): void => {
    const record = world.consumerStore.load()[0];
    const unacked = new Set(record?.group?.unackedSeqs ?? []);
    const below = record?.group?.readSeq ?? record?.nextSeq ?? 0;
    acked = new Set([...acked].filter((seq) => seq < below && !unacked.has(seq)));
  };
  /** The model lets go of what `client` held (before the server gives it to others). */
  const drop = (client: Client): void => {
    for (const seq of held.get(client) ?? []) holder.delete(seq);
    held.delete(client);
    members = members.filter((m) => m !== client);
  };
  for (const op of ops) {
    switch (op.kind) {
      case "publish": {
        const nextSeq = topicOf.size + 1;
        for (let i = 0; i < op.count; i++) topicOf.set(nextSeq + i, `a/t${op.topic}`);
        const messages = Array.from({ length: op.count }, () => ({
          topic: `a/t${op.topic}`,
          payload: new Uint8Array(60),
        }));
        world.send(publisher, { kind: "publish", requestId: 1, messages });
        break;
      }
      case "join": {
        const client = world.connect();
        members.push(client);
        watch(client);
        world.join(client);
        break;
      }
      case "leave": {
        if (members.length === 0) break;
        const client = members[op.pick % members.length]!;
        drop(client);
        world.close(client);
        if (members.length === 0) regroup(); // its record is written as the last one leaves
        break;
      }
      case "ack": {
        if (members.length === 0) break;
        const client = members[op.pick % members.length]!;
        const list = held.get(client)!;
        if (list.length === 0) break;
        const count = (op.index % list.length) + 1;
        const seq = list[count - 1]!;
        for (const s of list.splice(0, count)) {
          holder.delete(s);
          acked.add(s);
          everAcked.add(s);
        }
        world.ack(client, seq);
        break;
      }
      case "block": {
        if (members.length === 0) break;
        const client = members[op.pick % members.length]!;
        client.blocked = op.blocked;
        if (!op.blocked) world.broker.writable(client.sessionId);
        break;
      }
      case "restart": {
        for (const client of [...members]) drop(client);
        regroup(); // a crash: what the last ACK stored
        world.start();
        publisher = world.connect();
        break;
      }
    }
    await world.settle();
    for (const client of members) expect(client.errors()).toEqual([]);
  }

  // Liveness: a reading member that acknowledges all it holds gets every message.
  if (members.length === 0) {
    const client = world.connect();
    members.push(client);
    watch(client);
    world.join(client);
  }
  for (const client of members) {
    client.blocked = false;
    world.broker.writable(client.sessionId);
  }
  for (let round = 0; round < 200 && everAcked.size < topicOf.size; round++) {
    await world.settle();
    for (const client of members) {
      const list = held.get(client)!;
      if (list.length === 0) continue;
      const seq = list.at(-1)!;
      for (const s of list.splice(0)) {
        holder.delete(s);
        acked.add(s);
        everAcked.add(s);
      }
      world.ack(client, seq);
    }
    await world.settle();
  }
  expect(topicOf.size - everAcked.size).toBe(0);
  for (const client of members) expect(client.errors()).toEqual([]);
  expect(world.broker.consumerList()[0]?.nextSeq ?? 1).toBe(topicOf.size + 1);
}

describe("shared groups property", () => {
  test("random members, publishes, ACKs, stalls and restarts: every rule, every message", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(groupOp, { maxLength: 50, size: "max" }), runGroup),
      fcParams({ runs: 40 }),
    );
  }, 60_000);
});
