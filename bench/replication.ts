/**
 * Replication (issue 31, replicas): the built binary as a single server, as a single server with
 * one `aria sub **` reader in its own process (what a replica's reading costs the leader, without
 * the replica's appends), as a leader with one replica (`aria serve --follow`) at `--acks
 * leader`, and at `--acks quorum`, interleaved in each
 * round so that other load on the machine hits all three alike. Each run publishes `--messages`
 * messages of 100 bytes (256 per PUBLISH frame, 8 frames unacknowledged) from this process and
 * times first send to last PUBLISH_ACK. Then the replica's lag under a steady publish rate
 * (`--rate` msg/s for `--seconds`, batches every 10 ms, `--acks leader`): the leader's
 * /api/stats is sampled every 100 ms for the replica's lag in ms and in messages.
 * Then a publish's latency with one in flight (`--latency-publishes` of them, sequential) at
 * `--acks leader` and `--acks quorum`, a replica following in both.
 * Prints medians and each round. Every server gets its own temp data directory (removed after).
 *
 *   bun bench/replication.ts [--bin dist/aria] [--messages 100000] [--rounds 3]
 *     [--fsync always|interval|never] [--rate 100000] [--seconds 10]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "../mod.ts";
import { type ServedBinary, startServedBinary } from "./served_binary.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string", default: "dist/aria" },
    messages: { type: "string", default: "100000" },
    rounds: { type: "string", default: "3" },
    fsync: { type: "string", default: "always" },
    rate: { type: "string", default: "100000" },
    seconds: { type: "string", default: "10" },
    "latency-publishes": { type: "string", default: "500" },
  },
});
const MESSAGES = Number(values.messages);
const ROUNDS = Number(values.rounds);
const FSYNC = values.fsync as string;
const BATCH = 256;
const IN_FLIGHT = 8;
const PAYLOAD = new Uint8Array(100).fill(120);

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "aria-replication-"));
  dirs.push(dir);
  return dir;
}

function serve(args: string[] = []): Promise<ServedBinary> {
  return startServedBinary(values.bin as string, tempDir(), "256MiB", [
    "--fsync",
    FSYNC,
    "--log-level",
    "warn",
    ...args,
  ]);
}

interface ReplicaRow {
  id: string;
  connected: boolean;
  durableSeq: number;
  lagMessages: number;
  lagMs: number | null;
}

async function replicasOf(server: ServedBinary): Promise<ReplicaRow[]> {
  const stats = (await (await fetch(`${server.adminUrl}/api/stats`)).json()) as {
    replicas?: ReplicaRow[];
  };
  return stats.replicas ?? [];
}

async function waitFor(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

/** Publishes MESSAGES with IN_FLIGHT frames unacknowledged; returns msg/s. */
async function publishRate(url: string): Promise<number> {
  const client = await connect(url);
  const batches = Math.ceil(MESSAGES / BATCH);
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < batches) {
      const n = next++;
      const messages = Array.from({ length: BATCH }, (_, i) => ({
        topic: `bench/t${(n * BATCH + i) % 100}`,
        payload: PAYLOAD,
      }));
      await client.publishBatch(messages);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const seconds = (performance.now() - started) / 1000;
  await client.close();
  return (batches * BATCH) / seconds;
}

type Config = "single" | "single + ** reader" | "replica, acks leader" | "replica, acks quorum";
const CONFIGS: Config[] = [
  "single",
  "single + ** reader",
  "replica, acks leader",
  "replica, acks quorum",
];

