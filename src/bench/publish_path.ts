/**
 * publish_path: where the time of one published message goes, stage by stage, without sockets:
 * the client (publishBatch, frame encoding, ack handling) against a fake server that only
 * acknowledges; the server's frame decoder; the broker (decode, intern, tip append, ack) over a
 * store that keeps nothing; the tip append alone; the store's append + commit (journal record,
 * CRC, write) with and without segments closing (the sorter copying each record a second time);
 * and, for the delivery side, a client receiving DATA frames and iterating its subscription.
 * Each stage runs the same 64-byte messages in batches of PATH_BATCH and reports wall time and
 * CPU time (all threads of the process: the store's writes run on the file thread pool) per
 * message. The in-process publish scenario pays all of them on one JavaScript thread, plus the
 * kernel's loopback TCP.
 *
 * Not here: the store's disk (the caller's StoreFactory opens one), the clock and CPU counters
 * (BenchEnv).
 */
import { AriaClient } from "../client/client.ts";
import { Broker } from "../broker/broker.ts";
import type { BrokerStore } from "../broker/ports.ts";
import {
  encodeHello,
  encodePublishAck,
  encodeSubscribed,
  encodeWelcome,
  FrameDecoder,
  FrameWriter,
  serverLimits,
  TopicCache,
} from "../protocol/mod.ts";
import type { ClientSocket, DialHandlers } from "../client/mod.ts";
import type { Store } from "../store/mod.ts";
import { Tip } from "../tip/tip.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { median } from "./stats.ts";
import type { Row } from "./table.ts";

/** Messages per batch (one PUBLISH frame) in every stage. */
export const PATH_BATCH = 4096;
const PAYLOAD_BYTES = 64;
const TOPIC = "bench/path/t";
/** Bytes the kernel hands a socket's data callback at a time (what the decoder sees). */
const SOCKET_CHUNK_BYTES = 64 * 1024;

/**
 * Opens a real store on a fresh directory (fsync interval, native CRC) and removes it on close;
 * `sortNever` lifts every budget that closes segments (size, unsorted records, retained journals).
 */
export type StoreFactory = (options: {
  segmentBytesMax?: number;
  sortNever?: boolean;
}) => Promise<{ store: Store; close(): Promise<void> }>;

/** What the breakdown needs from outside. */
export interface PathEnv {
  nowMs(): number;
  /** CPU time of the whole process (user + system, all threads) in ms, or null. */
  cpuMs(): number | null;
  openStore: StoreFactory;
  progress(text: string): void;
}

interface Stage {
  name: string;
  /** Sets the stage up; returns one round (PATH_BATCH messages) and a cleanup. */
  make(): Promise<{ round(): unknown; close(): Promise<void> }>;
}

/** Runs every stage `repeat` times for `rounds` rounds each; one row per stage, medians. */
export async function publishPathBreakdown(
  env: PathEnv,
  options: { rounds: number; repeat: number; tipBytes: number },
): Promise<Row[]> {
  const rows: Row[] = [];
  for (const stage of stages(env, options.tipBytes)) {
    env.progress(`publish-path: ${stage.name}`);
    const { round, close } = await stage.make();
    try {
      for (let i = 0; i < Math.max(16, options.rounds >> 3); i++) await round();
      const wall: number[] = [];
      const cpu: number[] = [];
      for (let rep = 0; rep < options.repeat; rep++) {
        const wallStart = env.nowMs();
        const cpuStart = env.cpuMs();
        for (let i = 0; i < options.rounds; i++) await round();
        const cpuEnd = env.cpuMs();
        const messages = options.rounds * PATH_BATCH;
        wall.push(((env.nowMs() - wallStart) * 1e6) / messages);
        if (cpuStart !== null && cpuEnd !== null) cpu.push(((cpuEnd - cpuStart) * 1e6) / messages);
      }
      const cpuNs = cpu.length > 0 ? median(cpu) : Number.NaN;
      rows.push({
        stage: stage.name,
        wallNsPerMessage: median(wall),
        cpuNsPerMessage: cpuNs,
        messagesPerCpuSecond: 1e9 / cpuNs,
        runs: wall.length,
      });
    } finally {
      await close();
    }
  }
  return rows;
}

