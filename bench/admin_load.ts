/**
 * Admin load: what split comparisons in the admin app cost the message side. It starts the built
 * server itself (`aria serve` on port 0, a temp data dir, --fsync never, each event-loop pause
 * logged with its time: ARIA_DEBUG_EVENT_LOOP_LAG_MS=1), then in each run, while one connection
 * publishes at a steady rate (a batch every 10 ms, at most 64 batches unacknowledged: a batch
 * that finds them all out is skipped, so a stall shows as lost rate) and a healthy subscriber of
 * `**` reads everything, it measures three phases:
 *
 *   baseline   nothing else, `--baseline-seconds`
 *   compare×1  one POST /api/split/compare of the table, until it is answered
 *   compare×8  eight at once, until all are answered (the app may refuse some: 503)
 *
 * For each phase: the largest event-loop pause the server logged, the slowest PING round trip
 * of a separate connection, the publisher's acknowledged rate and the subscriber's received
 * rate (each over the phase's time), the slowest delivery (publish to receipt), the server's
 * peak RSS (VmRSS from /proc), and the answers' statuses. The table is `--table` (a CSV) or, by
 * default, ../shared/datasets/services-zipf.csv repeated under `r<k>/` prefixes up to
 * `--topics` topics (100,000: the most the admin app plans). Medians over `--runs` runs.
 *
 *   npx bun bench/admin_load.ts [--bin dist/aria] [--runs 3] [--rate 20000] [--topics 100000]
 *     [--table FILE] [--baseline-seconds 3]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "../mod.ts";
import { openPinger, rssBytes, startServedBinary } from "./served_binary.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string" },
    runs: { type: "string" },
    rate: { type: "string" },
    topics: { type: "string" },
    table: { type: "string" },
    "baseline-seconds": { type: "string" },
  },
});
const BIN = values.bin ?? process.env.ARIA_E2E_BIN ?? join(import.meta.dir, "..", "dist", "aria");
const RUNS = Number(values.runs ?? 3);
const RATE = Number(values.rate ?? 20_000);
const TOPICS = Number(values.topics ?? 100_000);
const BASELINE_MS = Number(values["baseline-seconds"] ?? 3) * 1000;
const TICK_MS = 10;
const BATCH_MESSAGES = Math.max(1, Math.round((RATE * TICK_MS) / 1000));
const IN_FLIGHT = 64;
const DATASETS = join(import.meta.dir, "..", "..", "shared", "datasets");

/** The volume table the compares upload. */
function tableCsv(): string {
  if (values.table !== undefined) return readFileSync(values.table, "utf8");
  const rows = readFileSync(join(DATASETS, "services-zipf.csv"), "utf8")
    .trim()
    .split("\n")
    .slice(1);
  const lines = ["topic,bytes,messages"];
  for (let prefix = 0; lines.length <= TOPICS; prefix++)
    for (const row of rows) {
      if (lines.length > TOPICS) break;
      lines.push(`r${prefix}/${row}`);
    }
  return `${lines.join("\n")}\n`;
}

interface Phase {
  name: string;
  pauseMaxMs: number;
  pingMaxMs: number;
  publishedPerSecond: number;
  receivedPerSecond: number;
  deliveryMaxMs: number;
  rssPeakMb: number;
  statuses: string;
  seconds: number;
}

