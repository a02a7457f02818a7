/**
 * Issue 32's two targets stated against this machine's own limits, each bound measured in the same
 * run just before (or beside) the figure it bounds, and reported as a ratio:
 *
 *   durability  64 publishers, one message in flight each (`publish`, await the ack, again), to a
 *               server with `--fsync always`; the bound: 64 messages per (append + fdatasync of
 *               one group's bytes) — 64 records of this run's size, timed by src/bench/fsync_bound.ts
 *               on the file system of the servers' data directories just before each run. Target:
 *               ≥ 0.70 of the bound. Beside it, what the same 64 clients get from a server that
 *               only answers (the trivial relay's echo), and the bound of one such round plus one
 *               fsync round: how far the round trips alone keep this machine from the disk's bound.
 *   latency     p99 publish → deliver at RATE msg/s (64 B) to 10 subscribers of `**` (the latency
 *               scenario of `aria bench`, fsync interval), beside a trivial Bun server that only
 *               forwards the publisher's bytes to 10 subscribers, paced and stamped the same way,
 *               in the same process (the server of `aria bench` runs in-process too): the host's
 *               stalls hit both. Runs alternate which goes first. Target: Aria's p99 ≤ 2x the
 *               relay's.
 *
 * Every run prints its figures; the summary gives the medians and the median of the per-run
 * ratios. Servers and data directories are made and removed here (parent: --dir, default tmpdir).
 * With --bin B, each server (Aria's: `B serve`; the relay: this script with --relay-serve) runs
 * in a process of its own instead, so on a 2-core machine server and clients each get a core.
 *
 *   npx bun bench/machine_bounds.ts [--only durability,latency] [--runs 5] [--duration 3s]
 *     [--rate 100000] [--subscribers 10] [--publishers 64] [--dir DIR] [--bin dist/aria]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Socket } from "bun";
import { boundRate, type FsyncBound, measureFsyncBound } from "../src/bench/fsync_bound.ts";
import { type BenchEnv, benchOptions, type Row, runScenario } from "../src/bench/mod.ts";
import { median } from "../src/bench/stats.ts";
import { parseDuration } from "../src/cli/args.ts";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { benchEnv, defaultParentDir } from "../src/server/mod.ts";
import { recordBytes } from "../src/store/record.ts";

const { values } = parseArgs({
  options: {
    only: { type: "string" },
    runs: { type: "string" },
    duration: { type: "string" },
    rate: { type: "string" },
    subscribers: { type: "string" },
    publishers: { type: "string" },
    dir: { type: "string" },
    bin: { type: "string" },
    "relay-serve": { type: "boolean" },
  },
});
const PARTS = (values.only ?? "durability,latency").split(",");
const RUNS = Number(values.runs ?? 5);
const DURATION_MS =
  values.duration === undefined ? 3000 : parseDuration(values.duration, "--duration");
const RATE = Number(values.rate ?? 100_000);
const SUBSCRIBERS = Number(values.subscribers ?? 10);
const PUBLISHERS = Number(values.publishers ?? 64);
const PARENT = values.dir ?? defaultParentDir();
const WARMUP_MS = 1000;
const PAYLOAD_BYTES = 64;
/** Timed rounds of the fsync bound before each durability run. */
const BOUND_ROUNDS = 500;
/** An event-loop delay past this counts as late (withCpu). */
const LAG_MS = 2;
/** The trivial relay's message: 64 B, its first 8 the send time (µs, f64). */
const RELAY_MESSAGE_BYTES = 64;

const BIN = values.bin;
const progress = (text: string) => process.stderr.write(`  ${text}\n`);
const env: BenchEnv = benchEnv({ url: null, parentDir: PARENT, progress });

/** A server process; `lines` are its first stdout lines (its URLs). */
interface Child {
  lines: string[];
  stop(): Promise<void>;
}

/** Runs argv until it printed `count` stdout lines; stop() ends it and removes `dir`. */
/** CPU use and run-queue wait of the last server process, over its life (shares of its time). */
let lastServer: { cpuShare: number; waitShare: number } | null = null;