function stages(env: PathEnv, tipBytes: number): Stage[] {
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(0x61);
  const frame = publishFrame(payload);
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < frame.length; at += SOCKET_CHUNK_BYTES)
    chunks.push(frame.slice(at, at + SOCKET_CHUNK_BYTES));
  const noClose = async () => {};
  const storeStage = (
    name: string,
    options: { segmentBytesMax?: number; sortNever?: boolean },
  ): Stage => ({
    name,
    make: async () => {
      const { store, close } = await env.openStore(options);
      let seq = store.nextSeq;
      return {
        round: () => {
          for (let i = 0; i < PATH_BATCH; i++)
            store.append(seq++, 1_700_000_000_000_000, TOPIC, payload);
          return store.commit();
        },
        close,
      };
    },
  });
  return [
    {
      name: "client: publishBatch, encode, ack handling",
      make: async () => {
        const client = await AriaClient.connect("tcp://127.0.0.1:1", ackingDialer, {
          reconnect: false,
        });
        const batch = Array.from({ length: PATH_BATCH }, () => ({ topic: TOPIC, payload }));
        return { round: () => client.publishBatch(batch), close: () => client.close() };
      },
    },
    {
      name: "server: decode PUBLISH (64 KiB socket reads)",
      make: async () => {
        const decoder = new FrameDecoder({ topicCache: new TopicCache() });
        return {
          round: () => {
            for (const chunk of chunks) {
              decoder.push(chunk);
              for (let decoded = decoder.next(); decoded !== null; decoded = decoder.next()) {
                if (decoded.kind !== "publish")
                  throw new Error(`publish-path: decoded ${decoded.kind}`);
                const messages = decoded.messages;
                while (messages.next());
              }
            }
          },
          close: noClose,
        };
      },
    },
    {
      name: "server: tip append",
      make: async () => {
        const topics = new TopicTable();
        const tip = new Tip(topics, { capacityBytes: tipBytes });
        const topicId = topics.internValid(TOPIC);
        let seq = 1;
        return {
          round: () => {
            for (let i = 0; i < PATH_BATCH; i++)
              tip.append(topicId, seq++, 1_700_000_000_000_000, payload);
          },
          close: noClose,
        };
      },
    },
    {
      name: "server: broker (decode, intern, tip append, ack), store keeps nothing",
      make: async () => {
        const topics = new TopicTable();
        const broker = new Broker({
          topics,
          tip: new Tip(topics, { capacityBytes: tipBytes }),
          store: new NullStore(),
          clock: { nowUs: () => Math.floor(env.nowMs() * 1000) },
          scheduler: { soon: (task) => queueMicrotask(task) },
        });
        const session = broker.open({ write: (bytes) => bytes.length, close: () => {} });
        const hello = new FrameWriter();
        encodeHello(hello, { version: 1, clientName: "publish-path", authToken: null });
        broker.receive(session, hello.bytes().slice());
        return {
          round: async () => {
            for (const chunk of chunks) broker.receive(session, chunk);
            await null; // the null store commits on the next microtask; acks follow
          },
          close: noClose,
        };
      },
    },
    clientDeliveryStage(
      "client delivery: DATA decode, subscription queue, for await per message",
      payload,
      "messages",
    ),
    clientDeliveryStage(
      "client delivery: DATA decode, subscription queue, for await over batches()",
      payload,
      "batches",
    ),
    clientDeliveryStage(
      "client delivery: DATA decode, subscription queue, for await over frames()",
      payload,
      "frames",
    ),
    storeStage("store: append + commit (journal only, no segment closes)", { sortNever: true }),
    // Small segments, so a run closes many and the sorter's cost is spread evenly over it.
    storeStage("store: append + commit, 8 MiB segments closing (sorter copies each record again)", {
      segmentBytesMax: 8 * 1024 * 1024,
    }),
  ];
}

/** The client receiving DATA frames of PATH_BATCH messages, read one of the subscription's three ways. */
function clientDeliveryStage(
  name: string,
  payload: Uint8Array,
  way: "messages" | "batches" | "frames",
): Stage {
  return {
    name,
    make: async () => {
      let handlers: DialHandlers | null = null;
      const client = await AriaClient.connect(
        "tcp://127.0.0.1:1",
        (host, port, given) => {
          handlers = given;
          return ackingDialer(host, port, given);
        },
        { reconnect: false },
      );
      const subscription = client.subscribe("**");
      const control = new FrameWriter();
      encodeSubscribed(control, { subscriptionId: subscription.id, firstSeq: 1 });
      handlers!.data(control.bytes().slice());
      const data = dataFrame(subscription.id, payload);
      let received = 0;
      let target = 0;
      const round: { done: (() => void) | null } = { done: null };
      const consuming = (async () => {
        if (way === "batches") {
          for await (const batch of subscription.batches()) {
            received += batch.length;
            if (received === target) round.done?.();
          }
        } else if (way === "frames") {
          for await (const frame of subscription.frames()) {
            while (frame.next()) received++;
            if (received === target) round.done?.();
          }
        } else {
          for await (const _message of subscription) {
            if (++received === target) round.done?.();
          }
        }
      })();
      let nextSeq = 1;
      return {
        round: () => {
          nextSeq = data.renumber(nextSeq);
          target = received + PATH_BATCH;
          const done = new Promise<void>((resolve) => (round.done = resolve));
          handlers!.data(data.bytes);
          return done;
        },
        close: async () => {
          await client.close();
          await consuming;
        },
      };
    },
  };
}

