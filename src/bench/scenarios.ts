/**
 * Scenario benchmarks of a running server, driven through the client library: publish
 * throughput, fan-out, publish→deliver latency, tip recovery of a 1% subtree against a
 * full-stream subscriber, and initial recovery of a 1% subtree from disk. Each scenario returns a
 * ScenarioResult: rows of numbers (what `--json` prints), the columns to render them with, notes
 * and the targets of the issue checked against the measured figures.
 *
 * Not here: starting servers, temp directories, the clock, process I/O counters, page-cache
 * eviction — the caller hands them in as a BenchEnv (src/cli/bench.ts builds it), so the same
 * runners serve an in-process server, an external one (`--url`) and the smoke test.
 *
 * Stream shape of the recovery scenarios: topics `bench/p{k}/t{j}`, message i in partition
 * k = i mod 100, so the subtree `bench/p0/**` is exactly 1% of the stream, spread evenly through it.
 */
import type { AriaClient, ClientSubscription, MessageBatch } from "../client/mod.ts";
// The ring record header sizes the streams that fill a ring.
import { RECORD_HEADER_BYTES as RING_RECORD_HEADER_BYTES } from "../constants.ts";
import type { FsyncPolicy } from "../store/mod.ts";
import { SLOW_SHARE, WINDOW_MS, spinWindows, steadiness } from "./cpu_steadiness.ts";
import { PATH_BATCH, publishPathBreakdown, type StoreFactory } from "./publish_path.ts";
import { cdfPoints, median, perSecond, Samples, summarizeSorted } from "./stats.ts";
import {
  type Column,
  formatBytes,
  formatMBps,
  formatMs,
  formatRatio,
  formatSi,
  type Row,
} from "./table.ts";

/** Names of the scenarios, in the order `all` runs them. */
export const SCENARIOS = [
  "publish",
  "publish-path",
  "fanout",
  "cpu-steadiness",
  "latency",
  "tip-recovery",
  "disk-recovery",
  "herd",
  "recovery-mix",
] as const;
/** One scenario name. */
export type ScenarioName = (typeof SCENARIOS)[number];

/** Partitions of the recovery streams: one of them is the 1% subtree. */
const STREAM_PARTITIONS = 100;
/** Topics per partition in the recovery streams. */
const STREAM_TOPICS_PER_PARTITION = 4;
/** The 1% subtree every recovery scenario reads. */
const SUBTREE = "bench/p0/**";
const SUBTREE_PREFIX = "bench/p0/";
/**
 * The other selectivities the recovery scenarios replay (beside the 1% subtree and `**`), for the
 * report's recovery-by-selectivity chart: one topic of the 1% subtree (0.25%), ten subtrees (10%).
 */
const SELECTIVITY_FILTERS: readonly { filter: readonly string[]; label: string }[] = [
  { filter: ["bench/p0/t0"], label: "bench/p0/t0 (0.25%)" },
  {
    filter: Array.from({ length: 10 }, (_, k) => `bench/p${k}/**`),
    label: "bench/p0/** … bench/p9/** (10%)",
  },
];
/** Messages per publishBatch call while filling a stream. */
const FILL_BATCH = 4096;
/** Publishes a paced publisher may have unacknowledged before it skips a tick. */
const PACED_IN_FLIGHT_MAX = 1 << 18;
/** Ring of the publish-path stages: smaller than their warm-up, so they run with the ring full. */
const PATH_TIP_BYTES = 4 * 1024 * 1024;
/** How long a latency run waits for subscribers to receive the last messages. */
const DRAIN_TIMEOUT_MS = 10_000;

/** A server to benchmark: started in this process, or the external one of `--url`. */
export interface BenchServer {
  readonly url: string;
  /** The server's fsync policy, or "external" when the bench did not start it. */
  readonly fsync: FsyncPolicy | "external";
  /** The first seq the tip holds (in-process only). */
  tipFirstSeq(): number | null;
  /** Subscriptions the broker started from disk / from the tip so far (in-process only). */
  recoveries(): { disk: number; tip: number } | null;
  /** Bytes in closed segments and journals (in-process only). */
  storeBytes(): { segments: number; journals: number } | null;
  /** Bytes the store's readers have read from its data files so far (in-process only). */
  storeBytesRead(): number | null;
  /** Stops the server and starts it again on the same data directory; null when not possible. */
  readonly restart:
    | (() => Promise<{ server: BenchServer; stopMs: number; startMs: number }>)
    | null;
  /** Evicts the data directory's files from the OS page cache; false when it cannot. */
  dropCaches(): Promise<boolean>;
  /** Stops the server and removes its data (a no-op for an external server). */
  stop(): Promise<void>;
}

/** Bytes this process read: through read syscalls (files and sockets), and from storage devices. */
export interface IoCounters {
  readCallBytes: number;
  storageReadBytes: number;
}

/** Everything the scenarios need from outside: servers, clients, the clock, progress output. */
export interface BenchEnv {
  /** A fresh server; `retainBytes` bounds its disk use (oldest segments deleted beyond it). */
  server(options: {
    fsync: FsyncPolicy;
    tipBytes: number;
    retainBytes?: number;
    /** How the tip finds a recovering reader's records (default "planned"; in-process only). */
    tipReadStrategy?: "planned" | "linear";
  }): Promise<BenchServer>;
  connect(url: string): Promise<AriaClient>;
  /** A monotonic clock in milliseconds with sub-millisecond resolution. */
  nowMs(): number;
  sleep(ms: number): Promise<void>;
  /** The current activity, for the progress line. */
  progress(text: string): void;
  /** This process's I/O counters, or null where the platform has none. */
  io(): IoCounters | null;
  /** CPU time of this process (user + system, all threads) in ms, or null. */
  cpuMs(): number | null;
  /** A store on a fresh temporary directory, for the publish-path breakdown. */
  openStore: StoreFactory;
}

/** Sizes and knobs of a run; `benchOptions` fills them in. */
export interface BenchOptions {
  /** Measured time of one throughput / fan-out / latency run. */
  durationMs: number;
  /** Unmeasured time before each measured run (connections warm, JIT settled). */
  warmupMs: number;
  /** Runs of each measured cell; tables show the median. */
  repeat: number;
  /** Publishes a throughput publisher keeps unacknowledged. */
  window: number;
  /** Messages a throughput publisher hands the client per publishBatch call. */
  batch: number;
  publishers: number[];
  payloadBytes: number[];
  fsync: FsyncPolicy[];
  /** Ring bytes of the servers of the publish, fan-out and latency scenarios. */
  serverTipBytes: number;
  /** Segment bytes those servers keep: long throughput runs would otherwise fill the disk. */
  serverRetainBytes: number;
  fanoutSubscribers: number[];
  fanoutRate: number;
  latencyRates: number[];
  latencySubscribers: number;
  latencyFsync: FsyncPolicy[];
  /** Rounds of PATH_BATCH messages per measured run of each publish-path stage. */
  pathRounds: number;
  /** Runs of each publish-path stage (cheap, and noisier than the rest: more runs). */
  pathRepeat: number;
  /** Ring bytes of the tip-recovery server; the stream fills 90% of it. */
  tipBytes: number;
  tipPayloadBytes: number;
  /** Messages of the disk-recovery stream (much larger than its server's tip). */
  diskMessages: number;
  diskPayloadBytes: number;
  diskTipBytes: number;
  /** Clients of the herd scenario, each replaying its own 1% subtree of the disk stream. */
  herdReaders: number;
  /** Readers of the recovery-mix scenario (10% of them recovering, the rest live). */
  mixReaders: number;
  /** Paced publish rate (msg/s) while the recovery mix runs. */
  mixRate: number;
}

/** What `benchOptions` takes: `quick` for a smoke-test-sized run, and the command-line knobs. */
export interface BenchOverrides {
  quick?: boolean;
  durationMs?: number;
  messages?: number;
  repeat?: number;
  window?: number;
  batch?: number;
  tipBytes?: number;
  /** fsync policies of the publish and latency scenarios. */
  fsync?: FsyncPolicy[];
  /** Clients of the herd scenario. */
  readers?: number;
  /** Publisher counts and payload sizes of the publish scenario. */
  publishers?: number[];
  payloadBytes?: number[];
}

