/**
 * Stalled readers: what subscribers that never read cost the server and everyone else. Each run
 * starts the built server twice (`aria serve` on port 0, a fresh temp data dir, --fsync never),
 * and on each publishes `--mb` MB twice over one publisher connection, with one healthy
 * subscriber of `**` reading everything:
 *
 *   server 1: warm-up   fills the tip ring once, so the phases below compare like with like
 *             baseline  the same publish, no stalled readers; RSS 3 s and 10 s later
 *   server 2: warm-up
 *             stalled   `--stalled` raw connections HELLO + SUBSCRIBE `**` (live), then never read
 *             after     the stalled connections closed: RSS 3 s and 10 s later
 *
 * Both phases run at the same store state (a warm-up, then the same publish): on one server a
 * third publish took the journals past JOURNAL_RETAINED_BYTES_MAX, and the store's background
 * sorting alone (`--stalled 0`) raised that phase's RSS peak by 180–220 MiB, kept ~270 MiB resident
 * 10 s after, and cut the publisher's rate, all of which was counted against the stalled.
 *
 * For the baseline and stalled phases it prints the publisher's and the healthy subscriber's
 * rate, the server's peak RSS (VmRSS from /proc), the largest event-loop pause the server saw
 * (it runs with ARIA_DEBUG_EVENT_LOOP_LAG_MS=1 and logs each pause with its time; the phase's
 * largest is taken; "<1" when none) and the slowest PING answer a separate connection saw. Memory per stalled subscriber is the peak
 * RSS of the stalled phase less the baseline's, over `--stalled` (kernel socket buffers are not
 * in the server's RSS).
 *
 *   npx bun bench/stalled_readers.ts --stalled 1000 --mb 200 [--runs 3] [--bin dist/aria]
 *     [--payload 1024] [--tip-bytes 64MiB]
 *
 * `--kernel` measures the kernel's part alone instead (kernelOnly): the same sockets against a
 * trivial Bun server writing the same bytes; it prints the reading connection's rate beside
 * `--stalled` sockets that never read, against it alone.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Socket } from "bun";
import { connect } from "../mod.ts";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { Filter } from "../src/topic/filter.ts";
import {
  frameBytes,
  openPinger,
  rssAnonBytes,
  rssBytes,
  type ServedBinary,
  startServedBinary,
} from "./served_binary.ts";

const { values } = parseArgs({
  options: {
    stalled: { type: "string" },
    mb: { type: "string" },
    runs: { type: "string" },
    bin: { type: "string" },
    payload: { type: "string" },
    "tip-bytes": { type: "string" },
    kernel: { type: "boolean" },
  },
});
const STALLED = Number(values.stalled ?? 1000);
const PUBLISH_BYTES = Number(values.mb ?? 200) * 1e6;
const RUNS = Number(values.runs ?? 1);
const BIN = values.bin ?? process.env.ARIA_E2E_BIN ?? join(import.meta.dir, "..", "dist", "aria");
const PAYLOAD_BYTES = Number(values.payload ?? 1024);
const TIP_BYTES = values["tip-bytes"] ?? "64MiB";
/** Wait after the warm-up, before a phase (see servePhases). */
const WARM_UP_SETTLE_MS = 5000;
/** Messages per PUBLISH and PUBLISH frames unacknowledged. */
const BATCH_MESSAGES = 256;
const IN_FLIGHT = 8;

async function subscriptionCount(server: ServedBinary): Promise<number> {
  const stats = await (await fetch(`${server.adminUrl}/api/stats`)).json();
  return stats.broker.subscriptions as number;
}

const HELLO_SUBSCRIBE = frameBytes(
  { kind: "hello", version: PROTOCOL_VERSION, clientName: "stalled", authToken: null },
  { kind: "subscribe", subscriptionId: 1, start: { kind: "live" }, filter: Filter.of("**") },
);

/** Opens a raw connection that subscribes to everything and never reads. */
async function openStalled(server: ServedBinary): Promise<Socket<undefined>> {
  const [host, port] = server.tcpUrl.slice("tcp://".length).split(":");
  const socket = await Bun.connect({
    hostname: host,
    port: Number(port),
    socket: { data() {}, close() {}, error() {} },
  });
  socket.pause();
  socket.write(HELLO_SUBSCRIBE);
  return socket;
}