async function run(config: Config): Promise<number> {
  const leader = await serve(config === "replica, acks quorum" ? ["--acks", "quorum"] : []);
  let replica: ServedBinary | null = null;
  // The baseline of a replica's reading: `aria sub **` in its own process, from the live end.
  const reader =
    config === "single + ** reader"
      ? Bun.spawn([values.bin as string, "sub", "--url", leader.tcpUrl, "**"], {
          stdin: "ignore",
          stdout: "ignore",
          stderr: "ignore",
        })
      : null;
  try {
    if (reader !== null)
      await waitFor(async () => {
        const stats = (await (await fetch(`${leader.adminUrl}/api/stats`)).json()) as {
          broker: { subscriptions: number };
        };
        return stats.broker.subscriptions === 1;
      }, "the reader to subscribe");
    if (config === "replica, acks leader" || config === "replica, acks quorum") {
      replica = await serve(["--follow", leader.tcpUrl, "--node-id", "r1"]);
      await waitFor(
        async () => (await replicasOf(leader)).some((r) => r.connected),
        "the replica to connect",
      );
    }
    return await publishRate(leader.tcpUrl);
  } finally {
    reader?.kill();
    await reader?.exited;
    await replica?.stop();
    await leader.stop();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The replica's lag while the leader takes `rate` msg/s for `seconds`. */
async function lagUnderRate(rate: number, seconds: number) {
  const leader = await serve();
  const replica = await serve(["--follow", leader.tcpUrl, "--node-id", "r1"]);
  try {
    await waitFor(async () => (await replicasOf(leader)).some((r) => r.connected), "the replica");
    const client = await connect(leader.tcpUrl);
    const perTick = Math.max(1, Math.round(rate / 100));
    const lagMs: number[] = [];
    const lagMessages: number[] = [];
    let sent = 0;
    let acked = 0;
    const started = performance.now();
    const endAt = started + seconds * 1000;
    const sampler = (async () => {
      while (performance.now() < endAt) {
        await Bun.sleep(100);
        const row = (await replicasOf(leader))[0];
        if (row === undefined) continue;
        if (row.lagMs !== null) lagMs.push(row.lagMs);
        lagMessages.push(row.lagMessages);
      }
    })();
    const pending: Promise<unknown>[] = [];
    for (let tick = 0; performance.now() < endAt; tick++) {
      const due = started + tick * 10;
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      const messages = Array.from({ length: perTick }, (_, i) => ({
        topic: `bench/t${(sent + i) % 100}`,
        payload: PAYLOAD,
      }));
      sent += perTick;
      pending.push(client.publishBatch(messages).then((r) => (acked += r.count)));
      if (pending.length > 64) await pending.shift();
    }
    await Promise.all(pending);
    const elapsed = (performance.now() - started) / 1000;
    await sampler;
    await client.close();
    return { achieved: acked / elapsed, lagMs, lagMessages };
  } finally {
    await replica.stop();
    await leader.stop();
  }
}

/** One publish at a time: p50 and p90 round trips (ms) at `acks`, a replica following. */
async function latencyAt(acks: "leader" | "quorum"): Promise<{ p50: number; p90: number }> {
  const leader = await serve(["--acks", acks]);
  const replica = await serve(["--follow", leader.tcpUrl, "--node-id", "r1"]);
  try {
    await waitFor(async () => (await replicasOf(leader)).some((r) => r.connected), "the replica");
    const client = await connect(leader.tcpUrl);
    const rounds: number[] = [];
    for (let i = 0; i < Number(values["latency-publishes"]); i++) {
      const started = performance.now();
      await client.publish("bench/latency", PAYLOAD);
      rounds.push(performance.now() - started);
    }
    await client.close();
    return { p50: percentile(rounds, 50), p90: percentile(rounds, 90) };
  } finally {
    await replica.stop();
    await leader.stop();
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");

try {
  console.log(
    `replication: ${MESSAGES} messages of 100 B per run, ${BATCH} per frame, ${IN_FLIGHT} frames in flight, --fsync ${FSYNC}, ${ROUNDS} rounds, bin ${values.bin}`,
  );
  const rates = new Map<Config, number[]>(CONFIGS.map((c) => [c, []]));
  for (let round = 0; round < ROUNDS; round++)
    for (const config of CONFIGS) {
      const rate = await run(config);
      rates.get(config)?.push(rate);
      console.log(`  round ${round + 1} ${config}: ${fmt(rate)} msg/s`);
    }
  const single = median(rates.get("single") ?? []);
  console.log(
    "\n| setup | publish msg/s (median) | vs single | rounds |\n| --- | --- | --- | --- |",
  );
  for (const config of CONFIGS) {
    const m = median(rates.get(config) ?? []);
    const each = (rates.get(config) ?? []).map(fmt).join(", ");
    console.log(`| ${config} | ${fmt(m)} | ${(m / single).toFixed(2)}× | ${each} |`);
  }
  const rate = Number(values.rate);
  const lag = await lagUnderRate(rate, Number(values.seconds));
  console.log(
    `\nreplica lag at ${fmt(rate)} msg/s asked (${fmt(lag.achieved)} msg/s acknowledged) for ${values.seconds} s, ${lag.lagMs.length} samples:`,
  );
  console.log(
    `  lag ms: p50 ${percentile(lag.lagMs, 50).toFixed(1)}, p99 ${percentile(lag.lagMs, 99).toFixed(1)}, max ${Math.max(...lag.lagMs).toFixed(1)}`,
  );
  console.log(
    `  lag messages: p50 ${fmt(percentile(lag.lagMessages, 50))}, p99 ${fmt(percentile(lag.lagMessages, 99))}, max ${fmt(Math.max(...lag.lagMessages))}`,
  );
  console.log("\none publish in flight, a replica following:");
  for (const acks of ["leader", "quorum"] as const) {
    const latency = await latencyAt(acks);
    console.log(
      `  --acks ${acks}: p50 ${latency.p50.toFixed(2)} ms, p90 ${latency.p90.toFixed(2)} ms`,
    );
  }
} finally {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
