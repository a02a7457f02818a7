/**
 * Stalled subscribers cost the server a position, not a copy of the stream: many subscribers of
 * `**` whose sockets stopped taking bytes (a fake kernel buffer that fills and never drains)
 * while megabytes are published, with the production limits. Each stalled session's memory (its
 * queue chunks, writer buffer, decoder carry) stays within STALLED_SESSION_BYTES_MAX, and a
 * healthy subscriber beside them receives every message, in order.
 */
import { expect, test } from "bun:test";
import {
  CATCH_UP_READ_BATCH_BYTES,
  CONNECTION_BUFFERED_BYTES_MAX,
  DISK_READERS_UNSHOWN_MAX,
  PROTOCOL_VERSION,
} from "../constants.ts";
import { encodeFrame, FrameDecoder, FrameWriter, type OutgoingFrame } from "../protocol/mod.ts";
import { Store } from "../store/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";
import type { BrokerStore, Connection } from "./ports.ts";
import type { SubscriberSession } from "./subscription.ts";

/** The bound of the issue: what one stalled subscriber may cost beyond the kernel's buffers. */
const STALLED_SESSION_BYTES_MAX = 256 * 1024;
/** What the fake kernel takes from each stalled connection before it stops taking anything. */
const KERNEL_BYTES = 256 * 1024;
const STALLED = 20;
const PUBLISH_BYTES = 16 * 1024 * 1024;
const PAYLOAD_BYTES = 1024;
const BATCH_MESSAGES = 256;

function frameBytes(frame: OutgoingFrame): Uint8Array {
  const writer = new FrameWriter();
  encodeFrame(writer, frame);
  return writer.bytes().slice();
}

/**
 * A broker over a MemoryStore (or `store`) whose `soon` tasks run only in `settle()`: until no
 * task is queued and no promise pending. `onTurn` hears the end of each event-loop turn.
 */
function world(
  tip: { capacityBytes: number; poolBlocks?: number },
  options: {
    store?: BrokerStore;
    eventBytesMax?: number;
    diskReadersMax?: number;
    onTurn?: () => void;
  } = {},
) {
  const topics = new TopicTable();
  const tasks: (() => void)[] = [];
  let timeUs = 1_000_000;
  const broker = new Broker({
    topics,
    tip: new Tip(topics, tip),
    store: options.store ?? new MemoryStore(),
    clock: { nowUs: () => (timeUs += 10) },
    scheduler: { soon: (task) => tasks.push(task) },
    eventBytesMax: options.eventBytesMax,
    diskReadersMax: options.diskReadersMax,
  });
  const onTurn = options.onTurn ?? (() => {});
  const settle = async () => {
    for (let round = 0; round < 100_000; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      onTurn();
      if (tasks.length === 0) {
        await new Promise((resolve) => setImmediate(resolve));
        onTurn();
        if (tasks.length === 0) return;
      }
      for (const task of tasks.splice(0)) {
        task();
        onTurn();
      }
    }
    throw new Error("settle: work never ran out");
  };
  return { broker, settle };
}

/** Opens `connection` on `broker` and says HELLO as `name`; its id. */
function signIn(broker: Broker, connection: Connection, name: string): number {
  const id = broker.open(connection);
  broker.receive(
    id,
    frameBytes({ kind: "hello", version: PROTOCOL_VERSION, clientName: name, authToken: null }),
  );
  return id;
}

/** Subscribes connection `id` to `**` from `start` (subscription id 1). */
function subscribeAll(broker: Broker, id: number, start: "live" | "earliest"): void {
  broker.receive(
    id,
    frameBytes({
      kind: "subscribe",
      subscriptionId: 1,
      start: { kind: start },
      filter: Filter.of("**"),
    }),
  );
}

/** A publisher's connection: takes every byte. */
const TAKES_ALL: Connection = { write: (bytes) => bytes.length, close: () => {} };