interface PhaseResult {
  publishMBps: number;
  healthyMBps: number;
  rssPeakBytes: number;
  /** The peak of the anonymous part of RSS (without mapped files' page-cache pages). */
  rssAnonPeakBytes: number;
  lagMaxMs: number;
  pingMaxMs: number;
}

/** Publishes PUBLISH_BYTES while the healthy subscriber reads; measures the phase. */
async function publishPhase(
  server: ServedBinary,
  publisher: Awaited<ReturnType<typeof connect>>,
  healthy: { received: number; waitFor(count: number): Promise<number> },
  pinger: Awaited<ReturnType<typeof openPinger>>,
): Promise<PhaseResult> {
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(7);
  const messages = Math.ceil(PUBLISH_BYTES / PAYLOAD_BYTES / BATCH_MESSAGES) * BATCH_MESSAGES;
  const batch = Array.from({ length: BATCH_MESSAGES }, (_, i) => ({
    topic: `bench/p${i % 16}/t${i % 64}`,
    payload,
  }));
  pinger.takeSlowestMs();
  const startWallMs = Date.now();
  let rssPeak = rssBytes(server.pid);
  let anonPeak = rssAnonBytes(server.pid);
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssBytes(server.pid));
    anonPeak = Math.max(anonPeak, rssAnonBytes(server.pid));
  }, 50);
  const target = healthy.received + messages;
  const start = performance.now();
  const healthyDone = healthy.waitFor(target);
  const inFlight: Promise<unknown>[] = [];
  for (let sent = 0; sent < messages; sent += BATCH_MESSAGES) {
    inFlight.push(publisher.publishBatch(batch));
    if (inFlight.length >= IN_FLIGHT) await inFlight.shift();
  }
  await Promise.all(inFlight);
  const publishedMs = performance.now() - start;
  const healthyMs = (await healthyDone) - start;
  const endWallMs = Date.now();
  clearInterval(sampler);
  rssPeak = Math.max(rssPeak, rssBytes(server.pid));
  await Bun.sleep(100); // the server's last pause lines reach its stderr
  const bytes = messages * PAYLOAD_BYTES;
  return {
    publishMBps: bytes / 1e3 / publishedMs,
    healthyMBps: bytes / 1e3 / healthyMs,
    rssPeakBytes: rssPeak,
    rssAnonPeakBytes: Math.max(anonPeak, rssAnonBytes(server.pid)),
    lagMaxMs: server.pauseMaxMs(startWallMs, endWallMs),
    pingMaxMs: pinger.takeSlowestMs(),
  };
}

interface RunResult {
  baseline: PhaseResult;
  stalled: PhaseResult;
  rssBeforeBytes: number;
  rssAfterBytes: number;
  /** RSS 10 s after they left (the collector may not have run by 3 s on an idle server). */
  rssAfterLateBytes: number;
  /** The baseline server's RSS 3 s and 10 s after its publish (what "after" compares with). */
  baselineAfterBytes: number;
  baselineAfterLateBytes: number;
}