/** What the last server process used (null: no server process ran since it was last cleared). */
function lastServerUsage(): { cpuShare: number; waitShare: number } | null {
  return lastServer;
}

/** CPU time (utime + stime) and its main thread's run-queue wait of process `pid`, ms. */
function processUsageMs(pid: number): { cpuMs: number; waitMs: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 (1-based, counting pid and comm): clock ticks of 10 ms.
    const cpuMs = (Number(fields[11]) + Number(fields[12])) * 10;
    const waitMs = Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e6;
    return { cpuMs, waitMs };
  } catch {
    return { cpuMs: 0, waitMs: 0 };
  }
}

async function spawnServer(argv: string[], count: number, dir?: string): Promise<Child> {
  const child = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "inherit" });
  const spawned = env.nowMs();
  const reader = child.stdout.getReader();
  let text = "";
  const deadline = Date.now() + 15_000;
  while (text.split("\n").length <= count && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const lines = text.split("\n").slice(0, count);
  if (lines.length < count || lines.some((line) => line === "")) {
    child.kill("SIGKILL");
    throw new Error(`${argv.join(" ")} printed ${JSON.stringify(text)}`);
  }
  return {
    lines,
    stop: async () => {
      const usage = processUsageMs(child.pid);
      const lived = env.nowMs() - spawned;
      lastServer = { cpuShare: usage.cpuMs / lived, waitShare: usage.waitMs / lived };
      // SIGTERM first: a server stops cleanly (and a profiler wrapped around it writes out).
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await child.exited;
      clearTimeout(timer);
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A fresh Aria server and the env to drive it: in this process, or with --bin a `serve` process
 * (the env then sees it as an external server).
 */
async function ariaServer(
  fsync: "always" | "interval",
): Promise<{ env: BenchEnv; url: string; stop(): Promise<void> }> {
  if (BIN === undefined) {
    const server = await env.server({ fsync, tipBytes: 256 * 1024 * 1024 });
    return { env, url: server.url, stop: () => server.stop() };
  }
  const dir = mkdtempSync(join(PARENT, "aria-machine-bounds-"));
  const child = await spawnServer(
    [BIN, "serve", "--port", "0", "--admin-port", "0", "--data-dir", dir, "--fsync", fsync].concat([
      "--tip-bytes",
      "256MiB",
      "--log-level",
      "warn",
    ]),
    2,
    dir,
  );
  const url = child.lines[0];
  return { env: benchEnv({ url, parentDir: PARENT, progress }), url, stop: child.stop };
}
const fmt = (value: number) => Math.round(value).toLocaleString("en");

// ---- Durability at the disk's limit -----------------------------------------------------------

interface DurabilityRun {
  bound: FsyncBound;
  boundRate: number;
  /** PUBLISHERS clients × 1 in flight against the trivial server's one-byte acks, msg/s. */
  echoRate: number;
  /** PUBLISHERS messages per (one echo round + one fsync round). */
  serialRate: number;
  rate: number;
  ratio: number;
}

/** The trivial relay server: in this process, or with --bin in a process of its own. */
async function relay(): Promise<{ port: number; stop(): Promise<void> }> {
  if (BIN === undefined) {
    const server = relayServer();
    return { port: server.port, stop: async () => server.stop(true) };
  }
  const child = await spawnServer([process.execPath, import.meta.path, "--relay-serve"], 1);
  return { port: Number(child.lines[0]), stop: child.stop };
}

/**
 * What PUBLISHERS clients with one message in flight each get from a server that only answers
 * (the relay's echo: no parsing, no storage), msg/s over `ms` after a short warm-up: the cost of
 * the round trips themselves on this machine.
 */
async function echoRate(ms: number): Promise<number> {
  const server = await relay();
  const message = new Uint8Array(RELAY_MESSAGE_BYTES).fill(0x61);
  let counting = false;
  let counted = 0;
  let running = true;
  const clients = await Promise.all(
    Array.from({ length: PUBLISHERS }, () =>
      Bun.connect({
        hostname: "127.0.0.1",
        port: server.port,
        socket: {
          data(socket, chunk) {
            if (counting) counted += chunk.length;
            if (running) for (let i = 0; i < chunk.length; i++) socket.write(message);
          },
        },
      }),
    ),
  );
  try {
    for (const client of clients) client.write(new Uint8Array([0x45, ...message]));
    await env.sleep(300);
    counting = true;
    const started = env.nowMs();
    await env.sleep(ms);
    counting = false;
    return (counted * 1000) / (env.nowMs() - started);
  } finally {
    running = false;
    for (const client of clients) client.end();
    await server.stop();
  }
}

const durableTopic = (publisher: number) => `bench/durable/p${publisher % 16}`;

async function durabilityRun(): Promise<DurabilityRun> {
  const server = await ariaServer("always");
  const clients = await Promise.all(
    Array.from({ length: PUBLISHERS }, () => server.env.connect(server.url)),
  );
  try {
    // The bound, just before: one group is one message of each publisher.
    const recordOf = (publisher: number) =>
      recordBytes(new TextEncoder().encode(durableTopic(publisher)).length, PAYLOAD_BYTES);
    const groupBytes = Array.from({ length: PUBLISHERS }, (_, p) => recordOf(p)).reduce(
      (sum, bytes) => sum + bytes,
      0,
    );
    const probeDir = mkdtempSync(join(PARENT, "aria-fsync-bound-"));
    let bound: FsyncBound;
    try {
      bound = await measureFsyncBound(new BunDisk(probeDir), {
        roundBytes: groupBytes,
        rounds: BOUND_ROUNDS,
        nowMs: env.nowMs,
      });
    } finally {
      rmSync(probeDir, { recursive: true, force: true });
    }
    const echo = await echoRate(1000);
    const payload = new Uint8Array(PAYLOAD_BYTES).fill(0x61);
    const started = env.nowMs();
    const measureFrom = started + WARMUP_MS;
    const until = measureFrom + DURATION_MS;
    let counted = 0;
    await Promise.all(
      clients.map(async (client, p) => {
        const topic = durableTopic(p);
        for (let now = env.nowMs(); now < until; now = env.nowMs()) {
          await client.publish(topic, payload);
          if (now >= measureFrom) counted++;
        }
      }),
    );
    const rate = (counted * 1000) / DURATION_MS;
    const limit = boundRate(bound, PUBLISHERS);
    const serialRate = PUBLISHERS / (PUBLISHERS / echo + bound.medianUs / 1e6);
    return { bound, boundRate: limit, echoRate: echo, serialRate, rate, ratio: rate / limit };
  } finally {
    await Promise.all(clients.map((client) => client.close()));
    await server.stop();
  }
}

// ---- Latency at the machine's limit -----------------------------------------------------------

/** Latency percentiles of one run (ms), and how many samples they are of. */
interface Latency {
  p50Ms: number;
  p99Ms: number;
  samples: number;
}

/**
 * `run`, and the CPU this process used meanwhile as a share of one core (with --bin the server's
 * own process is not counted).
 */
async function withCpu<T>(run: () => Promise<T>): Promise<T & { cpu: string }> {
  const wall = env.nowMs();
  const cpu = process.cpuUsage();
  const waited = runQueueWaitMs();
  lastServer = null;
  // This event loop's lateness: a 1 ms timer's delay beyond its due time, the time of the delays
  // over LAG_MS summed (what every message handled by this thread then waited, at least).
  let due = env.nowMs() + 1;
  let lateMs = 0;
  let lateMax = 0;
  const ticker = setInterval(() => {
    const now = env.nowMs();
    const late = now - due;
    if (late > LAG_MS) lateMs += late;
    lateMax = Math.max(lateMax, late);
    due = now + 1;
  }, 1);
  const result = await run();
  clearInterval(ticker);
  const used = process.cpuUsage(cpu);
  const ms = env.nowMs() - wall;
  const percent = (share: number) => `${(share * 100).toFixed(0)}%`;
  const here =
    `this process ${percent((used.user + used.system) / 1000 / ms)} of a core, waited for a ` +
    `CPU ${percent((runQueueWaitMs() - waited) / ms)} of the time, its event loop late > ` +
    `${LAG_MS} ms for ${percent(lateMs / ms)} of it (longest ${lateMax.toFixed(0)} ms)`;
  const server = lastServerUsage();
  return {
    ...result,
    cpu:
      server === null
        ? here
        : `${here}; the server process ${percent(server.cpuShare)}, waited ${percent(server.waitShare)}`,
  };
}

/**
 * Time this process's main thread spent runnable but waiting for a CPU, ms (the second field of
 * /proc/self/schedstat); 0 where there is none. Host CPU stalls and other processes show there.
 */
function runQueueWaitMs(): number {
  try {
    return Number(readFileSync("/proc/self/schedstat", "utf8").split(" ")[1]) / 1e6;
  } catch {
    return 0;
  }
}

/** Aria's p99 (ms) at RATE to SUBSCRIBERS: the latency scenario of `aria bench`, one run. */
async function ariaLatencyP99(): Promise<Latency> {
  const options = {
    ...benchOptions({ durationMs: DURATION_MS, repeat: 1, fsync: ["interval"] }),
    latencyRates: [RATE],
    latencySubscribers: SUBSCRIBERS,
  };
  if (BIN === undefined) return latencyRow(await runScenario("latency", env, options));
  const server = await ariaServer("interval");
  try {
    return latencyRow(await runScenario("latency", server.env, options));
  } finally {
    await server.stop();
  }
}

function latencyRow(result: { rows: Row[] }): Latency {
  const row = result.rows.find((r) => r.rate === RATE);
  if (row === undefined) throw new Error("the latency scenario gave no row");
  return { p50Ms: row.p50Ms as number, p99Ms: row.p99Ms as number, samples: row.samples as number };
}

/** The nearest-rank percentile `q` of `values` (sorted here). */
function percentile(values: Float64Array, q: number): number {
  const sorted = values.slice().sort();
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

/**
 * The trivial relay: the first byte of a connection says what it is (P: the publisher, E: an
 * echo client, else a subscriber); whatever the publisher sends next goes to every subscriber as
 * it came; an echo client gets one byte back per RELAY_MESSAGE_BYTES it sent.
 */
function relayServer() {
  // Per subscriber: the bytes its socket did not take yet (written on drain, in order).
  type Role = {
    role: "publisher" | "subscriber" | "echo" | null;
    backlog: Uint8Array[];
    /** Echo: bytes of the message begun but not yet whole. */
    partial: number;
  };
  const subscribersOut: Socket<Role>[] = [];
  const forward = (out: Socket<Role>, bytes: Uint8Array) => {
    if (out.data.backlog.length > 0) return void out.data.backlog.push(bytes.slice());
    const wrote = out.write(bytes);
    if (wrote < bytes.length) out.data.backlog.push(bytes.slice(wrote));
  };
  return Bun.listen<Role>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { role: null, backlog: [], partial: 0 };
      },
      data(socket, chunk) {
        let bytes: Uint8Array = chunk;
        if (socket.data.role === null) {
          socket.data.role =
            bytes[0] === 0x50 ? "publisher" : bytes[0] === 0x45 ? "echo" : "subscriber";
          if (socket.data.role === "subscriber") subscribersOut.push(socket);
          bytes = bytes.subarray(1);
        }
        if (socket.data.role === "publisher" && bytes.length > 0)
          for (const out of subscribersOut) forward(out, bytes);
        if (socket.data.role === "echo") {
          // One byte back per whole message: the acknowledgement of a server that does nothing.
          const total = socket.data.partial + bytes.length;
          socket.data.partial = total % RELAY_MESSAGE_BYTES;
          const acks = Math.floor(total / RELAY_MESSAGE_BYTES);
          if (acks > 0) forward(socket, new Uint8Array(acks));
        }
      },
      drain(socket) {
        const backlog = socket.data.backlog;
        while (backlog.length > 0) {
          const head = backlog[0];
          const wrote = socket.write(head);
          if (wrote < head.length) {
            backlog[0] = head.subarray(wrote);
            return;
          }
          backlog.shift();
        }
      },
    },
  });
}

