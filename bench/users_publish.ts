/**
 * What a users file costs the publish path: the broker in process (no sockets, a store that keeps
 * nothing, so the broker's own work is what is timed), PUBLISH frames replayed as fast as it
 * takes them, without users and with a user whose permissions are checked (allow `app/**`, deny
 * `app/secret/**`). Two shapes: each batch on one topic (as `aria bench`'s publish scenario), and
 * each message on its own topic (the worst case: one check per message). Runs alternate between
 * the two brokers; the rate is per second of this process's CPU time (on a shared machine wall
 * time mostly measures the neighbours); medians and the ratio are printed.
 *
 *   npx bun bench/users_publish.ts [--rounds 7] [--batches 400]
 */
import { parseArgs } from "node:util";
import { userFromRecord, Users } from "../src/auth/mod.ts";
import { Broker } from "../src/broker/broker.ts";
import type { BrokerStore } from "../src/broker/ports.ts";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { encodeFrame, FrameWriter, type OutgoingFrame } from "../src/protocol/mod.ts";
import { Tip } from "../src/tip/tip.ts";
import { TopicTable } from "../src/topic/topic_table.ts";

const { values } = parseArgs({
  options: { rounds: { type: "string" }, batches: { type: "string" } },
});
const ROUNDS = Number(values.rounds ?? 7);
const BATCHES = Number(values.batches ?? 400);
const BATCH_MESSAGES = 1024;
const TOPICS = 4096;
const PAYLOAD = new Uint8Array(64);

/** A store that keeps nothing: appends are dropped, commits resolve at once. */
class NullStore implements BrokerStore {
  nextSeq = 1;
  committedSeq = 0;
  newestTimeUs = 0;
  backlogged = false;
  append(seq: number): void {
    this.nextSeq = seq + 1;
  }
  async commit(): Promise<void> {
    this.committedSeq = this.nextSeq - 1;
  }
  whenCaughtUp(): Promise<void> {
    return Promise.resolve();
  }
  read() {
    return { nextBatch: async () => [] };
  }
}

function frameBytes(frames: OutgoingFrame[]): Uint8Array {
  const writer = new FrameWriter();
  for (const frame of frames) encodeFrame(writer, frame);
  return writer.bytes().slice();
}

async function brokerWith(withUsers: boolean) {
  const topics = new TopicTable();
  const tasks: (() => void)[] = [];
  const users = withUsers
    ? new Users(
        [
          userFromRecord({
            name: "bench",
            tokenHash: "fake",
            certSubject: null,
            publish: { allow: ["app/**"], deny: ["app/secret/**"] },
            subscribe: { allow: [], deny: [] },
            roles: [],
          }),
        ],
        { verify: async () => true, digest: (token) => token },
      )
    : undefined;
  const broker = new Broker({
    topics,
    tip: new Tip(topics, { capacityBytes: 64 * 1024 * 1024 }),
    store: new NullStore(),
    clock: { nowUs: () => performance.now() * 1000 },
    scheduler: { soon: (task) => tasks.push(task) },
    signIn: { users },
  });
  const id = broker.open({ write: (bytes) => bytes.length, close: () => {} });
  const token = withUsers ? "bench:x" : null;
  broker.receive(
    id,
    frameBytes([{ kind: "hello", version: PROTOCOL_VERSION, clientName: "b", authToken: token }]),
  );
  const drain = async () => {
    for (let i = 0; i < 100 && (tasks.length > 0 || i < 2); i++) {
      await new Promise((resolve) => setImmediate(resolve));
      for (const task of tasks.splice(0)) task();
    }
  };
  await drain();
  return { broker, id, drain };
}

function batches(shape: "one-topic" | "topic-per-message"): Uint8Array[] {
  return Array.from({ length: 64 }, (_, b) =>
    frameBytes([
      {
        kind: "publish",
        requestId: b + 1,
        messages: Array.from({ length: BATCH_MESSAGES }, (_, m) => ({
          topic:
            shape === "one-topic"
              ? `app/orders/t${b}`
              : `app/orders/p${(b * BATCH_MESSAGES + m) % 64}/t${(b * BATCH_MESSAGES + m) % TOPICS}`,
          payload: PAYLOAD,
        })),
      },
    ]),
  );
}

async function rate(
  world: Awaited<ReturnType<typeof brokerWith>>,
  frames: Uint8Array[],
): Promise<number> {
  const before = world.broker.stats().messagesPublished;
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < BATCHES; i++) {
    world.broker.receive(world.id, frames[i % frames.length]);
    if (i % 16 === 15) await world.drain();
  }
  await world.drain();
  const published = world.broker.stats().messagesPublished - before;
  if (published !== BATCHES * BATCH_MESSAGES) throw new Error(`published ${published}`);
  const cpu = process.cpuUsage(cpuBefore);
  return published / ((cpu.user + cpu.system) / 1e6);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const shape of ["one-topic", "topic-per-message"] as const) {
  const frames = batches(shape);
  const plain = await brokerWith(false);
  const checked = await brokerWith(true);
  await rate(plain, frames); // warm-up: topics interned, JIT
  await rate(checked, frames);
  const rates = { plain: [] as number[], checked: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    rates.plain.push(await rate(plain, frames));
    rates.checked.push(await rate(checked, frames));
  }
  const [p, c] = [median(rates.plain), median(rates.checked)];
  console.log(
    `${shape.padEnd(18)} without users ${(p / 1e6).toFixed(2)} M msg/s, with users ${(c / 1e6).toFixed(2)} M msg/s per CPU second, ratio ${(c / p).toFixed(3)} (medians of ${ROUNDS}, ${BATCHES} batches of ${BATCH_MESSAGES} x 64 B each)`,
  );
}