/** One server's phases: `stalled` 0 is the baseline server. */
async function servePhases(stalledCount: number): Promise<{
  phase: PhaseResult;
  rssBeforeBytes: number;
  rssAfterBytes: number;
  rssAfterLateBytes: number;
}> {
  const dataDir = mkdtempSync(join(tmpdir(), "aria-stalled-"));
  const server = await startServedBinary(BIN, dataDir, TIP_BYTES);
  try {
    const publisher = await connect(server.tcpUrl);
    const subscriber = await connect(server.tcpUrl);
    const subscription = subscriber.subscribe("**", { from: "live" });
    await subscription.caughtUpAt;
    const waiters: { count: number; resolve: (ms: number) => void }[] = [];
    const healthy = {
      received: 0,
      waitFor(count: number): Promise<number> {
        return new Promise((resolve) => waiters.push({ count, resolve }));
      },
    };
    const consuming = (async () => {
      for await (const batch of subscription.batches()) {
        healthy.received += batch.length;
        for (let i = waiters.length - 1; i >= 0; i--) {
          if (healthy.received < waiters[i].count) continue;
          waiters[i].resolve(performance.now());
          waiters.splice(i, 1);
        }
      }
    })().catch((error: unknown) => {
      console.error(`the healthy subscriber failed: ${error}`);
      for (const waiter of waiters) waiter.resolve(Number.NaN);
    });
    const pinger = await openPinger(server);
    await publishPhase(server, publisher, healthy, pinger); // warm-up: the ring filled once
    // The server's garbage hint collects what the warm-up left (its rules and follow-ups run
    // within 5 s): a phase that began with it resident counted it against the stalled.
    await Bun.sleep(WARM_UP_SETTLE_MS);
    const stalled: Socket<undefined>[] = [];
    for (let i = 0; i < stalledCount; i++) stalled.push(await openStalled(server));
    while ((await subscriptionCount(server)) < stalledCount + 1) await Bun.sleep(20);
    const rssBeforeBytes = rssBytes(server.pid);
    const phase = await publishPhase(server, publisher, healthy, pinger);
    for (const socket of stalled) socket.end();
    await Bun.sleep(3000);
    const rssAfterBytes = rssBytes(server.pid);
    await Bun.sleep(7000);
    const rssAfterLateBytes = rssBytes(server.pid);
    pinger.close();
    await subscriber.close();
    await consuming.catch(() => undefined);
    await publisher.close();
    return { phase, rssBeforeBytes, rssAfterBytes, rssAfterLateBytes };
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function oneRun(): Promise<RunResult> {
  const baseline = await servePhases(0);
  const stalled = await servePhases(STALLED);
  return {
    baseline: baseline.phase,
    stalled: stalled.phase,
    rssBeforeBytes: stalled.rssBeforeBytes,
    rssAfterBytes: stalled.rssAfterBytes,
    rssAfterLateBytes: stalled.rssAfterLateBytes,
    baselineAfterBytes: baseline.rssAfterBytes,
    baselineAfterLateBytes: baseline.rssAfterLateBytes,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/**
 * The kernel's part, measured alone: a trivial Bun server that writes the same bytes (64 KiB
 * writes, as fast as each socket takes them) to one reading connection and to `stalled` that
 * never read. Returns the reading connection's rate (MB/s) over PUBLISH_BYTES.
 */
async function kernelOnly(stalled: number, fillFirst: boolean): Promise<number> {
  const chunk = new Uint8Array(64 * 1024).fill(7);
  const pump = (socket: Socket<{ left: number }>) => {
    while (socket.data.left > 0) {
      const written = socket.write(chunk);
      if (written <= 0) return;
      socket.data.left -= written;
      if (written < chunk.length) return;
    }
  };
  let readerSocket: Socket<{ left: number }> | null = null;
  const notYet: Socket<{ left: number }>[] = [];
  const server = Bun.listen<{ left: number }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { left: 0 };
      },
      data(socket, bytes) {
        // One byte says "start": 1 for the reading connection, 0 for a stalled one. Without
        // fillFirst the stalled ones are written to from when the reading one starts, round-robin
        // with it (each write as large as the socket takes, as the broker's).
        socket.data.left = PUBLISH_BYTES;
        if (bytes[0] === 1) {
          readerSocket = socket;
          for (const waiting of notYet.splice(0)) pump(waiting);
        } else if (!fillFirst) {
          notYet.push(socket);
          return;
        }
        pump(socket);
      },
      drain(socket) {
        pump(socket);
      },
    },
  });
  const dial = (handlers: Parameters<typeof Bun.connect>[0]["socket"]) =>
    Bun.connect({ hostname: "127.0.0.1", port: server.port, socket: handlers });
  const sockets: Socket<unknown>[] = [];
  for (let i = 0; i < stalled; i++) {
    const socket = await dial({ data() {}, close() {}, error() {} });
    socket.pause();
    socket.write(new Uint8Array([0]));
    sockets.push(socket);
  }
  // The stalled sockets' buffers fill first (2 s), or once the reading connection starts.
  if (fillFirst && stalled > 0) await Bun.sleep(2000);
  let received = 0;
  const start = performance.now();
  const done = new Promise<number>((resolve) => {
    dial({
      data(_socket, bytes) {
        received += bytes.length;
        if (received >= PUBLISH_BYTES) resolve(performance.now());
      },
      close() {},
      error() {},
    }).then((socket) => socket.write(new Uint8Array([1])));
  });
  const endMs = await done;
  for (const socket of sockets) socket.end();
  (readerSocket as Socket<{ left: number }> | null)?.end();
  server.stop(true);
  return PUBLISH_BYTES / 1e3 / (endMs - start);
}