/** The options of a full run, or of a `quick` one, with the overrides applied. */
export function benchOptions(overrides: BenchOverrides = {}): BenchOptions {
  const quick = overrides.quick === true;
  const MiB = 1024 * 1024;
  return {
    durationMs: overrides.durationMs ?? (quick ? 200 : 3000),
    warmupMs: quick ? 100 : 1000,
    repeat: overrides.repeat ?? (quick ? 1 : 3),
    window: overrides.window ?? (quick ? 8192 : 32_768),
    batch: overrides.batch ?? (quick ? 2048 : 8192),
    publishers: overrides.publishers ?? [1, 8],
    payloadBytes: overrides.payloadBytes ?? [64, 1024],
    fsync: overrides.fsync ?? ["always", "interval", "never"],
    serverTipBytes: quick ? 8 * MiB : 256 * MiB,
    serverRetainBytes: 1024 * MiB,
    fanoutSubscribers: [1, 10, 100],
    fanoutRate: quick ? 20_000 : 100_000,
    latencyRates: quick ? [2_000, 10_000] : [10_000, 100_000],
    latencySubscribers: 10,
    latencyFsync: overrides.fsync ?? ["interval", "always"],
    pathRounds: quick ? 8 : 250,
    pathRepeat: overrides.repeat ?? (quick ? 1 : 5),
    tipBytes: overrides.tipBytes ?? (quick ? 4 * MiB : 256 * MiB),
    tipPayloadBytes: 64,
    diskMessages: overrides.messages ?? (quick ? 20_000 : 2_000_000),
    diskPayloadBytes: 256,
    diskTipBytes: quick ? 256 * 1024 : 16 * MiB,
    herdReaders: overrides.readers ?? (quick ? 10 : 100),
    mixReaders: overrides.readers ?? (quick ? 10 : 100),
    mixRate: quick ? 5_000 : 20_000,
  };
}

/** A target of the issue, checked against the measured figure. */
export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean;
}

/** The charts of `aria bench --report` (src/bench/report.ts draws them). */
export const REPORT_CHARTS = [
  "readers-throughput",
  "latency-cdf",
  "first-message",
  "recovery-selectivity",
] as const;
/** One chart of the report. */
export type ReportChart = (typeof REPORT_CHARTS)[number];

/** A named series of a report chart: x a number (line charts) or a category label (bars). */
export interface ChartSeries {
  chart: ReportChart;
  name: string;
  points: { x: number | string; y: number }[];
}

/** The outcome of one scenario. */
export interface ScenarioResult {
  scenario: ScenarioName;
  title: string;
  columns: Column[];
  rows: Row[];
  notes: string[];
  targets: TargetCheck[];
  /** What the scenario adds to the report's charts (absent: nothing). */
  series?: ChartSeries[];
  elapsedMs: number;
}

/** Runs one scenario. */
export async function runScenario(
  name: ScenarioName,
  env: BenchEnv,
  options: BenchOptions,
): Promise<ScenarioResult> {
  const started = env.nowMs();
  const result = await RUNNERS[name](env, options);
  return { scenario: name, ...result, elapsedMs: env.nowMs() - started };
}

type Runner = (
  env: BenchEnv,
  options: BenchOptions,
) => Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">>;

const RUNNERS: Record<ScenarioName, Runner> = {
  publish: publishScenario,
  "publish-path": publishPathScenario,
  fanout: fanoutScenario,
  "cpu-steadiness": cpuSteadinessScenario,
  latency: latencyScenario,
  "tip-recovery": tipRecoveryScenario,
  "disk-recovery": diskRecoveryScenario,
  herd: herdScenario,
  "recovery-mix": recoveryMixScenario,
};

// ---- 1. Publish throughput --------------------------------------------------------------------

async function publishScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const rows: Row[] = [];
  for (const fsync of options.fsync) {
    const server = await env.server({
      fsync,
      tipBytes: options.serverTipBytes,
      retainBytes: options.serverRetainBytes,
    });
    try {
      const cells = options.publishers.flatMap((publishers) =>
        options.payloadBytes.map((payloadBytes) => ({ publishers, payloadBytes })),
      );
      const rates = cells.map(() => [] as number[]);
      env.progress(`publish: fsync ${server.fsync}: warm-up`);
      await publishRun(env, server.url, {
        publishers: 1,
        payloadBytes: 64,
        durationMs: options.warmupMs,
        window: options.window,
        batch: options.batch,
      });
      // Cells interleaved inside each repetition, so drift (disk, other load) spreads over all of them.
      for (let rep = 0; rep < options.repeat; rep++) {
        for (const [i, cell] of cells.entries()) {
          env.progress(
            `publish: fsync ${server.fsync}, ${cell.publishers} publisher(s), ${cell.payloadBytes} B, run ${rep + 1}/${options.repeat}`,
          );
          const run = await publishRun(env, server.url, {
            ...cell,
            durationMs: options.durationMs,
            window: options.window,
            batch: options.batch,
          });
          rates[i].push(run.messagesPerSecond);
        }
      }
      for (const [i, cell] of cells.entries()) {
        const messagesPerSecond = median(rates[i]);
        rows.push({
          fsync: server.fsync,
          publishers: cell.publishers,
          payloadBytes: cell.payloadBytes,
          messagesPerSecond,
          payloadBytesPerSecond: messagesPerSecond * cell.payloadBytes,
          minMessagesPerSecond: Math.min(...rates[i]),
          maxMessagesPerSecond: Math.max(...rates[i]),
          runs: rates[i].length,
        });
      }
    } finally {
      await server.stop();
    }
    if (server.fsync === "external") break;
  }
  const best = rows.filter(
    (row) => row.payloadBytes === 64 && (row.fsync === "interval" || row.fsync === "external"),
  );
  const bestRate = Math.max(0, ...best.map((row) => row.messagesPerSecond as number));
  return {
    title: "Publish throughput (acknowledged)",
    columns: [
      { key: "fsync", header: "fsync" },
      { key: "publishers", header: "publishers" },
      { key: "payloadBytes", header: "payload B" },
      { key: "messagesPerSecond", header: "msg/s (median)", format: formatSi },
      { key: "payloadBytesPerSecond", header: "payload MB/s", format: formatMBps },
      { key: "minMessagesPerSecond", header: "min msg/s", format: formatSi },
      { key: "maxMessagesPerSecond", header: "max msg/s", format: formatSi },
      { key: "runs", header: "runs" },
    ],
    rows,
    notes: [
      `Each publisher is one connection keeping up to ${options.window} publishes unacknowledged, handed to the client ${options.batch} at a time (publishBatch: one PUBLISH frame per call).`,
      `A run publishes for ${options.durationMs} ms; msg/s counts acknowledged messages over the time to the last acknowledgement.`,
    ],
    targets:
      best.length === 0
        ? []
        : [
            {
              target: "≥ 1 M msg/s published (64 B, fsync interval, batched client)",
              measured: `${formatSi(bestRate)} msg/s`,
              met: bestRate >= 1e6,
            },
          ],
  };
}

interface PublishRunOptions {
  publishers: number;
  payloadBytes: number;
  durationMs: number;
  window: number;
  batch: number;
}