/**
 * The trivial relay's p99 (ms): a Bun server that writes whatever its publisher connection sends
 * to each of SUBSCRIBERS connections (no parsing, no storage); the publisher paced like `aria
 * bench`'s (every 1 ms the messages due, stamped with the tick's time, in one write).
 */
async function relayLatencyP99(): Promise<Latency> {
  const server = await relay();
  const port = server.port;
  const expected = Math.ceil((1.1 * RATE * DURATION_MS * SUBSCRIBERS) / 1000);
  const samples = new Float64Array(expected);
  let count = 0;
  let measureFromUs = Infinity;
  let measureUntilUs = Infinity;
  const received: number[] = [];
  const stamp = new Float64Array(1);
  const stampBytes = new Uint8Array(stamp.buffer);
  const subscribers = await Promise.all(
    Array.from({ length: SUBSCRIBERS }, (_, index) => {
      received.push(0);
      let pending = new Uint8Array(0);
      return Bun.connect({
        hostname: "127.0.0.1",
        port,
        socket: {
          data(_socket, chunk) {
            const nowUs = performance.now() * 1000;
            let bytes: Uint8Array = chunk;
            if (pending.length > 0) {
              bytes = new Uint8Array(pending.length + chunk.length);
              bytes.set(pending);
              bytes.set(chunk, pending.length);
            }
            let at = 0;
            for (; at + RELAY_MESSAGE_BYTES <= bytes.length; at += RELAY_MESSAGE_BYTES) {
              stampBytes.set(bytes.subarray(at, at + 8));
              const sentUs = stamp[0];
              received[index]++;
              if (sentUs >= measureFromUs && sentUs < measureUntilUs && count < samples.length)
                samples[count++] = nowUs - sentUs;
            }
            pending = bytes.slice(at);
          },
        },
      });
    }),
  );
  for (const subscriber of subscribers) subscriber.write(new Uint8Array([0x53]));
  const publisher = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: { data() {} },
  });
  publisher.write(new Uint8Array([0x50]));
  await env.sleep(50); // the roles reach the server before the first message
  try {
    const started = env.nowMs();
    const measureFrom = started + WARMUP_MS;
    const until = measureFrom + DURATION_MS;
    measureFromUs = measureFrom * 1000;
    measureUntilUs = until * 1000;
    let published = 0;
    const tick = new Uint8Array(RELAY_MESSAGE_BYTES * Math.ceil(RATE / 10)).fill(0x61);
    while (env.nowMs() < until) {
      const now = env.nowMs();
      const due = Math.min(
        Math.floor((RATE * (now - started)) / 1000) - published,
        tick.length / RELAY_MESSAGE_BYTES,
      );
      if (due > 0) {
        stamp[0] = now * 1000;
        for (let i = 0; i < due; i++) tick.set(stampBytes, i * RELAY_MESSAGE_BYTES);
        // Bun.connect's write may take part: the rest is written after the tick's sleep.
        let offset = 0;
        const bytes = tick.subarray(0, due * RELAY_MESSAGE_BYTES);
        while (offset < bytes.length) {
          const wrote = publisher.write(bytes.subarray(offset));
          offset += wrote;
          if (offset < bytes.length) await env.sleep(0);
        }
        published += due;
      }
      await env.sleep(1);
    }
    const drainUntil = env.nowMs() + 10_000;
    while (Math.min(...received) < published && env.nowMs() < drainUntil) await env.sleep(5);
    const measured = samples.subarray(0, count);
    return {
      p50Ms: percentile(measured, 0.5) / 1000,
      p99Ms: percentile(measured, 0.99) / 1000,
      samples: count,
    };
  } finally {
    publisher.end();
    for (const subscriber of subscribers) subscriber.end();
    await server.stop();
  }
}