test("stalled subscribers of ** hold a bounded amount of memory each while 16 MB is published; a healthy one gets everything", async () => {
  const { broker, settle } = world({ capacityBytes: 4 * 1024 * 1024 });
  const open = (connection: Connection) => {
    const id = signIn(broker, connection, "t");
    subscribeAll(broker, id, "live");
    return id;
  };

  // The healthy subscriber reads everything at once and checks order.
  const decoder = new FrameDecoder();
  let received = 0;
  let lastSeq = 0;
  let outOfOrder = 0;
  open({
    write: (bytes) => {
      decoder.push(bytes);
      for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
        if (frame.kind !== "data") continue;
        const messages = frame.messages;
        while (messages.next()) {
          if (messages.seq !== lastSeq + 1) outOfOrder++;
          lastSeq = messages.seq;
          received++;
        }
      }
      return bytes.length;
    },
    close: () => {},
  });
  const stalledIds: number[] = [];
  for (let i = 0; i < STALLED; i++) {
    let room = KERNEL_BYTES;
    stalledIds.push(
      open({
        write: (bytes) => {
          const taken = Math.min(room, bytes.length);
          room -= taken;
          return taken;
        },
        close: () => {},
      }),
    );
  }
  const publisher = signIn(broker, TAKES_ALL, "p");
  await settle();

  const payload = new Uint8Array(PAYLOAD_BYTES).fill(5);
  const messages = Array.from({ length: BATCH_MESSAGES }, (_, i) => ({
    topic: `t/p${i % 8}`,
    payload,
  }));
  const batches = PUBLISH_BYTES / PAYLOAD_BYTES / BATCH_MESSAGES;
  let heldMax = 0;
  for (let b = 0; b < batches; b++) {
    broker.receive(publisher, frameBytes({ kind: "publish", requestId: b + 1, messages }));
    await settle();
    const sessions = (broker as unknown as { sessions: Map<number, SubscriberSession> }).sessions;
    for (const id of stalledIds)
      heldMax = Math.max(heldMax, (sessions.get(id) as SubscriberSession).heldBytes);
  }
  expect(received).toBe(batches * BATCH_MESSAGES);
  expect(outOfOrder).toBe(0);
  expect(heldMax).toBeLessThanOrEqual(STALLED_SESSION_BYTES_MAX);
  // The queue's limit, the chunk it ends in and the writer's first 16 KiB: 160 KiB (208 KiB with
  // 64 KiB chunks, where the last chunk was mostly empty).
  expect(heldMax).toBeLessThanOrEqual(CONNECTION_BUFFERED_BYTES_MAX + 32 * 1024);
  expect(broker.stats().subscriptionsByPhase.stalled).toBe(STALLED);
});

test("one commit's fan-out to many subscribers is cut into turns of the event loop; each still gets every message once, in order", async () => {
  const EVENT_BYTES_MAX = 64 * 1024;
  let writtenThisTurn = 0;
  let writtenPerTurnMax = 0;
  const endTurn = () => {
    writtenPerTurnMax = Math.max(writtenPerTurnMax, writtenThisTurn);
    writtenThisTurn = 0;
  };
  const { broker, settle } = world(
    { capacityBytes: 8 * 1024 * 1024 },
    { eventBytesMax: EVENT_BYTES_MAX, onTurn: endTurn },
  );
  const SUBSCRIBERS = 20;
  const received: number[] = new Array(SUBSCRIBERS).fill(0);
  const problems: string[] = [];
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const decoder = new FrameDecoder();
    let lastSeq = 0;
    const id = signIn(
      broker,
      {
        write: (bytes) => {
          writtenThisTurn += bytes.length;
          decoder.push(bytes);
          for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
            if (frame.kind !== "data") continue;
            const messages = frame.messages;
            while (messages.next()) {
              if (messages.seq !== lastSeq + 1)
                problems.push(`${s}: ${messages.seq} after ${lastSeq}`);
              lastSeq = messages.seq;
              received[s]++;
            }
          }
          return bytes.length;
        },
        close: () => {},
      },
      "s",
    );
    subscribeAll(broker, id, "live");
  }
  const publisher = signIn(broker, TAKES_ALL, "p");
  await settle();
  writtenPerTurnMax = 0;
  // One PUBLISH of 512 KiB, one commit: 10 MiB of DATA for the 20 subscribers.
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(9);
  const messages = Array.from({ length: 512 }, (_, i) => ({ topic: `t/p${i % 8}`, payload }));
  broker.receive(publisher, frameBytes({ kind: "publish", requestId: 1, messages }));
  await settle();
  expect(problems).toEqual([]);
  expect(received).toEqual(new Array(SUBSCRIBERS).fill(512));
  // The budget, plus what one subscription's turn may add past it (a shared round, a slice).
  expect(writtenPerTurnMax).toBeLessThanOrEqual(EVENT_BYTES_MAX + 768 * 1024);
});