async function oneRun(csv: string): Promise<Phase[]> {
  const dataDir = mkdtempSync(join(tmpdir(), "aria-admin-load-"));
  const server = await startServedBinary(BIN, dataDir, "64MiB");
  const publisher = await connect(server.tcpUrl);
  const subscriber = await connect(server.tcpUrl);
  const pinger = await openPinger(server);
  const counters = { acked: 0, received: 0, deliveryMaxMs: 0, rssPeak: 0 };
  let running = true;
  const reading = (async () => {
    for await (const message of subscriber.subscribe("**")) {
      counters.received++;
      const sentAt = new DataView(message.payload.buffer, message.payload.byteOffset).getFloat64(0);
      counters.deliveryMaxMs = Math.max(counters.deliveryMaxMs, Date.now() - sentAt);
      if (!running) break;
    }
  })().catch(() => undefined);
  const payload = new Uint8Array(64);
  let inFlight = 0;
  const topics = Array.from({ length: 64 }, (_, index) => `load/p${index % 16}/t${index}`);
  let sent = 0;
  const publishTimer = setInterval(() => {
    if (inFlight >= IN_FLIGHT) return;
    const stamped = payload.slice();
    new DataView(stamped.buffer).setFloat64(0, Date.now());
    const batch = Array.from({ length: BATCH_MESSAGES }, () => ({
      topic: topics[sent++ % topics.length],
      payload: stamped,
    }));
    inFlight++;
    publisher.publishBatch(batch).then(
      () => {
        inFlight--;
        counters.acked += BATCH_MESSAGES;
      },
      () => void inFlight--,
    );
  }, TICK_MS);
  const rssTimer = setInterval(() => {
    counters.rssPeak = Math.max(counters.rssPeak, rssBytes(server.pid));
  }, 50);

  const phase = async (name: string, work: () => Promise<string[]>): Promise<Phase> => {
    const acked = counters.acked;
    const received = counters.received;
    counters.deliveryMaxMs = 0;
    counters.rssPeak = rssBytes(server.pid);
    pinger.takeSlowestMs();
    const fromMs = Date.now();
    const started = performance.now();
    const statuses = await work();
    const seconds = (performance.now() - started) / 1000;
    await Bun.sleep(200); // pauses are logged when they end; deliveries catch up
    const counts = new Map<string, number>();
    for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
    return {
      name,
      pauseMaxMs: server.pauseMaxMs(fromMs, Date.now()),
      pingMaxMs: pinger.takeSlowestMs(),
      publishedPerSecond: (counters.acked - acked) / seconds,
      receivedPerSecond: (counters.received - received) / seconds,
      deliveryMaxMs: counters.deliveryMaxMs,
      rssPeakMb: counters.rssPeak / 1e6,
      statuses: [...counts].map(([status, count]) => `${count}×${status}`).join(" ") || "-",
      seconds,
    };
  };
  const compare = async () => {
    const answer = await fetch(`${server.adminUrl}/api/split/compare`, {
      method: "POST",
      body: csv,
    });
    await answer.arrayBuffer();
    return String(answer.status);
  };
  await Bun.sleep(1000); // warm-up
  const phases = [
    await phase("baseline", async () => {
      await Bun.sleep(BASELINE_MS);
      return [];
    }),
    await phase("compare×1", async () => [await compare()]),
    await phase("compare×8", () => Promise.all(Array.from({ length: 8 }, compare))),
  ];
  running = false;
  clearInterval(publishTimer);
  clearInterval(rssTimer);
  pinger.close();
  await publisher.close();
  await subscriber.close();
  await reading;
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
  return phases;
}

const median = (numbers: number[]) => {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const csv = tableCsv();
console.log(
  `admin load: ${BIN}, table ${csv.length} bytes (${csv.split("\n").length - 2} topics), publish ${RATE} msg/s, ${RUNS} runs`,
);
const header =
  "| run | phase | s | max pause ms | max ping ms | published/s | vs baseline | received/s | max delivery ms | peak RSS MB | answers |";
console.log(header);
console.log("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
const all: Phase[][] = [];
for (let run = 1; run <= RUNS; run++) {
  const phases = await oneRun(csv);
  all.push(phases);
  const base = phases[0].publishedPerSecond;
  for (const p of phases)
    console.log(
      `| ${run} | ${p.name} | ${p.seconds.toFixed(1)} | ${p.pauseMaxMs.toFixed(0)} | ${p.pingMaxMs.toFixed(0)} | ${p.publishedPerSecond.toFixed(0)} | ${(p.publishedPerSecond / base).toFixed(2)} | ${p.receivedPerSecond.toFixed(0)} | ${p.deliveryMaxMs.toFixed(0)} | ${p.rssPeakMb.toFixed(0)} | ${p.statuses} |`,
    );
}
console.log(`\nmedians of ${RUNS} runs:`);
console.log(
  "| phase | s | max pause ms | max ping ms | published/s | vs baseline | received/s | max delivery ms | peak RSS MB |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (let index = 0; index < all[0].length; index++) {
  const of = (pick: (phase: Phase) => number) => median(all.map((phases) => pick(phases[index])));
  const vsBaseline = median(
    all.map((phases) => phases[index].publishedPerSecond / phases[0].publishedPerSecond),
  );
  console.log(
    `| ${all[0][index].name} | ${of((p) => p.seconds).toFixed(1)} | ${of((p) => p.pauseMaxMs).toFixed(0)} | ${of((p) => p.pingMaxMs).toFixed(0)} | ${of((p) => p.publishedPerSecond).toFixed(0)} | ${vsBaseline.toFixed(2)} | ${of((p) => p.receivedPerSecond).toFixed(0)} | ${of((p) => p.deliveryMaxMs).toFixed(0)} | ${of((p) => p.rssPeakMb).toFixed(0)} |`,
  );
}
