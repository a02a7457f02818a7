/**
 * Soak test (not part of CI): runs the compiled `dist/aria serve` under steady publishing and
 * fan-out for a while, with subscribers that stall, reconnect and replay, samples the server's
 * RSS, open files and block pool every second, and verifies every subscriber's stream at the end.
 * Passes (exit 0) when memory, files and the pool stay flat and every stream verifies.
 *
 *   bun scripts/soak.ts [--minutes 10] [--rate 5000] [--publishers 2] [--tip-bytes 64MiB] [--samples FILE]
 *
 * `--samples FILE` writes every per-second sample as one JSON line.
 *
 * Verification. Every publish carries "<publisher>:<counter>"; the acknowledged seq of each is
 * recorded, so for every seq the soak knows the topic and payload. A subscriber checks each
 * message as it arrives (seq increasing, topic matching its filter, payload as published) and at
 * the end the count of matching seqs between its first and last message must equal what it got:
 * no gap, no duplicate, no reordering, across stalls, reconnects and replays.
 */
import { parseArgs } from "node:util";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AriaClient, Message } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { Filter } from "../src/topic/filter.ts";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    rate: { type: "string", default: "5000" },
    publishers: { type: "string", default: "2" },
    "tip-bytes": { type: "string", default: "64MiB" },
    binary: { type: "string", default: new URL("../dist/aria", import.meta.url).pathname },
    samples: { type: "string" },
  },
});
const DURATION_MS = Number(values.minutes) * 60_000;
const RATE = Number(values.rate);
const PUBLISHERS = Number(values.publishers);
const TOPICS = [
  "soak/orders/created",
  "soak/orders/filled",
  "soak/prices/eur",
  "soak/prices/usd",
  "soak/audit",
  "ops/health/a",
  "ops/health/b",
];
const TOPIC_INDEX = new Map(TOPICS.map((t, i) => [t, i]));
const SEQS_MAX = Math.ceil((DURATION_MS / 1000) * RATE * 1.5) + 100_000;
/** Per seq: topic index + 1 (0 = not known yet), publisher, counter. */
const seqTopic = new Uint8Array(SEQS_MAX);
const seqPublisher = new Uint8Array(SEQS_MAX);
const seqCounter = new Uint32Array(SEQS_MAX);
let lastAckedSeq = 0;

// ---- server ---------------------------------------------------------------------------------

const dataDir = mkdtempSync(join(tmpdir(), "aria-soak-"));
const server = Bun.spawn(
  [
    values.binary,
    "serve",
    "--port",
    "0",
    "--admin-port",
    "0",
    "--data-dir",
    dataDir,
    "--tip-bytes",
    values["tip-bytes"],
    "--fsync",
    "interval",
  ],
  { stdout: "pipe", stderr: "inherit" },
);
const reader = server.stdout.getReader();
let banner = "";
while (banner.split("\n").length < 3) {
  const { value, done } = await reader.read();
  if (done) throw new Error("soak: server exited before printing its URLs");
  banner += new TextDecoder().decode(value);
}
const [tcpUrl, adminUrl] = banner.trim().split("\n");
console.error(
  `soak: server pid ${server.pid} at ${tcpUrl} / ${adminUrl}, data ${dataDir}; ${values.minutes} min at ${RATE} msg/s`,
);

// ---- publishers -----------------------------------------------------------------------------

let stopping = false;
/** Subscriptions open right now: closed when the soak stops, so their loops end. */
const open = new Set<{ close(): void }>();
const publisherLoops = Array.from({ length: PUBLISHERS }, async (_, id) => {
  const client = await connect(tcpUrl, { clientName: `soak-pub-${id}` });
  const perTick = Math.max(1, Math.round(RATE / PUBLISHERS / 100));
  let counter = 0;
  while (!stopping) {
    const started = performance.now();
    const batch: Promise<void>[] = [];
    for (let i = 0; i < perTick; i++) {
      const n = counter++;
      const topic = TOPICS[(n * 3 + id) % TOPICS.length];
      batch.push(
        client.publish(topic, `${id}:${n}`).then((seq) => {
          seqTopic[seq] = TOPIC_INDEX.get(topic)! + 1;
          seqPublisher[seq] = id;
          seqCounter[seq] = n;
          if (seq > lastAckedSeq) lastAckedSeq = seq;
        }),
      );
    }
    await Promise.all(batch);
    const wait = 10 - (performance.now() - started);
    if (wait > 0) await Bun.sleep(wait);
  }
  await client.close();
});