/** `publishers` connections publish as fast as their window allows for `durationMs`. */
async function publishRun(
  env: BenchEnv,
  url: string,
  options: PublishRunOptions,
): Promise<{ messagesPerSecond: number }> {
  const clients = await Promise.all(
    Array.from({ length: options.publishers }, () => env.connect(url)),
  );
  try {
    const payload = new Uint8Array(options.payloadBytes).fill(0x61);
    const started = env.nowMs();
    const until = started + options.durationMs;
    const results = await Promise.all(
      clients.map((client, i) =>
        windowedPublisher(env, client, `bench/pub${i}/t`, payload, { ...options, untilMs: until }),
      ),
    );
    const acked = results.reduce((sum, r) => sum + r.acked, 0);
    const lastAck = Math.max(...results.map((r) => r.lastAckMs));
    return { messagesPerSecond: perSecond(acked, lastAck - started) };
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}

/** Publishes `payload` on `topic` in batches, keeping at most `window` unacknowledged, until `untilMs`. */
async function windowedPublisher(
  env: BenchEnv,
  client: AriaClient,
  topic: string,
  payload: Uint8Array,
  options: { window: number; batch: number; untilMs: number },
): Promise<{ acked: number; lastAckMs: number }> {
  const batch = Math.max(1, Math.min(options.batch, options.window));
  const messages = Array.from({ length: batch }, () => ({ topic, payload }));
  let inFlight = 0;
  let acked = 0;
  let lastAckMs = env.nowMs();
  let failure: unknown = null;
  let wake: (() => void) | null = null;
  const settled = (count: number) => {
    inFlight -= count;
    const resume = wake;
    wake = null;
    resume?.();
  };
  const onAck = () => {
    acked += batch;
    lastAckMs = env.nowMs();
    settled(batch);
  };
  const onError = (error: unknown) => {
    failure ??= error;
    settled(batch);
  };
  while (failure === null && env.nowMs() < options.untilMs) {
    if (inFlight + batch > options.window) {
      await new Promise<void>((resolve) => (wake = resolve));
      continue;
    }
    inFlight += batch;
    client.publishBatch(messages).then(onAck, onError);
    // Let the client send this batch before the next one is queued behind it.
    await null;
  }
  while (inFlight > 0) await new Promise<void>((resolve) => (wake = resolve));
  if (failure !== null) throw failure;
  return { acked, lastAckMs };
}

// ---- 1b. Where a published message's time goes ------------------------------------------------

async function publishPathScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  // A small ring: the warm-up fills it, so the runs measure the steady state (appends evict), not first-touch page faults.
  const rows = await publishPathBreakdown(env, {
    rounds: options.pathRounds,
    repeat: options.pathRepeat,
    tipBytes: PATH_TIP_BYTES,
  });
  const cpuOf = (prefix: string) =>
    (rows.find((row) => (row.stage as string).startsWith(prefix))?.cpuNsPerMessage as
      | number
      | undefined) ?? Number.NaN;
  const client = cpuOf("client");
  const broker = cpuOf("server: broker");
  const store = cpuOf("store: append + commit, 8 MiB");
  const total = client + broker + store;
  rows.push({
    stage: "sum: client + broker + store with segments closing",
    cpuNsPerMessage: total,
    messagesPerCpuSecond: 1e9 / total,
  });
  return {
    title: "Publish path: CPU per message by stage (64 B, no sockets)",
    columns: [
      { key: "stage", header: "stage" },
      { key: "wallNsPerMessage", header: "wall ns/msg", format: (v) => v.toFixed(0) },
      { key: "cpuNsPerMessage", header: "CPU ns/msg", format: (v) => v.toFixed(0) },
      { key: "messagesPerCpuSecond", header: "msg per CPU-second", format: formatSi },
      { key: "runs", header: "runs" },
    ],
    rows,
    notes: [
      `Each stage handles batches of ${PATH_BATCH} messages (one PUBLISH frame) in this process, without sockets; CPU counts every thread of the process (the store's file writes run on a thread pool). Medians of ${options.pathRepeat} run(s) of ${options.pathRounds} batches.`,
      "The broker row includes the decode and tip append rows. The sum is what one message costs the client and the server together, less the kernel's loopback TCP: the in-process publish scenario pays it on one JavaScript thread.",
    ],
    targets: [],
  };
}

function serverLabel(server: BenchServer): string {
  return server.fsync === "external"
    ? "an external server (its own fsync policy)"
    : `fsync ${server.fsync}, the server in this process, on the same thread as the clients`;
}

// ---- 2. Fan-out -------------------------------------------------------------------------------

async function fanoutScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const server = await env.server({
    fsync: "interval",
    tipBytes: options.serverTipBytes,
    retainBytes: options.serverRetainBytes,
  });
  const rows: Row[] = [];
  try {
    for (const subscriberCount of options.fanoutSubscribers) {
      const totals: number[] = [];
      const offered: number[] = [];
      for (let rep = 0; rep < options.repeat; rep++) {
        env.progress(
          `fanout: ${subscriberCount} subscriber(s) at ${formatSi(options.fanoutRate)} msg/s, run ${rep + 1}/${options.repeat}`,
        );
        const run = await fanoutRun(env, server.url, subscriberCount, options);
        totals.push(run.deliveredPerSecond);
        offered.push(run.publishedPerSecond);
      }
      const deliveredPerSecond = median(totals);
      const publishedPerSecond = median(offered);
      rows.push({
        fsync: server.fsync,
        subscribers: subscriberCount,
        targetRate: options.fanoutRate,
        publishedPerSecond,
        deliveredPerSecond,
        perSubscriberPerSecond: deliveredPerSecond / subscriberCount,
        keptUpPercent: (100 * deliveredPerSecond) / (publishedPerSecond * subscriberCount),
        runs: totals.length,
      });
    }
  } finally {
    await server.stop();
  }
  return {
    title: "Fan-out to live subscribers of `**`",
    columns: [
      { key: "subscribers", header: "subscribers" },
      { key: "targetRate", header: "target msg/s", format: formatSi },
      { key: "publishedPerSecond", header: "published msg/s", format: formatSi },
      { key: "deliveredPerSecond", header: "delivered msg/s (total)", format: formatSi },
      { key: "perSubscriberPerSecond", header: "per subscriber", format: formatSi },
      {
        key: "keptUpPercent",
        header: "delivered / (published × subs) %",
        format: (v) => v.toFixed(1),
      },
      { key: "runs", header: "runs" },
    ],
    rows,
    notes: [
      `One publisher paced at the target rate (a burst every millisecond, 64 B payloads); each subscriber is its own connection iterating its subscription; ${serverLabel(server)}.`,
      `Rates are measured over ${options.durationMs} ms after a ${options.warmupMs} ms warm-up. Below 100% the subscribers could not keep up: the server stopped their cursors (back-pressure) and they caught up from the tip.`,
    ],
    targets: [],
    series: [
      {
        chart: "readers-throughput",
        name: `live fan-out of ** at ${formatSi(options.fanoutRate)} msg/s (fanout)`,
        points: rows.map((row) => ({
          x: row.subscribers as number,
          y: row.deliveredPerSecond as number,
        })),
      },
    ],
  };
}

/** Subscribers of `**` count what they receive while a paced publisher runs. */
async function fanoutRun(
  env: BenchEnv,
  url: string,
  subscriberCount: number,
  options: BenchOptions,
): Promise<{ deliveredPerSecond: number; publishedPerSecond: number }> {
  const subscribers = await liveSubscribers(env, url, subscriberCount, () => {});
  const publisher = await env.connect(url);
  try {
    const started = env.nowMs();
    // The publisher runs until stopped: a stall of this process during the warm-up (a collection
    // of a large heap) delays the window instead of leaving it empty.
    const publishing = pacedPublisher(env, publisher, {
      rate: options.fanoutRate,
      payloadBytes: 64,
      startMs: started,
      untilMs: Infinity,
      stamp: false,
    });
    await env.sleep(options.warmupMs);
    // The window opens once every subscriber is receiving: after such a stall the server stopped
    // their subscriptions, and they catch up first.
    const slowest = subscribers.deliveredMin();
    const receivingBy = env.nowMs() + DRAIN_TIMEOUT_MS;
    while (subscribers.deliveredMin() === slowest && env.nowMs() < receivingBy) await env.sleep(5);
    const deliveredAtStart = subscribers.delivered();
    const publishedAtStart = publishing.published();
    const measuredFrom = env.nowMs();
    await env.sleep(options.durationMs);
    const delivered = subscribers.delivered() - deliveredAtStart;
    const published = publishing.published() - publishedAtStart;
    const elapsed = env.nowMs() - measuredFrom;
    publishing.stop();
    await publishing.done;
    return {
      deliveredPerSecond: perSecond(delivered, elapsed),
      publishedPerSecond: perSecond(published, elapsed),
    };
  } finally {
    await publisher.close();
    await subscribers.close();
  }
}

