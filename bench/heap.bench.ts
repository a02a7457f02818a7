/**
 * heap.bench: every MergeHeap implementation side by side, merging k sorted sources.
 *
 * Owns: the benchmark body (`mergeAll`), its input generator (`generateSources`) and the
 * checksum both share with the smoke test (bench/heap.bench.test.ts).
 * Run: `bun bench/heap.bench.ts` — one mitata `summary` group per k, so ratios print side by side,
 * then a markdown table (mean, median, boxed/this) for docs/benchmarks.md.
 *
 * Input: keys 1..N dealt to k sources by a seeded Prng (so sources interleave randomly), generated
 * once outside the timed body. Every run's checksum is folded into a sink printed at the end, and
 * checked against the reference, so the JIT cannot drop the work.
 */

import { bench, do_not_optimize, run, summary } from "mitata";
import { assert } from "../src/stdx/assert.ts";
import { Prng } from "../src/stdx/prng.ts";
import type { MergeHeap } from "../src/merge/mod.ts";
import { MERGE_HEAPS } from "./heaps/mod.ts";

/** Per-source ascending keys: keys 1..keyCount dealt to `sourceCount` sources by a Prng(seed). */
export function generateSources(
  sourceCount: number,
  keyCount: number,
  seed: number,
): Float64Array[] {
  const prng = new Prng(seed);
  const owner = new Int32Array(keyCount);
  const lengths = new Int32Array(sourceCount);
  for (let index = 0; index < keyCount; index++) {
    const source = prng.nextInt(sourceCount);
    owner[index] = source;
    lengths[source]++;
  }
  const sources = Array.from(
    { length: sourceCount },
    (_, source) => new Float64Array(lengths[source]),
  );
  const filled = new Int32Array(sourceCount);
  for (let index = 0; index < keyCount; index++) {
    const source = owner[index];
    sources[source][filled[source]++] = index + 1;
  }
  return sources;
}

/**
 * The benchmark body: merges `sources` through `heap`, returns a checksum of the output.
 * Self-contained (no free variables) so `specialize` can clone it: see there.
 * Checksum = (sum of keys) + (order-sensitive 32-bit hash of the source sequence). Each source's
 * keys are consumed in its own order, so the source sequence fixes the key sequence.
 */
export function mergeAll(heap: MergeHeap, sources: readonly Float64Array[]): number {
  const sourceCount = sources.length;
  const firstKeys = new Float64Array(sourceCount);
  const positions = new Int32Array(sourceCount);
  for (let source = 0; source < sourceCount; source++) {
    firstKeys[source] = sources[source].length > 0 ? sources[source][0] : Infinity;
  }
  heap.init(firstKeys, sourceCount);
  let keySum = 0;
  let sourceHash = 0;
  while (!heap.empty()) {
    const source = heap.topSource();
    keySum += heap.topKey();
    sourceHash = (Math.imul(sourceHash, 0x01000193) + source + 1) | 0;
    const keys = sources[source];
    const position = ++positions[source];
    heap.advance(position < keys.length ? keys[position] : Infinity);
  }
  return keySum + (sourceHash >>> 0);
}

/**
 * A private copy of `mergeAll` with its own JIT state, one per (implementation, k). One shared
 * body called with seven heap classes makes its call sites megamorphic (JSC stops inlining past a
 * few callees), which would measure dispatch, not heaps; the tip reader calls one class. `tag`
 * makes the source text unique: JSC caches code by source text, and identical clones were seen to
 * share state (a second binary_heap run became 2-4x slower after a quaternary_heap one).
 */
export function specialize(body: typeof mergeAll, tag: string): typeof mergeAll {
  assert(!tag.includes("\n"), "specialize: tag must be one line");
  return new Function(`return (${body.toString()}); // ${tag}`)() as typeof mergeAll;
}

/** The checksum mergeAll must return, computed the naive way: concatenate and sort. */
export function referenceChecksum(sources: readonly Float64Array[]): number {
  const entries: { source: number; key: number }[] = [];
  for (const [source, keys] of sources.entries())
    for (const key of keys) entries.push({ source, key });
  entries.sort((a, b) => a.key - b.key || a.source - b.source);
  let keySum = 0;
  let sourceHash = 0;
  for (const { source, key } of entries) {
    keySum += key;
    sourceHash = (Math.imul(sourceHash, 0x01000193) + source + 1) | 0;
  }
  return keySum + (sourceHash >>> 0);
}

/** The k values to run; HEAP_BENCH_K="4,16" overrides them (e.g. to locate the linear_min cut-off). */
const SOURCE_COUNTS: readonly number[] = process.env.HEAP_BENCH_K?.split(",").map(Number) ?? [
  2, 8, 64, 512,
];
const KEY_COUNT = 1_000_000;
const SEED = 0x5eed;

async function main(): Promise<void> {
  let sink = 0;
  for (const sourceCount of SOURCE_COUNTS) {
    const sources = generateSources(sourceCount, KEY_COUNT, SEED + sourceCount);
    const expected = referenceChecksum(sources);
    summary(() => {
      for (const { name, create } of MERGE_HEAPS) {
        const heap = create(sourceCount);
        const merge = specialize(mergeAll, `${name} k=${sourceCount}`);
        if (merge(heap, sources) !== expected)
          throw new Error(`${name} k=${sourceCount}: checksum mismatch`);
        const body = bench(`${name} k=${sourceCount}`, () => {
          const checksum = merge(heap, sources);
          sink = (sink + checksum) | 0;
          do_not_optimize(checksum);
        });
        if (name === "boxed_heap") body.baseline(true);
      }
    });
  }
  const { benchmarks } = await run();
  printTable(benchmarks);
  console.log(`checksum sink: ${sink >>> 0}`);
}

type Trial = Awaited<ReturnType<typeof run>>["benchmarks"][number];

/** Prints avg and p50 per benchmark and the p50 ratio to boxed_heap of the same k, as markdown. */
function printTable(benchmarks: readonly Trial[]): void {
  const p50ByName = new Map<string, number>();
  for (const trial of benchmarks) p50ByName.set(trial.alias, trial.runs[0]?.stats?.p50 ?? NaN);
  console.log("\n| k | implementation | mean ms | median ms | boxed / this (median) |");
  console.log("| ---: | --- | ---: | ---: | ---: |");
  for (const trial of benchmarks) {
    const stats = trial.runs[0]?.stats;
    if (stats === undefined) continue;
    const [name, k] = trial.alias.split(" ");
    const boxed = p50ByName.get(`boxed_heap ${k}`) ?? NaN;
    const ms = (ns: number) => (ns / 1e6).toFixed(2);
    console.log(
      `| ${k.slice(2)} | ${name} | ${ms(stats.avg)} | ${ms(stats.p50)} | ${(boxed / stats.p50).toFixed(2)}x |`,
    );
  }
}

if (import.meta.main) await main();