// ---- subscribers ----------------------------------------------------------------------------

type Behaviour = "steady" | "stall" | "reconnect" | "replay";

class Verifier {
  first = 0;
  last = 0;
  received = 0;
  errors: string[] = [];
  constructor(
    readonly name: string,
    readonly filter: Filter,
  ) {}

  check(message: Message): void {
    if (message.seq <= this.last) this.errors.push(`seq ${message.seq} after ${this.last}`);
    if (this.first === 0) this.first = message.seq;
    this.last = message.seq;
    this.received++;
    if (!this.filter.matches(message.topic))
      this.errors.push(`seq ${message.seq}: topic ${message.topic} does not match`);
    const text = new TextDecoder().decode(message.payload);
    const expectedTopic = seqTopic[message.seq];
    // The ack may not have reached the publisher yet; check the payload's own claim then.
    if (expectedTopic !== 0) {
      const expected = `${seqPublisher[message.seq]}:${seqCounter[message.seq]}`;
      if (TOPICS[expectedTopic - 1] !== message.topic || text !== expected)
        this.errors.push(
          `seq ${message.seq}: got ${message.topic} ${text}, published ${TOPICS[expectedTopic - 1]} ${expected}`,
        );
    }
    if (this.errors.length > 20) this.errors.length = 20;
  }

  /** At the end: every matching seq between first and last was received once. */
  verify(): string[] {
    let matching = 0;
    for (let seq = this.first; seq <= this.last && this.first > 0; seq++) {
      if (seqTopic[seq] === 0) {
        this.errors.push(`seq ${seq} was delivered range-wise but never acknowledged`);
        break;
      }
      if (this.filter.matches(TOPICS[seqTopic[seq] - 1])) matching++;
    }
    if (matching !== this.received)
      this.errors.push(
        `${this.received} messages received, ${matching} matching seqs in ${this.first}..${this.last}`,
      );
    return this.errors;
  }
}

const verifiers: Verifier[] = [];

async function subscriber(
  name: string,
  filterTexts: string[],
  behaviour: Behaviour,
): Promise<void> {
  const verifier = new Verifier(name, Filter.of(...filterTexts));
  verifiers.push(verifier);
  let client: AriaClient = await connect(tcpUrl, { clientName: name });
  const from = "earliest";
  let rounds = 0;
  while (!stopping) {
    const subscription = client.subscribe(filterTexts, {
      from: verifier.last > 0 ? verifier.last + 1 : from,
    });
    open.add(subscription);
    // Each round lasts a few seconds; a quiet stream must not keep it open past that.
    const timer = setTimeout(() => subscription.close(), 5_000 + (rounds++ % 5) * 3_000);
    for await (const message of subscription) {
      verifier.check(message);
      if (behaviour === "stall" && message.seq % 5_000 === 0) await Bun.sleep(3_000);
    }
    clearTimeout(timer);
    open.delete(subscription);
    if (stopping) break;
    if (behaviour === "reconnect") {
      await client.close();
      client = await connect(tcpUrl, { clientName: name });
    } else if (behaviour === "replay") {
      // A fresh replay from the oldest message: a new verifier for the new stream.
      await subscriberReplay(client, filterTexts, `${name}-replay-${rounds}`);
    }
  }
  // Drain to the live end so the verifier covers everything acknowledged.
  for await (const message of client.subscribe(filterTexts, {
    from: verifier.last > 0 ? verifier.last + 1 : "earliest",
    untilCaughtUp: true,
  }))
    verifier.check(message);
  await client.close();
}

async function subscriberReplay(
  client: AriaClient,
  filterTexts: string[],
  name: string,
): Promise<void> {
  const verifier = new Verifier(name, Filter.of(...filterTexts));
  verifiers.push(verifier);
  for await (const message of client.subscribe(filterTexts, {
    from: "earliest",
    untilCaughtUp: true,
  }))
    verifier.check(message);
}

const subscriberLoops = [
  subscriber("all-steady", ["**"], "steady"),
  subscriber("orders-stall", ["soak/orders/**"], "stall"),
  subscriber("prices-reconnect", ["soak/prices/**", "soak/audit"], "reconnect"),
  subscriber("ops-replay", ["ops/**"], "replay"),
  subscriber("exact-stall", ["soak/orders/filled"], "stall"),
  subscriber("all-reconnect", ["**"], "reconnect"),
];

