/**
 * split_plan.bench: planning time of the split planners on 100,000 topics (target: under 1 s).
 *
 * Owns: the deterministic table generators (`zipfTable`, `flatTable`), the benchmark body
 * (`planOnce`: parse the CSV text, plan, measure) shared with the smoke test
 * (bench/split_plan.bench.test.ts), and the table printed for docs/benchmarks.md (split).
 * Run: `bun bench/split_plan.bench.ts` (SPLIT_BENCH_TOPICS=N and SPLIT_BENCH_RUNS=N change the size
 * and the runs). Medians of wall time per phase, and of the process's CPU time for the whole run,
 * which a busy shared machine inflates much less (it includes GC threads, so it can exceed wall).
 *
 * Inputs, both from a seeded Prng:
 *   zipf  ~1 % as many partitions as topics, partition sizes Zipf(1.0) (the largest holds ~13 %),
 *         topics 1 to 3 segments below the partition, bytes Zipf(1.1) over topics in random order;
 *   flat  one partition of leaf topics, Zipf bytes: the worst case for the planner's per-level
 *         walk (every topic is a sibling of every other).
 * Each run's total waste is folded into a checksum printed at the end, so no work can be dropped.
 */
import { Prng } from "../src/stdx/prng.ts";
import {
  parseVolumeTable,
  planAdaptive,
  planHeuristic,
  planMetrics,
  buildTopicTree,
  VOLUME_TABLE_HEADER,
  type SplitAlgorithm,
} from "../src/split/mod.ts";

/** A deterministic Zipf-shaped topic tree as CSV text (header `topic,bytes,messages`). */
export function zipfTable(topicCount: number, seed: number): string {
  const prng = new Prng(seed);
  const partitions = Math.max(1, Math.round(topicCount / 100));
  const cumulative = new Float64Array(partitions);
  let sum = 0;
  for (let p = 0; p < partitions; p++) cumulative[p] = sum += 1 / (p + 1);
  const sizes = new Int32Array(partitions);
  for (let i = 0; i < topicCount; i++) sizes[pick(cumulative, prng.nextFloat() * sum)]++;
  const names: string[] = [];
  const seen = new Set<string>();
  for (let p = 0; p < partitions; p++) {
    const branching = Math.max(4, Math.ceil(Math.cbrt(sizes[p]) * 2));
    for (let made = 0; made < sizes[p]; ) {
      let name = `team${p % 50}/svc${p}`;
      const depth = prng.nextRange(1, 3);
      for (let d = 0; d < depth; d++) name += `/x${prng.nextInt(branching)}`;
      if (seen.has(name)) continue;
      seen.add(name);
      names.push(name);
      made++;
    }
  }
  return csvOf(names, prng, 1.1);
}

/** One partition of `topicCount` sibling leaf topics with Zipf bytes, as CSV text. */
export function flatTable(topicCount: number, seed: number): string {
  const prng = new Prng(seed);
  return csvOf(
    Array.from({ length: topicCount }, (_, i) => `flat/p/t${i}`),
    prng,
    1.1,
  );
}

function pick(cumulative: Float64Array, target: number): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid] < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function csvOf(names: string[], prng: Prng, exponent: number): string {
  // Bytes by Zipf rank, ranks dealt to topics in random order (Fisher-Yates).
  const ranks = Int32Array.from(names, (_, i) => i);
  for (let i = ranks.length - 1; i > 0; i--) {
    const j = prng.nextInt(i + 1);
    [ranks[i], ranks[j]] = [ranks[j], ranks[i]];
  }
  const lines = [VOLUME_TABLE_HEADER];
  for (let i = 0; i < names.length; i++) {
    const bytes = Math.floor(4e10 / (ranks[i] + 1) ** exponent) + prng.nextRange(100, 3000);
    lines.push(`${names[i]},${bytes},${Math.max(1, Math.floor(bytes / 200))}`);
  }
  return `${lines.join("\n")}\n`;
}

/** What one planning run produced and took. */
export interface PlanRun {
  topics: number;
  partitions: number;
  stores: number;
  wastedBytes: number;
  parseMs: number;
  planMs: number;
  metricsMs: number;
  /** CPU time of the whole run (user + system): less sensitive than wall time to a busy machine. */
  cpuMs: number;
}

/** The benchmark body: parse `csv`, plan it with `algorithm` (adaptive under `maxStores`, default the heuristic's count), measure. */
export function planOnce(csv: string, algorithm: SplitAlgorithm, maxStores?: number): PlanRun {
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const parsed = parseVolumeTable(csv);
  if (!parsed.ok) throw new Error(parsed.reason);
  const table = parsed.table;
  const parsedAt = performance.now();
  const tree = buildTopicTree(table);
  const plan =
    algorithm === "heuristic" ? planHeuristic(table) : planAdaptive(table, { tree, maxStores });
  const plannedAt = performance.now();
  const metrics = planMetrics(table, plan, { tree });
  const doneAt = performance.now();
  const cpu = process.cpuUsage(cpuStart);
  return {
    topics: table.topics.length,
    partitions: tree.partitionRoots.length,
    stores: plan.subtrees.length,
    wastedBytes: metrics.wastedBytesTotal,
    parseMs: parsedAt - start,
    planMs: plannedAt - parsedAt,
    metricsMs: doneAt - plannedAt,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main(): Promise<void> {
  const topics = Number(process.env.SPLIT_BENCH_TOPICS ?? 100_000);
  const runs = Number(process.env.SPLIT_BENCH_RUNS ?? 7);
  let checksum = 0;
  const rows: string[] = [];
  const zipf = zipfTable(topics, 0x5eed);
  const flat = flatTable(topics, 0x5eed);
  const cases: [string, string, SplitAlgorithm, number | undefined][] = [
    ["zipf", zipf, "heuristic", undefined],
    ["zipf", zipf, "adaptive", undefined],
    ["flat", flat, "heuristic", undefined],
    ["flat", flat, "adaptive", Math.round(topics / 100)],
    ["flat", flat, "adaptive", undefined],
  ];
  for (const [shape, csv, algorithm, maxStores] of cases) {
    const samples: PlanRun[] = [];
    for (let run = 0; run < runs; run++) {
      const result = planOnce(csv, algorithm, maxStores);
      checksum = (checksum + result.wastedBytes / 1e6 + result.stores) % 1e12;
      samples.push(result);
    }
    const first = samples[0];
    const budget =
      algorithm === "heuristic" ? "-" : maxStores === undefined ? "heuristic's" : String(maxStores);
    rows.push(
      `| ${shape} | ${first.topics} | ${first.partitions} | ${algorithm} | ${budget} | ${first.stores} | ${first.wastedBytes.toExponential(3)} ` +
        `| ${median(samples.map((s) => s.parseMs)).toFixed(0)} | ${median(samples.map((s) => s.planMs)).toFixed(0)} ` +
        `| ${median(samples.map((s) => s.metricsMs)).toFixed(0)} | ${median(samples.map((s) => s.parseMs + s.planMs + s.metricsMs)).toFixed(0)} ` +
        `| ${median(samples.map((s) => s.cpuMs)).toFixed(0)} |`,
    );
  }
  console.log(
    `split plan, ${topics} topics, median of ${runs} runs (ms); plan includes building the topic tree\n`,
  );
  console.log(
    "| table | topics | partitions | planner | budget | stores | wasted bytes | parse | plan | metrics | total | cpu |",
  );
  console.log("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) console.log(row);
  console.log(`\nchecksum ${checksum.toFixed(0)}`);
}

if (import.meta.main) await main();