test("subscriptions reading from disk hold at most diskReadersMax readers at once; the rest wait with a position and all get everything", async () => {
  const store = new MemoryStore();
  // Readers wait at a gate until the test opens it, so every reader opened is held at once.
  let gateOpen = false;
  const opened = new Set<unknown>();
  const waiting: (() => void)[] = [];
  const read = store.read.bind(store);
  store.read = (filter: Filter, from: { seq: number } | { timeUs: number }) => {
    const inner = read(filter, from);
    const reader = {
      nextBatch: async () => {
        if (!gateOpen) await new Promise<void>((resolve) => waiting.push(resolve));
        return await inner.nextBatch();
      },
    };
    opened.add(reader);
    return reader;
  };
  const { broker, settle } = world(
    { capacityBytes: 2048, poolBlocks: 16 },
    { store, diskReadersMax: 2 },
  );
  const publisher = signIn(broker, TAKES_ALL, "p");
  const payload = new Uint8Array(100).fill(3);
  const MESSAGES = 60;
  broker.receive(
    publisher,
    frameBytes({
      kind: "publish",
      requestId: 1,
      messages: Array.from({ length: MESSAGES }, () => ({ topic: "a/b", payload })),
    }),
  );
  await settle();
  const SUBSCRIBERS = 10;
  const received: number[] = new Array(SUBSCRIBERS).fill(0);
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const decoder = new FrameDecoder();
    const id = signIn(
      broker,
      {
        write: (bytes) => {
          decoder.push(bytes);
          for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
            if (frame.kind !== "data") continue;
            while (frame.messages.next()) received[s]++;
          }
          return bytes.length;
        },
        close: () => {},
      },
      "s",
    );
    subscribeAll(broker, id, "earliest");
  }
  await settle();
  // Ten subscriptions in their disk phase, two readers.
  expect(broker.stats().subscriptionsByPhase.disk).toBe(SUBSCRIBERS);
  expect(opened.size).toBe(2);
  gateOpen = true;
  for (const resolve of waiting.splice(0)) resolve();
  await settle();
  expect(received).toEqual(new Array(SUBSCRIBERS).fill(MESSAGES));
});

test("a stalled subscriber catching up from disk reads (and holds) a slice's batch, not the store's 4 MiB and its read-ahead", async () => {
  // 8 MiB over 16 partitions, still in the journal (a reader's 16 lanes each read their
  // partition's records out of the same interleaved bytes), and an empty tip: subscribers start
  // on disk. What a borrowing reader reads is what it holds: its batch's payloads point into it.
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(4);
  const MESSAGES = 8192;
  for (let seq = 1; seq <= MESSAGES; seq++) {
    store.append(seq, seq, `bench/p${seq % 16}/t${seq % 64}`, payload, 0, PAYLOAD_BYTES);
    if (seq % 1024 === 0) await store.commit();
  }
  await store.commit();
  const { broker, settle } = world({ capacityBytes: 1024 * 1024 }, { store });
  const SUBSCRIBERS = 10;
  let taken = 0;
  for (let s = 0; s < SUBSCRIBERS; s++) {
    let room = KERNEL_BYTES;
    const id = signIn(
      broker,
      {
        write: (bytes) => {
          const count = Math.min(room, bytes.length);
          room -= count;
          taken += count;
          return count;
        },
        close: () => {},
      },
      "s",
    );
    subscribeAll(broker, id, "earliest");
  }
  const readBefore = store.stats().bytesRead;
  await settle();
  expect(broker.stats().subscriptionsByPhase.stalled).toBe(SUBSCRIBERS);
  expect(taken).toBe(SUBSCRIBERS * KERNEL_BYTES);
  // Measured: 11.0 MB each (16 lanes, 256 KiB chunks); with the store's defaults 83.9 MB.
  const readPerSubscriber = (store.stats().bytesRead - readBefore) / SUBSCRIBERS;
  expect(readPerSubscriber).toBeLessThanOrEqual(16 * 1024 * 1024);
  await store.close();
});