// ---- sampling -------------------------------------------------------------------------------

interface Sample {
  second: number;
  rssMiB: number;
  fds: number;
  poolBlocksUsed: number;
  tipRecords: number;
  published: number;
  subscriptions: Record<string, number>;
}
const samples: Sample[] = [];
const started = performance.now();
const sampler = setInterval(async () => {
  try {
    const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
    const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    const fds = readdirSync(`/proc/${server.pid}/fd`).length;
    const stats = (await (await fetch(`${adminUrl}/api/stats`)).json()) as Record<
      string,
      Record<string, unknown>
    >;
    const tip = stats.tip as { poolBlocksUsed: number; records: number };
    const broker = stats.broker as {
      messagesPublished: number;
      subscriptionsByPhase: Record<string, number>;
    };
    samples.push({
      second: Math.round((performance.now() - started) / 1000),
      rssMiB: rssKiB / 1024,
      fds,
      poolBlocksUsed: tip.poolBlocksUsed,
      tipRecords: tip.records,
      published: broker.messagesPublished,
      subscriptions: broker.subscriptionsByPhase,
    });
    const s = samples[samples.length - 1];
    if (s.second % 30 === 0)
      console.error(
        `soak: t=${s.second}s rss=${s.rssMiB.toFixed(0)}MiB fds=${s.fds} pool=${s.poolBlocksUsed} published=${s.published} subs=${JSON.stringify(s.subscriptions)}`,
      );
  } catch (error) {
    console.error(`soak: sample failed: ${(error as Error).message}`);
  }
}, 1000);

await Bun.sleep(DURATION_MS);
stopping = true;
for (const subscription of open) subscription.close();
await Promise.all(publisherLoops);
await Promise.all(subscriberLoops);
clearInterval(sampler);
server.kill("SIGTERM");
await server.exited;
rmSync(dataDir, { recursive: true, force: true });

// ---- report ---------------------------------------------------------------------------------

const steady = samples.filter((s) => s.second >= samples[samples.length - 1].second / 4);
const range = (f: (s: Sample) => number) => ({
  min: Math.min(...steady.map(f)),
  max: Math.max(...steady.map(f)),
});
const rss = range((s) => s.rssMiB);
const fds = range((s) => s.fds);
const pool = range((s) => s.poolBlocksUsed);
const failures: string[] = [];
if (rss.max > rss.min * 1.25 + 64)
  failures.push(`RSS grew from ${rss.min.toFixed(0)} to ${rss.max.toFixed(0)} MiB after warm-up`);
if (fds.max - fds.min > 32) failures.push(`open files ranged ${fds.min}..${fds.max} after warm-up`);
for (const verifier of verifiers)
  for (const error of verifier.verify()) failures.push(`${verifier.name}: ${error}`);

console.log(`| t (s) | RSS MiB | open files | pool blocks used | tip records | published |`);
console.log(`|---:|---:|---:|---:|---:|---:|`);
for (const s of samples.filter((s, i) => s.second % 60 === 0 || i === samples.length - 1)) {
  console.log(
    `| ${s.second} | ${s.rssMiB.toFixed(0)} | ${s.fds} | ${s.poolBlocksUsed} | ${s.tipRecords} | ${s.published} |`,
  );
}
if (values.samples !== undefined)
  writeFileSync(values.samples, `${samples.map((sample) => JSON.stringify(sample)).join("\n")}\n`);
const peaks = [...steady].sort((a, b) => b.rssMiB - a.rssMiB).slice(0, 5);
console.log(
  `\nRSS peaks after warm-up: ${peaks.map((p) => `${p.rssMiB.toFixed(0)} MiB at ${p.second} s (${JSON.stringify(p.subscriptions)})`).join("; ")}`,
);
console.log(
  `after warm-up (last 3/4): RSS ${rss.min.toFixed(0)}..${rss.max.toFixed(0)} MiB, open files ${fds.min}..${fds.max}, pool blocks ${pool.min}..${pool.max}`,
);
console.log(
  `acknowledged seqs: ${lastAckedSeq}; subscribers verified: ${verifiers.map((v) => `${v.name} ${v.received}`).join(", ")}`,
);
console.log(failures.length === 0 ? "soak: PASS" : `soak: FAIL\n${failures.join("\n")}`);
process.exit(failures.length === 0 ? 0 : 1);