interface LiveSubscribers {
  /** Messages received by all subscribers so far. */
  delivered(): number;
  /** Messages received by the subscriber that received the fewest. */
  deliveredMin(): number;
  close(): Promise<void>;
}

/** `count` connections, each subscribed to `**` from the live end; resolves once all are live. */
async function liveSubscribers(
  env: BenchEnv,
  url: string,
  count: number,
  onMessage: (frame: MessageBatch, receivedUs: number) => void,
  filterOf: (subscriber: number) => string = () => "**",
): Promise<LiveSubscribers> {
  const clients = await Promise.all(Array.from({ length: count }, () => env.connect(url)));
  const counts = new Float64Array(count);
  const subscriptions = clients.map((client, i) => client.subscribe(filterOf(i), { from: "live" }));
  let failure: unknown = null;
  const loops = subscriptions.map(async (subscription, i) => {
    try {
      // frames(): one promise per DATA frame and no object per message, the way a high-rate
      // consumer reads (onMessage sees the cursor on each message in turn). The messages of a
      // frame arrive together: one clock read per frame is their receive time.
      for await (const frame of subscription.frames()) {
        counts[i] += frame.remaining;
        const receivedUs = env.nowMs() * 1000;
        while (frame.next()) onMessage(frame, receivedUs);
      }
    } catch (error) {
      failure ??= error;
    }
  });
  await Promise.all(subscriptions.map((subscription) => subscription.caughtUpAt));
  return {
    delivered: () => counts.reduce((sum, n) => sum + n, 0),
    deliveredMin: () => counts.reduce((min, n) => Math.min(min, n), Infinity),
    close: async () => {
      await Promise.all(clients.map((client) => client.close()));
      await Promise.all(loops);
      if (failure !== null) throw failure;
    },
  };
}

interface PacedPublisher {
  /** Messages handed to the client so far. */
  published(): number;
  /** Ends the publishing before untilMs. */
  stop(): void;
  /** Resolves when the publisher stopped and every publish was acknowledged. */
  done: Promise<void>;
}

/**
 * Publishes at `rate` messages/s: every millisecond, the messages due since the start, in one
 * batch. With `stamp`, the first 8 bytes of each payload carry the send time in µs (f64).
 */
function pacedPublisher(
  env: BenchEnv,
  client: AriaClient,
  options: {
    rate: number;
    payloadBytes: number;
    startMs: number;
    untilMs: number;
    stamp: boolean;
    /** The topic of the i-th message published (default: all on bench/live/t). */
    topicOf?: (i: number) => string;
  },
): PacedPublisher {
  let published = 0;
  let inFlight = 0;
  let failure: unknown = null;
  let drained: (() => void) | null = null;
  let stopped = false;
  const payload = new Uint8Array(Math.max(8, options.payloadBytes)).fill(0x61);
  const topic = "bench/live/t";
  const settled = (count: number) => {
    inFlight -= count;
    if (inFlight === 0) drained?.();
  };
  const run = async () => {
    while (failure === null && !stopped && env.nowMs() < options.untilMs) {
      const now = env.nowMs();
      const due = Math.floor((options.rate * (now - options.startMs)) / 1000) - published;
      if (due > 0 && inFlight < PACED_IN_FLIGHT_MAX) {
        // One payload for the whole tick: the client copies it into the frame before the next one.
        if (options.stamp) writeStamp(payload, now * 1000);
        const topicOf = options.topicOf;
        const first = published;
        const messages = Array.from({ length: due }, (_, k) => ({
          topic: topicOf === undefined ? topic : topicOf(first + k),
          payload,
        }));
        inFlight += due;
        published += due;
        client.publishBatch(messages).then(
          () => settled(due),
          (error: unknown) => {
            failure ??= error;
            settled(due);
          },
        );
      }
      await env.sleep(1);
    }
    while (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
    if (failure !== null) throw failure;
  };
  const done = run();
  done.catch(() => {}); // awaited by the caller; this only keeps an early failure from counting as unhandled
  return { published: () => published, stop: () => (stopped = true), done };
}

const stampBytes = new Uint8Array(8);
const stampF64 = new Float64Array(stampBytes.buffer);

/** Writes the send time `timeUs` into the first 8 bytes of `payload` (f64, host byte order). */
function writeStamp(payload: Uint8Array, timeUs: number): void {
  stampF64[0] = timeUs;
  payload.set(stampBytes, 0);
}

/** The send time (µs) a paced publisher stamped into the payload starting at bytes[start]. */
function stampOf(bytes: Uint8Array, start: number): number {
  for (let i = 0; i < 8; i++) stampBytes[i] = bytes[start + i];
  return stampF64[0];
}

// ---- CPU steadiness (before latency: what a latency figure can be on this machine) -----------

async function cpuSteadinessScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const rows: Row[] = [];
  for (let run = 0; run < options.repeat; run++) {
    env.progress(
      `cpu-steadiness: spinning ${formatMs(options.durationMs)} ms, run ${run + 1}/${options.repeat}`,
    );
    await env.sleep(0); // let the progress line out: the spin blocks this thread
    const found = steadiness(spinWindows(() => env.nowMs(), options.durationMs));
    rows.push({ run: run + 1, ...found });
  }
  const percent = (share: number) => `${(share * 100).toFixed(1)}%`;
  return {
    title: `CPU steadiness: work per ${WINDOW_MS} ms window of one spinning thread`,
    columns: [
      { key: "run", header: "run" },
      { key: "windows", header: "windows" },
      { key: "medianShare", header: "median window", format: percent },
      { key: "p1Share", header: "1st percentile window", format: percent },
      { key: "slowShare", header: `windows < ${SLOW_SHARE * 100}%`, format: percent },
      { key: "below80Share", header: "windows < 80%", format: percent },
      {
        key: "stallsPerSecond",
        header: "stalls per s",
        format: (value: number) => value.toFixed(2),
      },
      {
        key: "longestStallMs",
        header: "longest stall ms",
        format: (value: number) => value.toFixed(0),
      },
    ],
    rows,
    notes: [
      `One thread of this process spins on fixed integer work for ${formatMs(options.durationMs)} ms; each column is a window's work as a share of the best window's. A stall is a run of windows below ${SLOW_SHARE * 100}%.`,
      "With nothing else running, a slow window is CPU time the machine did not give (another tenant, the hypervisor). A p99 of 2 ms needs fewer than 1% of messages delayed past 2 ms: more than ~1% of time in stalls of tens of ms puts that target out of reach on this machine, whatever the server does.",
    ],
    targets: [],
  };
}

// ---- 3. Latency -------------------------------------------------------------------------------

async function latencyScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const rows: Row[] = [];
  const series: ChartSeries[] = [];
  for (const fsync of options.latencyFsync) {
    const server = await env.server({
      fsync,
      tipBytes: options.serverTipBytes,
      retainBytes: options.serverRetainBytes,
    });
    try {
      for (const rate of options.latencyRates) {
        env.progress(
          `latency: fsync ${server.fsync}, ${formatSi(rate)} msg/s, ${options.latencySubscribers} subscribers`,
        );
        const run = await latencyRun(env, server.url, rate, options);
        rows.push({ fsync: server.fsync, ...run.row });
        series.push({
          chart: "latency-cdf",
          name: `${server.fsync === "external" ? "external server" : `fsync ${server.fsync}`}, ${formatSi(rate)} msg/s`,
          points: run.cdf.map(([us, percent]) => ({ x: us / 1000, y: percent })),
        });
      }
    } finally {
      await server.stop();
    }
    if (server.fsync === "external") break;
  }
  const targetRow = rows.find(
    (row) => row.rate === 100_000 && (row.fsync === "interval" || row.fsync === "external"),
  );
  const targets: TargetCheck[] =
    targetRow === undefined
      ? []
      : [
          {
            target: `p99 publish→deliver ≤ 2 ms at 100k msg/s with ${options.latencySubscribers} subscribers (${targetRow.fsync === "external" ? "external server" : `fsync ${targetRow.fsync}`})`,
            measured: `p99 ${formatMs(targetRow.p99Ms as number)} ms`,
            met: (targetRow.p99Ms as number) <= 2,
          },
        ];
  return {
    title: `Publish→deliver latency, ${options.latencySubscribers} subscribers of \`**\``,
    columns: [
      { key: "fsync", header: "fsync" },
      { key: "rate", header: "target msg/s", format: formatSi },
      { key: "publishedPerSecond", header: "published msg/s", format: formatSi },
      { key: "samples", header: "samples", format: formatSi },
      { key: "p50Ms", header: "p50 ms", format: formatMs },
      { key: "p99Ms", header: "p99 ms", format: formatMs },
      { key: "p999Ms", header: "p99.9 ms", format: formatMs },
      { key: "maxMs", header: "max ms", format: formatMs },
      { key: "lostSamples", header: "not delivered" },
    ],
    rows,
    notes: [
      "Each payload carries its send time (µs, f64); each subscriber records receive time − send time for every message sent in the measured window (after the warm-up), waiting for the last ones to arrive.",
      "A message is delivered once durable under the policy: `interval` acknowledges after the journal write (fsync every 50 ms), `always` after the fsync.",
    ],
    targets,
    series,
  };
}

