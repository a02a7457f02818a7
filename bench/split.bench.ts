/**
 * split.bench: what the split buys and costs, on real files.
 *   (a) initial recovery of a small topic whose partition holds a huge sibling
 *       (`bench/pN/feed/small` beside `bench/pN/feed/huge`, 1 % vs 99 % of the partition; both
 *       share three segments, so the heuristic store holds both): bytes read per byte delivered
 *       and wall time of reading the small topic from seq 1, unsplit vs heuristic vs adaptive;
 *       (adaptive under a budget of 2 stores per partition; its default budget, the heuristic's
 *       store count, is one store per partition here);
 *   (b) split throughput (MB of closed data per second, measure + rewrite + switch) with 1 and 2
 *       worker threads.
 * Run: `bun bench/split.bench.ts` (SPLIT_BENCH_MB=N sizes the data, default 100; SPLIT_BENCH_RUNS
 * repeats the recovery reads, medians printed). `runSplitBench({ megabytes: 1 })` is the smoke
 * body (bench/split.bench.test.ts). Prints a checksum of the messages read.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { workerRunner } from "../src/server/mod.ts";
import { executeSplit } from "../src/split/executor.ts";
import { storeHost } from "../src/split/in_process.ts";
import type { SplitAlgorithm } from "../src/split/mod.ts";
import { Store } from "../src/store/mod.ts";
import { Filter } from "../src/topic/mod.ts";

const PARTITIONS = 4;
const PAYLOAD_BYTES = 1000;

async function fill(dir: string, megabytes: number): Promise<void> {
  const { store } = await Store.open(new BunDisk(dir), { crc32: nativeCrc32, fsync: "never" });
  const count = Math.ceil((megabytes * 1e6) / (PAYLOAD_BYTES + 50));
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(7);
  for (let i = 0; i < count; i++) {
    const seq = store.nextSeq;
    const topic = `bench/p${seq % PARTITIONS}/feed/${Math.floor(seq / PARTITIONS) % 100 === 0 ? "small" : "huge"}`;
    store.append(seq, 1_700_000_000_000_000 + seq, topic, payload);
    if (i % 2000 === 1999) await store.commit();
  }
  await store.commit();
  await store.close({ sort: true });
}

async function split(
  dir: string,
  algorithm: SplitAlgorithm,
  workers: number,
): Promise<{ seconds: number; megabytes: number }> {
  const { store } = await Store.open(new BunDisk(dir), { crc32: nativeCrc32 });
  const bytes = store.stats().segmentBytes + store.stats().storeBytes;
  const runner = workerRunner(dir, workers);
  const started = performance.now();
  try {
    await executeSplit(storeHost(store), runner, new BunDisk(dir), {
      plan: algorithm === "adaptive" ? { algorithm, maxStores: 2 * PARTITIONS } : { algorithm },
      workers,
      intervalBytes: 4096,
    });
  } finally {
    runner.close();
  }
  const seconds = (performance.now() - started) / 1000;
  await store.close({ sort: false });
  return { seconds, megabytes: bytes / 1e6 };
}

async function recover(
  dir: string,
  runs: number,
): Promise<{ readPerDelivered: number; ms: number; checksum: number }> {
  const times: number[] = [];
  let readPerDelivered = 0;
  let checksum = 0;
  for (let run = 0; run < runs; run++) {
    const { store } = await Store.open(new BunDisk(dir), { crc32: nativeCrc32 });
    const readBefore = store.stats().bytesRead;
    let delivered = 0;
    const started = performance.now();
    for await (const message of store.read(Filter.of("bench/p0/feed/small"), { seq: 1 })) {
      delivered += 32 + message.topic.length + message.payload.length;
      checksum = (checksum + message.seq) % 1_000_000_007;
    }
    times.push(performance.now() - started);
    readPerDelivered = (store.stats().bytesRead - readBefore) / delivered;
    await store.close({ sort: false });
  }
  times.sort((a, b) => a - b);
  return { readPerDelivered, ms: times[Math.floor(times.length / 2)], checksum };
}

/** The whole benchmark; returns the figures (printed by the script). */
export async function runSplitBench(options: {
  megabytes: number;
  runs?: number;
}): Promise<Record<string, number | string>[]> {
  const root = mkdtempSync(join(tmpdir(), "aria-split-bench-"));
  const rows: Record<string, number | string>[] = [];
  try {
    const base = join(root, "base");
    await fill(base, options.megabytes);
    let checksum = 0;
    for (const layout of ["unsplit", "heuristic", "adaptive"] as const) {
      const dir = join(root, layout);
      cpSync(base, dir, { recursive: true });
      if (layout !== "unsplit") await split(dir, layout, 2);
      const figures = await recover(dir, options.runs ?? 5);
      checksum ^= figures.checksum;
      rows.push({
        case: `recover small topic, ${layout}`,
        readPerDelivered: Number(figures.readPerDelivered.toFixed(2)),
        medianMs: Number(figures.ms.toFixed(1)),
      });
    }
    for (const workers of [1, 2]) {
      const dir = join(root, `throughput-${workers}`);
      cpSync(base, dir, { recursive: true });
      const result = await split(dir, "adaptive", workers);
      rows.push({
        case: `split adaptive, ${workers} worker(s)`,
        megabytes: Number(result.megabytes.toFixed(1)),
        seconds: Number(result.seconds.toFixed(2)),
        megabytesPerSecond: Number((result.megabytes / result.seconds).toFixed(1)),
      });
    }
    rows.push({ case: "checksum", value: checksum });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return rows;
}

if (import.meta.main) {
  const megabytes = Number(process.env.SPLIT_BENCH_MB ?? 100);
  const runs = Number(process.env.SPLIT_BENCH_RUNS ?? 5);
  for (const row of await runSplitBench({ megabytes, runs })) console.log(JSON.stringify(row));
}