test("a client that has shown it reads takes a disk reader before those that have not, which hold at most DISK_READERS_UNSHOWN_MAX", async () => {
  const store = new MemoryStore();
  // Readers wait at a gate until the test opens it, so every reader opened is held at once.
  let gateOpen = false;
  const opened: string[] = [];
  const waiting: (() => void)[] = [];
  const read = store.read.bind(store);
  let nextReader = "";
  store.read = (filter: Filter, from: { seq: number } | { timeUs: number }) => {
    const inner = read(filter, from);
    opened.push(nextReader);
    return {
      nextBatch: async () => {
        if (!gateOpen) await new Promise<void>((resolve) => waiting.push(resolve));
        return await inner.nextBatch();
      },
    };
  };
  const { broker, settle } = world(
    { capacityBytes: 2048, poolBlocks: 16 },
    { store, diskReadersMax: 4 },
  );
  const publisher = signIn(broker, TAKES_ALL, "p");
  const payload = new Uint8Array(100).fill(3);
  const MESSAGES = 60;
  broker.receive(
    publisher,
    frameBytes({
      kind: "publish",
      requestId: 1,
      messages: Array.from({ length: MESSAGES }, () => ({ topic: "a/b", payload })),
    }),
  );
  await settle();
  const received = new Map<string, number>();
  const counting = (name: string, refuseFirst: boolean): Connection => {
    const decoder = new FrameDecoder();
    let refuse = refuseFirst;
    return {
      write: (bytes) => {
        if (refuse) {
          refuse = false;
          return 0;
        }
        decoder.push(bytes);
        for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
          if (frame.kind !== "data") continue;
          while (frame.messages.next()) received.set(name, (received.get(name) ?? 0) + 1);
        }
        return bytes.length;
      },
      close: () => {},
    };
  };
  // Eight subscribers whose sockets take bytes but that never had to drain: not shown yet.
  nextReader = "unshown";
  for (let s = 0; s < 8; s++)
    subscribeAll(broker, signIn(broker, counting(`u${s}`, false), "u"), "earliest");
  await settle();
  expect(opened).toEqual(["unshown", "unshown"]);
  // One whose socket refused its WELCOME, then drained it: its client reads.
  const reading = signIn(broker, counting("reader", true), "r");
  broker.writable(reading);
  nextReader = "reading";
  subscribeAll(broker, reading, "earliest");
  await settle();
  // It takes a free slot at once, though eight subscriptions waited before it.
  expect(opened).toEqual(["unshown", "unshown", "reading"]);
  expect(broker.stats().subscriptionsByPhase.disk).toBe(9);
  gateOpen = true;
  for (const resolve of waiting.splice(0)) resolve();
  await settle();
  expect([...received.values()]).toEqual(new Array(9).fill(MESSAGES));
});