async function latencyRun(
  env: BenchEnv,
  url: string,
  rate: number,
  options: BenchOptions,
): Promise<{ row: Row; cdf: [number, number][] }> {
  // Room for every sample of the measured window, and 10% more (the publisher may run ahead).
  const samples = new Samples(
    Math.ceil((1.1 * rate * options.durationMs * options.latencySubscribers) / 1000),
  );
  let measureFromUs = Infinity;
  let measureUntilUs = Infinity;
  let expected = 0;
  const subscribers = await liveSubscribers(
    env,
    url,
    options.latencySubscribers,
    (frame, receivedUs) => {
      const sentUs = stampOf(frame.frame, frame.payloadStart);
      if (sentUs >= measureFromUs && sentUs < measureUntilUs) samples.add(receivedUs - sentUs);
    },
  );
  const publisher = await env.connect(url);
  try {
    const started = env.nowMs();
    const measureFrom = started + options.warmupMs;
    const until = measureFrom + options.durationMs;
    measureFromUs = measureFrom * 1000;
    measureUntilUs = until * 1000;
    const publishing = pacedPublisher(env, publisher, {
      rate,
      payloadBytes: 64,
      startMs: started,
      untilMs: until,
      stamp: true,
    });
    await publishing.done;
    expected = publishing.published();
    const drainUntil = env.nowMs() + DRAIN_TIMEOUT_MS;
    while (subscribers.deliveredMin() < expected && env.nowMs() < drainUntil) await env.sleep(5);
    const sorted = samples.sorted();
    const summary = summarizeSorted(sorted);
    const measuredExpected = Math.round((expected * options.durationMs) / (until - started));
    const row = {
      rate,
      publishedPerSecond: perSecond(expected, until - started),
      subscribers: options.latencySubscribers,
      samples: summary.count,
      p50Ms: summary.p50 / 1000,
      p99Ms: summary.p99 / 1000,
      p999Ms: summary.p999 / 1000,
      maxMs: summary.max / 1000,
      lostSamples: Math.max(0, options.latencySubscribers * expected - subscribers.delivered()),
      expectedSamples: measuredExpected * options.latencySubscribers,
    };
    return { row, cdf: cdfPoints(sorted) };
  } finally {
    await publisher.close();
    await subscribers.close();
  }
}

// ---- 4. Tip recovery --------------------------------------------------------------------------

async function tipRecoveryScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const server = await env.server({ fsync: "interval", tipBytes: options.tipBytes });
  const rows: Row[] = [];
  const notes: string[] = [];
  const targets: TargetCheck[] = [];
  const series: ChartSeries[] = [];
  try {
    const recordBytes = RING_RECORD_HEADER_BYTES + ((options.tipPayloadBytes + 7) & ~7);
    const messages = Math.floor((0.9 * options.tipBytes) / recordBytes);
    const fill = await fillStream(
      env,
      server.url,
      messages,
      options.tipPayloadBytes,
      "tip-recovery",
    );
    const tipFirst = server.tipFirstSeq();
    if (tipFirst !== null && tipFirst > fill.firstSeq)
      throw new Error(
        `tip-recovery: the ring dropped seq ${fill.firstSeq} (it starts at ${tipFirst}): the stream must fit the tip`,
      );
    const recoveriesBefore = server.recoveries();
    const subtreeMs: number[] = [];
    const fullMs: number[] = [];
    let subtree: ReplayResult | null = null;
    let full: ReplayResult | null = null;
    const subtreeRuns: ReplayResult[] = [];
    const fullRuns: ReplayResult[] = [];
    const others: ReplayResult[][] = SELECTIVITY_FILTERS.map(() => []);
    for (let rep = 0; rep < options.repeat; rep++) {
      env.progress(
        `tip-recovery: ${SUBTREE} from seq ${fill.firstSeq}, run ${rep + 1}/${options.repeat}`,
      );
      subtree = await replay(env, server.url, SUBTREE, fill.firstSeq);
      subtreeMs.push(subtree.wallMs);
      subtreeRuns.push(subtree);
      env.progress(
        `tip-recovery: ** from seq ${fill.firstSeq} (full-stream filter), run ${rep + 1}/${options.repeat}`,
      );
      full = await replay(env, server.url, "**", fill.firstSeq);
      fullMs.push(full.wallMs);
      fullRuns.push(full);
      for (const [i, { filter, label }] of SELECTIVITY_FILTERS.entries()) {
        env.progress(`tip-recovery: ${label} from seq ${fill.firstSeq}, run ${rep + 1}`);
        const result = await replay(env, server.url, filter, fill.firstSeq);
        others[i].push(result);
      }
    }
    const recoveriesAfter = server.recoveries();
    const subtreeWall = median(subtreeMs);
    const fullWall = median(fullMs);
    rows.push(
      replayRow(`${SUBTREE} (server-side, indexed)`, subtree!, subtreeWall, subtreeMs.length),
    );
    rows.push(replayRow("** filtered by the client", full!, fullWall, fullMs.length));
    for (const [i, { label }] of SELECTIVITY_FILTERS.entries()) {
      const runs = others[i];
      const wall = median(runs.map((run) => run.wallMs));
      rows.push(replayRow(`${label} (server-side)`, runs[0], wall, runs.length));
    }
    series.push(selectivitySeries("tip, filled to 90% (tip-recovery)", messages, rows), {
      chart: "first-message",
      name: "from the tip (tip-recovery)",
      points: [
        { x: "1% subtree", y: median(firsts(subtreeRuns)) },
        { x: "** (the whole stream)", y: median(firsts(fullRuns)) },
      ],
    });
    const ratio = fullWall / subtreeWall;
    if (subtree!.matching !== full!.matching)
      throw new Error(
        `tip-recovery: the readers disagree: ${subtree!.matching} vs ${full!.matching} matching messages`,
      );
    notes.push(
      `Stream: ${messages.toLocaleString("en-US")} messages of ${options.tipPayloadBytes} B over ${STREAM_PARTITIONS} partitions (${formatBytes(messages * recordBytes)} of ring records, 90% of a ${formatBytes(options.tipBytes)} tip); \`${SUBTREE}\` is 1% of it.`,
      `Every reader subscribes from seq ${fill.firstSeq} (the oldest message of the stream, in the ring) with untilCaughtUp; wall time is from subscribe() to the end of the iteration. Median of ${subtreeMs.length} run(s), readers taking turns. The 0.25% and 10% rows (one topic of the subtree; ten subtrees in one filter) chart recovery time by selectivity in \`--report\`.`,
      `Ratio full-stream / subtree: ${formatRatio(ratio)}.`,
    );
    if (recoveriesBefore !== null && recoveriesAfter !== null) {
      notes.push(
        `Broker: ${recoveriesAfter.tip - recoveriesBefore.tip} tip recoveries, ${recoveriesAfter.disk - recoveriesBefore.disk} disk recoveries during the replays.`,
      );
    }
    targets.push({
      target: "1% subtree replay from the tip ≥ 10x faster than a full-stream filter",
      measured: formatRatio(ratio),
      met: ratio >= 10,
    });
  } finally {
    await server.stop();
  }
  return {
    title: "Tip recovery over TCP: 1% subtree vs full-stream filter",
    columns: replayColumns(),
    rows,
    notes,
    targets,
    series,
  };
}