// ---- Main -------------------------------------------------------------------------------------

if (values["relay-serve"] === true) {
  // The relay in a process of its own (--bin): its port on stdout, then serve until killed.
  console.log(relayServer().port);
  await new Promise(() => {});
}

console.log(`# machine bounds (${new Date().toISOString()}), ${RUNS} runs of ${DURATION_MS} ms`);
if (PARTS.includes("durability")) {
  const runs: DurabilityRun[] = [];
  for (let run = 0; run < RUNS; run++) {
    const got = await withCpu(durabilityRun);
    runs.push(got);
    console.log(
      `durability run ${run + 1}: bound: append + fdatasync of ${fmt(got.bound.roundBytes)} B ` +
        `median ${got.bound.medianUs.toFixed(0)} µs (p90 ${got.bound.p90Us.toFixed(0)}) → ` +
        `${fmt(got.boundRate)} msg/s; fsync always, ${PUBLISHERS} publishers × 1 in flight: ` +
        `${fmt(got.rate)} msg/s = ${got.ratio.toFixed(2)} of the bound (${got.cpu}); ` +
        `trivial echo ${PUBLISHERS} × 1 in flight ${fmt(got.echoRate)} msg/s, so one echo round ` +
        `+ one fsync round: ${fmt(got.serialRate)} msg/s, Aria ${(got.rate / got.serialRate).toFixed(2)} of it`,
    );
  }
  const ratio = median(runs.map((r) => r.ratio));
  console.log(
    `durability: medians of ${RUNS}: bound ${fmt(median(runs.map((r) => r.boundRate)))} msg/s ` +
      `(fdatasync round ${median(runs.map((r) => r.bound.medianUs)).toFixed(0)} µs), always ` +
      `${fmt(median(runs.map((r) => r.rate)))} msg/s; ratio ${ratio.toFixed(2)} ` +
      `(per run ${runs.map((r) => r.ratio.toFixed(2)).join(", ")}); of one echo round + one ` +
      `fsync round: ${median(runs.map((r) => r.rate / r.serialRate)).toFixed(2)}; target ≥ 0.70: ` +
      `${ratio >= 0.7 ? "met" : "missed"}`,
  );
}
if (PARTS.includes("latency")) {
  const aria: number[] = [];
  const relay: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    // Alternate which goes first, so neither always meets the quieter moment.
    const first = run % 2 === 0 ? await withCpu(ariaLatencyP99) : await withCpu(relayLatencyP99);
    const second = run % 2 === 0 ? await withCpu(relayLatencyP99) : await withCpu(ariaLatencyP99);
    const [a, r] = run % 2 === 0 ? [first, second] : [second, first];
    aria.push(a.p99Ms);
    relay.push(r.p99Ms);
    console.log(
      `latency run ${run + 1}: ${fmt(RATE)} msg/s to ${SUBSCRIBERS} subscribers: Aria p99 ` +
        `${a.p99Ms.toFixed(2)} ms (p50 ${a.p50Ms.toFixed(2)}, ${fmt(a.samples)} samples; ${a.cpu}), ` +
        `trivial relay p99 ${r.p99Ms.toFixed(2)} ms (p50 ${r.p50Ms.toFixed(2)}, ` +
        `${fmt(r.samples)} samples; ${r.cpu}); ratio ${(a.p99Ms / r.p99Ms).toFixed(2)}`,
    );
  }
  const ratios = aria.map((a, i) => a / relay[i]);
  console.log(
    `latency: medians of ${RUNS}: Aria p99 ${median(aria).toFixed(2)} ms, trivial relay p99 ` +
      `${median(relay).toFixed(2)} ms; ratio of medians ${(median(aria) / median(relay)).toFixed(2)}, ` +
      `median per-run ratio ${median(ratios).toFixed(2)} (per run ${ratios.map((x) => x.toFixed(2)).join(", ")}); ` +
      `target ≤ 2: ${median(ratios) <= 2 ? "met" : "missed"}`,
  );
}
