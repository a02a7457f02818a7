/**
 * Tip recovery benchmark: linear vs indexed vs planned reads, side by side in one run, over the
 * scenarios of the issue (see tip_scenarios.ts), plus appends/s into ring + index and index
 * memory per live message. Prints markdown tables for docs/benchmarks.md.
 *
 *   bun bench/tip.bench.ts            full size: 256 MiB ring, 10 / 1,000 / 100,000 partitions
 *   bun bench/tip.bench.ts --quick    a 16 MiB ring, for a fast look
 *   --partitions 10,100000            only these partition counts
 *   --appends-only                    the appends and memory table only (no reads)
 *   --skip-readers                    no concurrent-readers table
 */
import { parseArgs } from "node:util";
import { buildStream, readInterleaved, SELECTIVITIES, type BuiltStream } from "./tip_scenarios.ts";
import type { ReadChoice } from "../src/tip/mod.ts";
import { FilterMatcher } from "../src/topic/mod.ts";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    reps: { type: "string", default: "5" },
    partitions: { type: "string", default: "10,1000,100000" },
    "appends-only": { type: "boolean", default: false },
    "skip-readers": { type: "boolean", default: false },
  },
});
const PARTITIONS = values.partitions.split(",").map(Number);
const RING_BYTES = values.quick ? 16 * 1024 * 1024 : 256 * 1024 * 1024;
const REPS = Number(values.reps);
const STRATEGIES: ReadChoice[] = ["linear", "indexed", "planned"];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// Reads start cold: sweeping a buffer larger than the L2 caches evicts the previous read's lines,
// so a strategy does not benefit from the one timed before it.
const FLUSH = new Float64Array((64 * 1024 * 1024) / 8);
let flushSink = 0;
function flushCaches(): void {
  for (let i = 0; i < FLUSH.length; i += 8) flushSink += FLUSH[i];
}

function time(fn: () => void): number {
  flushCaches();
  const started = performance.now();
  fn();
  return performance.now() - started;
}

/** Median ms per strategy; strategies alternate inside each rep so drift hits all alike. */
function measure(
  built: BuiltStream,
  selectivity: number,
  subscribers: number,
  reps: number,
): { ms: Map<ReadChoice, number>; messages: number } {
  const samples = new Map<ReadChoice, number[]>(STRATEGIES.map((s) => [s, []]));
  const filter = built.filters.get(selectivity)!;
  let messages = -1;
  let checksum = -1;
  // Rep 0 warms the JIT for this shape and is not counted.
  for (let rep = 0; rep <= reps; rep++) {
    for (const strategy of STRATEGIES) {
      let outcome = { messages: 0, checksum: 0 };
      const ms = time(() => {
        outcome = readInterleaved(built, filter, strategy, subscribers);
      });
      if (rep > 0) samples.get(strategy)!.push(ms);
      if (messages === -1) ({ messages, checksum } = outcome);
      if (outcome.messages !== messages || outcome.checksum !== checksum)
        throw new Error(`bench: ${strategy} read different messages`);
    }
  }
  return { ms: new Map(STRATEGIES.map((s) => [s, median(samples.get(s)!)])), messages };
}

const fmt = (ms: number) => (ms < 1 ? ms.toFixed(3) : ms < 100 ? ms.toFixed(2) : ms.toFixed(0));
const cpu =
  (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown";
console.log(
  `# tip bench: ring ${RING_BYTES / 2 ** 20} MiB, 64-byte payloads, median of ${REPS}; bun ${Bun.version}; ${cpu}; ${new Date().toISOString()}\n`,
);
console.log(
  "| partitions | interleave | records in ring | appends/s, filling | appends/s, full ring | full ring, by CPU time | index bytes/live msg | pool pages used |",
);
console.log("|---:|---|---:|---:|---:|---:|---:|---:|");
const readRows: string[] = [];
for (const partitions of PARTITIONS) {
  for (const interleave of ["runs", "spread"] as const) {
    // 100,000 partitions each need a block of their own: give the pool room for them.
    const poolBlocks = partitions >= 100_000 ? 1 << 17 : undefined;
    const built = buildStream(
      { partitions, interleave, ringBytes: RING_BYTES, payloadBytes: 64, poolBlocks },
      () => performance.now(),
    );
    const stats = built.tip.stats();
    console.log(
      `| ${partitions} | ${interleave} | ${stats.records} | ${(built.fillAppendsPerSecond / 1e6).toFixed(1)} M | ${(built.appendsPerSecond / 1e6).toFixed(1)} M | ${(built.appendsPerCpuSecond / 1e6).toFixed(1)} M | ${(stats.indexBytesUsed / stats.records).toFixed(1)} | ${stats.poolBlocksUsed} |`,
    );
    for (const selectivity of values["appends-only"] ? [] : SELECTIVITIES) {
      const { ms, messages } = measure(built, selectivity, 1, REPS);
      const linear = ms.get("linear")!;
      const indexed = ms.get("indexed")!;
      const planned = ms.get("planned")!;
      const read = built.tip.read(
        new FilterMatcher(built.topics, built.filters.get(selectivity)!),
        built.tip.ring.firstSeq,
      );
      const choice = read.ok ? read.cursor.strategy : "-";
      readRows.push(
        `| ${partitions} | ${interleave} | ${selectivity * 100}% | ${messages} | ${fmt(linear)} | ${fmt(indexed)} | ${fmt(planned)} (${choice}) | ${(linear / indexed).toFixed(1)}x | ${(planned / linear).toFixed(2)} |`,
      );
    }
    Bun.gc(true);
  }
}
if (values["appends-only"]) process.exit(0);
console.log(
  "\n| partitions | interleave | selectivity | messages read | linear ms | indexed ms | planned ms (choice) | linear / indexed | planned / linear |",
);
console.log("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
for (const row of readRows) console.log(row);

if (values["skip-readers"]) process.exit(0);
console.log(
  "\nConcurrent readers (1,000 partitions, spread; round-robin batches of 64; total ms for all readers):\n",
);
console.log(
  "| readers | selectivity | linear ms | indexed ms | planned ms | linear / indexed | planned / linear |",
);
console.log("|---:|---:|---:|---:|---:|---:|---:|");
const shared = buildStream(
  { partitions: 1000, interleave: "spread", ringBytes: RING_BYTES, payloadBytes: 64 },
  () => performance.now(),
);
for (const subscribers of [1, 16, 256]) {
  for (const selectivity of [0.01, 1]) {
    const { ms } = measure(shared, selectivity, subscribers, subscribers >= 256 ? 1 : 3);
    const linear = ms.get("linear")!;
    console.log(
      `| ${subscribers} | ${selectivity * 100}% | ${fmt(linear)} | ${fmt(ms.get("indexed")!)} | ${fmt(ms.get("planned")!)} | ${(linear / ms.get("indexed")!).toFixed(1)}x | ${(ms.get("planned")! / linear).toFixed(2)} |`,
    );
  }
}

if (flushSink !== 0) console.log("flush checksum", flushSink);