// ---- 5. Initial recovery from disk ------------------------------------------------------------

async function diskRecoveryScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const { server, fill, restarted } = await diskStream(env, options, "disk-recovery");
  const rows: Row[] = [];
  const notes: string[] = [];
  const series: ChartSeries[] = [];
  try {
    if (restarted !== null) {
      notes.push(
        `The server was stopped (${formatMs(restarted.stopMs)} ms: it sorts the journal into segments) and started again on the same data directory (${formatMs(restarted.startMs)} ms: recovery and refilling its ${formatBytes(options.diskTipBytes)} tip from disk).`,
      );
    }
    const bytes = server.storeBytes();
    const recoveriesBefore = server.recoveries();
    const replays: { filter: string | readonly string[]; label: string }[] = [
      { filter: SUBTREE, label: `${SUBTREE} (1%)` },
      { filter: "**", label: "** filtered by the client" },
      ...SELECTIVITY_FILTERS,
    ];
    const firstMessageMs: number[] = [];
    for (const { filter, label } of replays) {
      const cold = await server.dropCaches();
      env.progress(`disk-recovery: ${label} from seq ${fill.firstSeq}`);
      const ioBefore = env.io();
      const storeReadBefore = server.storeBytesRead();
      const result = await replay(env, server.url, filter, fill.firstSeq);
      const storeReadAfter = server.storeBytesRead();
      const ioAfter = env.io();
      firstMessageMs.push(result.firstMessageMs);
      rows.push({
        ...replayRow(label, result, result.wallMs, 1),
        pageCache: cold ? "dropped" : "warm",
        storeReadBytes:
          storeReadBefore === null || storeReadAfter === null
            ? null
            : storeReadAfter - storeReadBefore,
        storageReadBytes:
          ioBefore === null || ioAfter === null
            ? null
            : ioAfter.storageReadBytes - ioBefore.storageReadBytes,
        readCallBytes:
          ioBefore === null || ioAfter === null
            ? null
            : ioAfter.readCallBytes - ioBefore.readCallBytes,
      });
    }
    const recoveriesAfter = server.recoveries();
    series.push(
      selectivitySeries(
        "disk after a restart, page cache dropped (disk-recovery)",
        options.diskMessages,
        rows,
      ),
      {
        chart: "first-message",
        name: "from disk after a restart (disk-recovery)",
        points: [
          { x: "1% subtree", y: firstMessageMs[0] },
          { x: "** (the whole stream)", y: firstMessageMs[1] },
        ],
      },
    );
    notes.push(
      `Stream: ${options.diskMessages.toLocaleString("en-US")} messages of ${options.diskPayloadBytes} B over ${STREAM_PARTITIONS} partitions (${formatBytes(options.diskMessages * options.diskPayloadBytes)} of payload) behind a ${formatBytes(options.diskTipBytes)} tip; every reader starts at seq ${fill.firstSeq}, the oldest message, on a fresh connection with the page cache dropped first.`,
    );
    if (bytes !== null)
      notes.push(
        `On disk before the replays: ${formatBytes(bytes.segments)} in segments, ${formatBytes(bytes.journals)} in journals.`,
      );
    if (recoveriesBefore !== null && recoveriesAfter !== null) {
      notes.push(
        `Broker: ${recoveriesAfter.disk - recoveriesBefore.disk} disk recoveries, ${recoveriesAfter.tip - recoveriesBefore.tip} tip recoveries during the replays.`,
      );
    }
    notes.push(
      "store read: bytes the store's readers read from segment and journal files (store stats); storage read: bytes this process read from the block device (/proc/self/io read_bytes; 0 when the page cache served them); read(): bytes through read syscalls, files and sockets of server and client alike (rchar).",
    );
  } finally {
    await server.stop();
  }
  return {
    title: "Initial recovery from disk: 1% subtree from the oldest message",
    columns: [
      ...replayColumns(),
      { key: "pageCache", header: "page cache" },
      { key: "storeReadBytes", header: "store read", format: formatBytes },
      { key: "storageReadBytes", header: "storage read", format: formatBytes },
      { key: "readCallBytes", header: "read()", format: formatBytes },
    ],
    rows,
    notes,
    targets: [],
    series,
  };
}

// ---- The herd: many clients replaying their own 1% subtree at once ----------------------------

/** One herd client's replay, timed from the common start (before it connected). */
interface HerdClient {
  delivered: number;
  firstMessageMs: number;
  doneMs: number;
}

async function herdScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const { server, fill } = await diskStream(env, options, "herd");
  const rows: Row[] = [];
  const notes: string[] = [];
  const targets: TargetCheck[] = [];
  const series: ChartSeries[] = [];
  try {
    const coldWhole = await server.dropCaches();
    env.progress(`herd: one client replaying ** from seq ${fill.firstSeq}`);
    const whole = await replay(env, server.url, "**", fill.firstSeq);
    const wholeRate = perSecond(whole.delivered, whole.wallMs);
    rows.push({
      readers: "1 client, ** (the whole stream)",
      delivered: whole.delivered,
      wallMs: whole.wallMs,
      perSecond: wholeRate,
      medianMs: whole.wallMs,
      slowestMs: whole.wallMs,
      spread: 1,
      firstMessageMs: null,
      pageCache: coldWhole ? "dropped" : "warm",
    });
    const coldHerd = await server.dropCaches();
    const count = options.herdReaders;
    env.progress(`herd: ${count} clients, each replaying its own 1% subtree`);
    const started = env.nowMs();
    const clients = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        herdClient(env, server.url, `bench/p${i % STREAM_PARTITIONS}/**`, fill.firstSeq, started),
      ),
    );
    const done = clients.map((client) => client.doneMs);
    const delivered = clients.reduce((sum, client) => sum + client.delivered, 0);
    const slowest = Math.max(...done);
    const middle = median(done);
    const aggregate = perSecond(delivered, slowest);
    rows.push({
      readers: `${count} clients, each its own 1% subtree`,
      delivered,
      wallMs: slowest,
      perSecond: aggregate,
      medianMs: middle,
      slowestMs: slowest,
      spread: slowest / middle,
      firstMessageMs: median(clients.map((client) => client.firstMessageMs)),
      pageCache: coldHerd ? "dropped" : "warm",
    });
    series.push(
      {
        chart: "readers-throughput",
        name: "replay from disk: 1 client reading **, N clients 1% each (herd)",
        points: [
          { x: 1, y: wholeRate },
          { x: count, y: aggregate },
        ],
      },
      {
        chart: "first-message",
        name: `herd of ${count}, from its common start (median client)`,
        points: [{ x: "1% subtree", y: median(clients.map((client) => client.firstMessageMs)) }],
      },
    );
    const expected = Math.round(options.diskMessages / STREAM_PARTITIONS);
    const short = clients.filter((client) => Math.abs(client.delivered - expected) > 1).length;
    notes.push(
      `Stream: ${options.diskMessages.toLocaleString("en-US")} messages of ${options.diskPayloadBytes} B over ${STREAM_PARTITIONS} partitions behind a ${formatBytes(options.diskTipBytes)} tip, after a restart; every client starts at seq ${fill.firstSeq}, the oldest message, and reads until caught up (disk, then tip). Client k reads bench/p{k mod ${STREAM_PARTITIONS}}/**; all connect at once, times from that common start.`,
      short === 0
        ? `Every client got its subtree whole (${expected.toLocaleString("en-US")} messages each).`
        : `${short} clients got a count other than ${expected} (the stream was not spread evenly).`,
    );
    targets.push(
      {
        target: "herd aggregate msg/s >= 50% of one client reading the whole stream",
        measured: `${formatSi(aggregate)} vs ${formatSi(wholeRate)} (${formatRatio(aggregate / wholeRate)})`,
        met: aggregate >= 0.5 * wholeRate,
      },
      {
        target: "slowest client <= 3x the median one",
        measured: `${formatMs(slowest)} ms vs ${formatMs(middle)} ms (${formatRatio(slowest / middle)})`,
        met: slowest <= 3 * middle,
      },
    );
  } finally {
    await server.stop();
  }
  return {
    title:
      "The herd: many clients at once, each replaying its own 1% subtree from the oldest message",
    columns: [
      { key: "readers", header: "readers" },
      { key: "delivered", header: "messages delivered" },
      { key: "wallMs", header: "wall ms (last done)", format: formatMs },
      { key: "perSecond", header: "aggregate msg/s", format: formatSi },
      { key: "medianMs", header: "median client ms", format: formatMs },
      { key: "slowestMs", header: "slowest client ms", format: formatMs },
      { key: "spread", header: "slowest / median", format: formatRatio },
      { key: "firstMessageMs", header: "median first message ms", format: formatMs },
      { key: "pageCache", header: "page cache" },
    ],
    rows,
    notes,
    targets,
    series,
  };
}