test("a subscription left waiting for a disk reader holds its position, not a grown writer", async () => {
  const store = new MemoryStore();
  // Readers never return: the subscriptions that get one keep it, the rest wait.
  store.read = () => ({ nextBatch: () => new Promise(() => {}) });
  const { broker, settle } = world(
    { capacityBytes: 512 * 1024 },
    { store, diskReadersMax: 4, eventBytesMax: 64 * 1024 },
  );
  const SUBSCRIBERS = 10;
  const ids: number[] = [];
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const id = signIn(broker, TAKES_ALL, "s");
    subscribeAll(broker, id, "live");
    ids.push(id);
  }
  const publisher = signIn(broker, TAKES_ALL, "p");
  await settle();
  const sessions = (broker as unknown as { sessions: Map<number, SubscriberSession> }).sessions;
  const capacities = () => ids.map((id) => (sessions.get(id) as SubscriberSession).writer.capacity);
  // Live delivery of 256 KiB commits grows their writers (a socket write's worth and a frame).
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(6);
  const messages = Array.from({ length: 256 }, (_, i) => ({ topic: `t/p${i % 8}`, payload }));
  let requestId = 0;
  for (let i = 0; i < 2; i++) {
    broker.receive(publisher, frameBytes({ kind: "publish", requestId: ++requestId, messages }));
    await settle();
  }
  for (const capacity of capacities()) expect(capacity).toBeGreaterThan(64 * 1024);
  // 2 MiB at once: the ring moves past them all, and they go to the disk, where two get a reader.
  const frames = Array.from({ length: 8 }, () =>
    frameBytes({ kind: "publish", requestId: ++requestId, messages }),
  );
  const bytes = new Uint8Array(frames.reduce((sum, frame) => sum + frame.length, 0));
  frames.reduce((at, frame) => (bytes.set(frame, at), at + frame.length), 0);
  broker.receive(publisher, bytes);
  await settle();
  expect(broker.stats().subscriptionsByPhase.disk).toBe(SUBSCRIBERS);
  // The eight without a reader are back to the writer's first 16 KiB (128 KiB each before).
  const small = capacities().filter((capacity) => capacity <= 16 * 1024);
  expect(small.length).toBe(SUBSCRIBERS - DISK_READERS_UNSHOWN_MAX);
});

test("a client that has shown it reads catches up from disk with the store's batches and read-ahead; one that has not yet, with small ones until it does", async () => {
  const store = new MemoryStore();
  const opened: (number | "store's")[] = [];
  const read = store.read.bind(store);
  // Batches wait at a gate until the test opens it.
  let openGate = () => {};
  const gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  (store as { read: BrokerStore["read"] }).read = (filter, from, options) => {
    opened.push(options?.batchBytesMax ?? "store's");
    const inner = read(filter, from);
    return {
      nextBatch: async () => {
        await gate;
        return await inner.nextBatch();
      },
    };
  };
  const { broker, settle } = world({ capacityBytes: 2048, poolBlocks: 16 }, { store });
  const publisher = signIn(broker, TAKES_ALL, "p");
  const payload = new Uint8Array(100).fill(3);
  const MESSAGES = 200;
  broker.receive(
    publisher,
    frameBytes({
      kind: "publish",
      requestId: 1,
      messages: Array.from({ length: MESSAGES }, () => ({ topic: "a/b", payload })),
    }),
  );
  await settle();
  // A socket that refuses its first write and takes the rest once drained.
  const decoder = new FrameDecoder();
  let refuse = true;
  const seqs: number[] = [];
  const id = signIn(
    broker,
    {
      write: (bytes) => {
        if (refuse) return 0;
        decoder.push(bytes);
        for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
          if (frame.kind !== "data") continue;
          while (frame.messages.next()) seqs.push(frame.messages.seq);
        }
        return bytes.length;
      },
      close: () => {},
    },
    "s",
  );
  subscribeAll(broker, id, "earliest");
  await settle();
  // Not shown yet: a small reader.
  expect(opened).toEqual([CATCH_UP_READ_BATCH_BYTES]);
  refuse = false;
  broker.writable(id);
  openGate();
  await settle();
  // It drained a backlog: after the batch asked for, the reader is replaced by one of the
  // store's size at the subscription's position.
  expect(opened).toEqual([CATCH_UP_READ_BATCH_BYTES, "store's"]);
  expect(seqs).toEqual(Array.from({ length: MESSAGES }, (_, i) => i + 1));
});