function publishFrame(payload: Uint8Array): Uint8Array {
  const writer = new FrameWriter({ capacityBytes: 1 << 20 });
  writer.beginPublish(1);
  for (let i = 0; i < PATH_BATCH; i++) writer.addPublishMessageText(TOPIC, payload);
  writer.endPublish();
  return writer.bytes().slice();
}

/** A DATA frame of PATH_BATCH equal messages whose seqs `renumber` rewrites in place. */
function dataFrame(
  subscriptionId: number,
  payload: Uint8Array,
): { bytes: Uint8Array; renumber(firstSeq: number): number } {
  const writer = new FrameWriter({ capacityBytes: 1 << 20 });
  const topic = new TextEncoder().encode(TOPIC);
  writer.beginData(subscriptionId);
  for (let i = 0; i < PATH_BATCH; i++)
    writer.addDataMessage(i + 1, 1_700_000_000_000_000, topic, payload);
  writer.endData();
  const bytes = writer.bytes().slice();
  // DATA: 8-byte frame header, u32 subscription id, u32 count, then messages of equal size that
  // start with their u64 seq.
  const first = 16;
  const stride = (bytes.length - first) / PATH_BATCH;
  const view = new DataView(bytes.buffer);
  return {
    bytes,
    renumber: (firstSeq) => {
      for (let i = 0; i < PATH_BATCH; i++) {
        const seq = firstSeq + i;
        view.setUint32(first + i * stride, seq >>> 0, true);
        view.setUint32(first + i * stride + 4, Math.floor(seq / 2 ** 32), true);
      }
      return firstSeq + PATH_BATCH;
    },
  };
}

/** A BrokerStore that keeps nothing and commits at once: the broker's cost without storage. */
class NullStore implements BrokerStore {
  nextSeq = 1;
  committedSeq = 0;
  readonly newestTimeUs = 0;
  readonly backlogged = false;
  whenCaughtUp(): Promise<void> {
    return Promise.resolve();
  }
  append(seq: number): void {
    this.nextSeq = seq + 1;
  }
  commit(): Promise<void> {
    this.committedSeq = this.nextSeq - 1;
    return Promise.resolve();
  }
  read(): never {
    throw new Error("publish-path: the null store holds nothing to read");
  }
}

/**
 * A Dialer whose "server" answers HELLO with WELCOME and every PUBLISH frame with its ack, reading
 * only the frame headers: the client's cost without a real server.
 */
async function ackingDialer(
  _host: string,
  _port: number,
  handlers: DialHandlers,
): Promise<ClientSocket> {
  const welcome = new FrameWriter();
  encodeWelcome(welcome, { version: 1, limits: serverLimits(), nextSeq: 1 });
  const welcomeBytes = welcome.bytes().slice();
  const acks = new FrameWriter();
  let handshaken = false;
  let nextSeq = 1;
  return {
    write: (bytes) => {
      if (!handshaken) {
        handshaken = true;
        queueMicrotask(() => handlers.data(welcomeBytes));
        return bytes.length;
      }
      // PUBLISH: u32 frame bytes, u8 type, u8 flags, u16 reserved, u32 request id, u32 count, …
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      acks.reset();
      for (let at = 0; at < bytes.length; at += view.getUint32(at, true)) {
        const count = view.getUint32(at + 12, true);
        encodePublishAck(acks, {
          requestId: view.getUint32(at + 8, true),
          firstSeq: nextSeq,
          count,
        });
        nextSeq += count;
      }
      const reply = acks.bytes().slice();
      queueMicrotask(() => handlers.data(reply));
      return bytes.length;
    },
    end: () => {},
    pause: () => {},
    resume: () => {},
  };
}