const MB = 1024 * 1024;
if (values.kernel === true) {
  const rate = async (stalled: number, fillFirst: boolean) => {
    const rates = [];
    for (let i = 0; i < 3; i++) rates.push(await kernelOnly(stalled, fillFirst));
    return median(rates);
  };
  const alone = await rate(0, false);
  const filled = await rate(STALLED, true);
  const filling = await rate(STALLED, false);
  const aloneAgain = await rate(0, false);
  const baseline = (alone + aloneAgain) / 2;
  console.log(
    `kernel only (a trivial Bun server writing ${PUBLISH_BYTES / 1e6} MB, medians of 3): the ` +
      `reading connection alone ${alone.toFixed(0)} / ${aloneAgain.toFixed(0)} MB/s; beside ` +
      `${STALLED} stalled whose buffers filled first ${filled.toFixed(0)} MB/s ` +
      `(${(filled / baseline).toFixed(2)}), filling meanwhile ${filling.toFixed(0)} MB/s ` +
      `(${(filling / baseline).toFixed(2)})`,
  );
  process.exit(0);
}
const results: RunResult[] = [];
for (let run = 0; run < RUNS; run++) {
  const result = await oneRun();
  results.push(result);
  const perStalledKiB =
    (result.stalled.rssPeakBytes - result.baseline.rssPeakBytes) / STALLED / 1024;
  console.error(
    `run ${run + 1}: baseline ${JSON.stringify(result.baseline)} stalled ${JSON.stringify(result.stalled)} per stalled ${perStalledKiB.toFixed(0)} KiB, RSS before ${(result.rssBeforeBytes / MB).toFixed(0)} MiB after ${(result.rssAfterBytes / MB).toFixed(0)} MiB (10 s: ${(result.rssAfterLateBytes / MB).toFixed(0)} MiB; baseline server ${(result.baselineAfterBytes / MB).toFixed(0)} / ${(result.baselineAfterLateBytes / MB).toFixed(0)} MiB)`,
  );
}

const m = (pick: (result: RunResult) => number, digits = 1) =>
  median(results.map(pick)).toFixed(digits);
console.log(
  `stalled readers: ${STALLED} subscribers of ** that never read, ${PUBLISH_BYTES / 1e6} MB ` +
    `published in ${PAYLOAD_BYTES}-byte messages, tip ${TIP_BYTES}; medians of ${RUNS} run(s)`,
);
console.log("| | baseline | stalled | stalled / baseline |");
console.log("| --- | ---: | ---: | ---: |");
const row = (name: string, pick: (phase: PhaseResult) => number, digits = 1) => {
  const base = median(results.map((r) => pick(r.baseline)));
  const stalled = median(results.map((r) => pick(r.stalled)));
  console.log(
    `| ${name} | ${base.toFixed(digits)} | ${stalled.toFixed(digits)} | ${(stalled / base).toFixed(2)} |`,
  );
};
row("publisher MB/s", (p) => p.publishMBps);
row("healthy subscriber MB/s", (p) => p.healthyMBps);
row("server RSS peak MiB", (p) => p.rssPeakBytes / MB, 0);
row("of which anonymous (RssAnon) MiB", (p) => p.rssAnonPeakBytes / MB, 0);
row("event-loop pause max ms (server)", (p) => p.lagMaxMs);
row("PING answer max ms (client)", (p) => p.pingMaxMs);
console.log(
  `| server memory per stalled subscriber | | ${m((r) => (r.stalled.rssPeakBytes - r.baseline.rssPeakBytes) / STALLED / 1024, 0)} KiB | |`,
);
console.log(
  `| of which anonymous (RssAnon) | | ${m((r) => (r.stalled.rssAnonPeakBytes - r.baseline.rssAnonPeakBytes) / STALLED / 1024, 0)} KiB | |`,
);
console.log(
  `| RSS 3 s / 10 s after the publish (stalled: after they left) | ${m((r) => r.baselineAfterBytes / MB, 0)} / ${m((r) => r.baselineAfterLateBytes / MB, 0)} MiB | ${m((r) => r.rssAfterBytes / MB, 0)} / ${m((r) => r.rssAfterLateBytes / MB, 0)} MiB | |`,
);
console.log(`| RSS before the stalled came | | ${m((r) => r.rssBeforeBytes / MB, 0)} MiB | |`);