/** Connects, subscribes `filter` from `fromSeq` until caught up; times from `startedMs`. */
async function herdClient(
  env: BenchEnv,
  url: string,
  filter: string,
  fromSeq: number,
  startedMs: number,
): Promise<HerdClient> {
  const client = await env.connect(url);
  try {
    let delivered = 0;
    let firstMessageMs = Number.NaN;
    for await (const _ of client.subscribe(filter, { from: fromSeq, untilCaughtUp: true })) {
      if (delivered === 0) firstMessageMs = env.nowMs() - startedMs;
      delivered++;
    }
    return { delivered, firstMessageMs, doneMs: env.nowMs() - startedMs };
  } finally {
    await client.close();
  }
}

/**
 * A server holding the disk scenarios' stream, stopped and started again on its data when it can
 * be (its tip refilled from disk, the rest only on disk); the caller stops the server it gets.
 */
async function diskStream(
  env: BenchEnv,
  options: BenchOptions,
  label: string,
): Promise<{
  server: BenchServer;
  fill: { firstSeq: number; lastSeq: number };
  restarted: { stopMs: number; startMs: number } | null;
}> {
  const server = await env.server({ fsync: "interval", tipBytes: options.diskTipBytes });
  try {
    const fill = await fillStream(
      env,
      server.url,
      options.diskMessages,
      options.diskPayloadBytes,
      label,
    );
    if (server.restart === null) return { server, fill, restarted: null };
    env.progress(`${label}: restarting the server on the same data`);
    const restarted = await server.restart();
    return { server: restarted.server, fill, restarted };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

// ---- The seed's headline: indexed recovery against the linear pass, CPU per delivered message --

/** One run of the recovery mix on one server. */
interface MixRun {
  cpuMs: number;
  elapsedMs: number;
  liveDelivered: number;
  recoveryDelivered: number;
  recoveries: number;
  tipRecoveries: number | null;
  diskRecoveries: number | null;
}

/**
 * A production-like mix (the seed: "CPU per delivered message"): of `mixReaders` readers, 10%
 * recover their own 1% subtree from the tip again and again (a fresh connection each time, from
 * half a tip back, until caught up) while the other 90% read their own 1% subtree live and a
 * paced publisher feeds the stream. Run on two servers holding the same stream, one reading the
 * tip with the planned (indexed) strategy, one forced to the linear pass; the CPU of this process
 * (server and clients) per delivered message is compared.
 */
async function recoveryMixScenario(
  env: BenchEnv,
  options: BenchOptions,
): Promise<Omit<ScenarioResult, "scenario" | "elapsedMs">> {
  const strategies = ["planned", "linear"] as const;
  const title = "The recovery mix: CPU per delivered message, indexed recovery vs the linear pass";
  const columns: Column[] = [
    { key: "strategy", header: "tip reads" },
    { key: "recoveries", header: "recoveries completed" },
    { key: "tipRecoveries", header: "started from the tip" },
    { key: "diskRecoveries", header: "started from disk" },
    { key: "liveDeliveredPerSecond", header: "live msg/s", format: formatSi },
    { key: "recoveryDeliveredPerSecond", header: "recovered msg/s", format: formatSi },
    { key: "cpuShare", header: "CPU busy %", format: (v) => (v * 100).toFixed(0) },
    { key: "cpuNsPerMessage", header: "CPU ns per delivered msg", format: (v) => v.toFixed(0) },
    { key: "runs", header: "runs" },
  ];
  const servers: BenchServer[] = [];
  try {
    for (const strategy of strategies)
      servers.push(
        await env.server({
          fsync: "interval",
          tipBytes: options.tipBytes,
          tipReadStrategy: strategy,
        }),
      );
    if (servers[0].fsync === "external" || servers[0].recoveries() === null)
      return {
        title,
        columns,
        rows: [],
        notes: [
          "Needs the in-process servers (their tip read strategy is forced): not with --url.",
        ],
        targets: [],
      };
    const recordBytes = RING_RECORD_HEADER_BYTES + ((options.tipPayloadBytes + 7) & ~7);
    const messages = Math.floor((0.9 * options.tipBytes) / recordBytes);
    const fills = [];
    for (const [i, server] of servers.entries())
      fills.push(
        await fillStream(
          env,
          server.url,
          messages,
          options.tipPayloadBytes,
          `recovery-mix (${strategies[i]})`,
        ),
      );
    const runs: MixRun[][] = strategies.map(() => []);
    for (let rep = 0; rep < options.repeat; rep++) {
      // Alternating which strategy runs first, so drift spreads over both.
      const order = rep % 2 === 0 ? [0, 1] : [1, 0];
      for (const i of order) {
        env.progress(
          `recovery-mix: ${strategies[i]} tip reads, ${options.mixReaders} readers, run ${rep + 1}/${options.repeat}`,
        );
        runs[i].push(await mixRun(env, servers[i], fills[i], messages, options));
      }
    }
    const rows: Row[] = strategies.map((strategy, i) => {
      const list = runs[i];
      const per = (f: (run: MixRun) => number) => median(list.map(f));
      return {
        strategy: strategy === "planned" ? "planned (indexed for 1%)" : "linear pass (forced)",
        recoveries: per((run) => run.recoveries),
        tipRecoveries: per((run) => run.tipRecoveries ?? Number.NaN),
        diskRecoveries: per((run) => run.diskRecoveries ?? Number.NaN),
        liveDeliveredPerSecond: per((run) => perSecond(run.liveDelivered, run.elapsedMs)),
        recoveryDeliveredPerSecond: per((run) => perSecond(run.recoveryDelivered, run.elapsedMs)),
        cpuShare: per((run) => run.cpuMs / run.elapsedMs),
        cpuNsPerMessage: per(
          (run) => (run.cpuMs * 1e6) / (run.liveDelivered + run.recoveryDelivered),
        ),
        runs: list.length,
      };
    });
    const saved = median(
      runs[0].map((run, rep) => {
        const indexed = (run.cpuMs * 1e6) / (run.liveDelivered + run.recoveryDelivered);
        const other = runs[1][rep];
        const linear = (other.cpuMs * 1e6) / (other.liveDelivered + other.recoveryDelivered);
        return 1 - indexed / linear;
      }),
    );
    const recovering = Math.max(1, Math.round(options.mixReaders / 10));
    return {
      title,
      columns,
      rows,
      notes: [
        `Two servers in this process hold the same stream: ${messages.toLocaleString("en-US")} messages of ${options.tipPayloadBytes} B over ${STREAM_PARTITIONS} partitions, 90% of a ${formatBytes(options.tipBytes)} tip; one reads its tip with the planned strategy (indexed for a 1% subtree), the other is forced to the linear pass (every record from the start seq tested against the filter).`,
        `${options.mixReaders} readers: ${recovering} (10%) each recover their own 1% subtree bench/p{k}/** from half a tip back (${Math.floor(messages / 2).toLocaleString("en-US")} messages), on a fresh connection, until caught up, then again; the other ${options.mixReaders - recovering} read their own 1% subtree live while one publisher sends ${formatSi(options.mixRate)} msg/s over the stream's topics. Measured ${options.durationMs} ms after a ${options.warmupMs} ms warm-up; medians of ${options.repeat} run(s), the strategies taking turns.`,
        `CPU: this process (servers and clients, all threads) over the window, per message delivered to any reader. CPU saved by indexed recovery (median of the runs' 1 - indexed / linear): ${(saved * 100).toFixed(0)}%.`,
      ],
      targets: [
        {
          target: "indexed recovery saves >= 30% CPU per delivered message (the seed's figure)",
          measured: `${(saved * 100).toFixed(0)}% saved`,
          met: saved >= 0.3,
        },
      ],
    };
  } finally {
    for (const server of servers) await server.stop();
  }
}

/** One measured window of the mix on `server` (its stream filled as `fill`). */
async function mixRun(
  env: BenchEnv,
  server: BenchServer,
  fill: { firstSeq: number; lastSeq: number },
  messages: number,
  options: BenchOptions,
): Promise<MixRun> {
  const recovering = Math.max(1, Math.round(options.mixReaders / 10));
  const live = options.mixReaders - recovering;
  const subtreeOf = (reader: number) => `bench/p${reader % STREAM_PARTITIONS}/**`;
  const subscribers = await liveSubscribers(
    env,
    server.url,
    live,
    () => {},
    (i) => subtreeOf(recovering + i),
  );
  const publisher = await env.connect(server.url);
  let stopped = false;
  let recoveryDelivered = 0;
  let recoveries = 0;
  let failure: unknown = null;
  // Half a tip back: in the ring for the whole run (the publisher adds far less than that).
  const from = Math.max(fill.firstSeq, fill.lastSeq + 1 - Math.floor(messages / 2));
  const recoverer = async (reader: number) => {
    while (!stopped) {
      const client = await env.connect(server.url);
      try {
        const subscription = client.subscribe(subtreeOf(reader), { from, untilCaughtUp: true });
        for await (const frame of subscription.frames()) recoveryDelivered += frame.remaining;
        recoveries++;
      } finally {
        await client.close();
      }
    }
  };
  try {
    const started = env.nowMs();
    const publishing = pacedPublisher(env, publisher, {
      rate: options.mixRate,
      payloadBytes: options.tipPayloadBytes,
      startMs: started,
      untilMs: Infinity,
      stamp: false,
      topicOf: (i) => streamTopic(fill.lastSeq + 1 - fill.firstSeq + i),
    });
    const recoverers = Array.from({ length: recovering }, (_, reader) =>
      recoverer(reader).catch((error: unknown) => {
        failure ??= error;
      }),
    );
    const snapshot = () => ({
      cpuMs: env.cpuMs() ?? Number.NaN,
      live: subscribers.delivered(),
      recovered: recoveryDelivered,
      recoveries,
      broker: server.recoveries(),
      at: env.nowMs(),
    });
    await env.sleep(options.warmupMs);
    const before = snapshot();
    await env.sleep(options.durationMs);
    const after = snapshot();
    stopped = true;
    publishing.stop();
    await publishing.done;
    await Promise.all(recoverers);
    if (failure !== null) throw failure;
    return {
      cpuMs: after.cpuMs - before.cpuMs,
      elapsedMs: after.at - before.at,
      liveDelivered: after.live - before.live,
      recoveryDelivered: after.recovered - before.recovered,
      recoveries: after.recoveries - before.recoveries,
      tipRecoveries:
        before.broker === null || after.broker === null
          ? null
          : after.broker.tip - before.broker.tip,
      diskRecoveries:
        before.broker === null || after.broker === null
          ? null
          : after.broker.disk - before.broker.disk,
    };
  } finally {
    stopped = true;
    await publisher.close();
    await subscribers.close();
  }
}

// ---- Shared: filling a stream, replaying it -----------------------------------------------------

function streamTopic(i: number): string {
  const partition = i % STREAM_PARTITIONS;
  const topic = Math.floor(i / STREAM_PARTITIONS) % STREAM_TOPICS_PER_PARTITION;
  return `bench/p${partition}/t${topic}`;
}

/** Publishes `count` messages of the recovery stream shape; returns the seq of the first. */
async function fillStream(
  env: BenchEnv,
  url: string,
  count: number,
  payloadBytes: number,
  label: string,
): Promise<{ firstSeq: number; lastSeq: number }> {
  const client = await env.connect(url);
  try {
    const payload = new Uint8Array(payloadBytes).fill(0x62);
    const topics = Array.from({ length: STREAM_PARTITIONS * STREAM_TOPICS_PER_PARTITION }, (_, i) =>
      streamTopic(i),
    );
    const period = topics.length;
    let firstSeq = Infinity;
    let lastSeq = 0;
    let sent = 0;
    const inFlight = new Set<Promise<void>>();
    const started = env.nowMs();
    while (sent < count) {
      const size = Math.min(FILL_BATCH, count - sent);
      const messages = Array.from({ length: size }, (_, k) => ({
        topic: topics[(sent + k) % period],
        payload,
      }));
      sent += size;
      const ack = client.publishBatch(messages).then((result) => {
        firstSeq = Math.min(firstSeq, result.firstSeq);
        lastSeq = Math.max(lastSeq, result.firstSeq + result.count - 1);
        inFlight.delete(ack);
      });
      inFlight.add(ack);
      if (inFlight.size >= 8) await Promise.race(inFlight);
      if ((sent / FILL_BATCH) % 64 === 0)
        env.progress(
          `${label}: filling ${formatSi(sent)} / ${formatSi(count)} messages (${formatSi(perSecond(sent, env.nowMs() - started))} msg/s)`,
        );
    }
    await Promise.all(inFlight);
    return { firstSeq, lastSeq };
  } finally {
    await client.close();
  }
}

interface ReplayResult {
  delivered: number;
  matching: number;
  matchingPayloadBytes: number;
  wallMs: number;
  /** subscribe() to the first message (NaN when none came). */
  firstMessageMs: number;
}

/** Subscribes to `filter` from `fromSeq` until caught up, on a fresh connection; counts the 1% subtree's messages. */
async function replay(
  env: BenchEnv,
  url: string,
  filter: string | readonly string[],
  fromSeq: number,
): Promise<ReplayResult> {
  const client = await env.connect(url);
  try {
    let delivered = 0;
    let matching = 0;
    let matchingPayloadBytes = 0;
    let firstMessageMs = Number.NaN;
    const started = env.nowMs();
    const subscription: ClientSubscription = client.subscribe(filter, {
      from: fromSeq,
      untilCaughtUp: true,
    });
    for await (const message of subscription) {
      if (delivered === 0) firstMessageMs = env.nowMs() - started;
      delivered++;
      if (message.topic.startsWith(SUBTREE_PREFIX)) {
        matching++;
        matchingPayloadBytes += message.payload.length;
      }
    }
    return {
      delivered,
      matching,
      matchingPayloadBytes,
      wallMs: env.nowMs() - started,
      firstMessageMs,
    };
  } finally {
    await client.close();
  }
}

function replayRow(reader: string, result: ReplayResult, wallMs: number, runs: number): Row {
  return {
    reader,
    delivered: result.delivered,
    matching: result.matching,
    wallMs,
    matchingPerSecond: perSecond(result.matching, wallMs),
    matchingPayloadBytesPerSecond: perSecond(result.matchingPayloadBytes, wallMs),
    runs,
  };
}

/** The first-message times of `runs`. */
function firsts(runs: readonly ReplayResult[]): number[] {
  return runs.map((run) => run.firstMessageMs);
}

/** A recovery-by-selectivity series: each replay row's share of `messages` (%) and wall time. */
function selectivitySeries(name: string, messages: number, rows: readonly Row[]): ChartSeries {
  return {
    chart: "recovery-selectivity",
    name,
    points: rows.map((row) => ({
      x: ((row.delivered as number) / messages) * 100,
      y: row.wallMs as number,
    })),
  };
}

function replayColumns(): Column[] {
  return [
    { key: "reader", header: "reader" },
    { key: "delivered", header: "messages delivered" },
    { key: "matching", header: "1% subtree messages" },
    { key: "wallMs", header: "wall ms", format: formatMs },
    { key: "matchingPerSecond", header: "subtree msg/s", format: formatSi },
    { key: "matchingPayloadBytesPerSecond", header: "subtree payload MB/s", format: formatMBps },
    { key: "runs", header: "runs" },
  ];
}
