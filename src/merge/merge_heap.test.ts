/**
 * Contract tests of MergeHeap, run against every implementation in MERGE_HEAPS: edge cases,
 * expect tests of a tiny merge, and fast-check properties comparing each heap to the naive
 * reference (concatenate every source, sort by key then source).
 *
 * FC_SEED fixes the fast-check seed (default a constant, so CI is reproducible); FC_RUNS raises the
 * number of runs. A failing property prints its seed and path in the thrown error.
 */

import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { AssertionError } from "../stdx/assert.ts";
import { MERGE_HEAPS } from "../../bench/heaps/mod.ts";
import { createMergeHeap, type MergeHeap } from "./mod.ts";

const FC_SEED = process.env.FC_SEED === undefined ? 0x41524941 : Number(process.env.FC_SEED);
const FC_RUNS = process.env.FC_RUNS === undefined ? 200 : Number(process.env.FC_RUNS);
const SOURCE_COUNT_MAX = 600;

type Merged = { sources: number[]; keys: number[] };

/** Drives a full merge of `sources` through `heap`, recording the (source, key) sequence. */
function mergeThrough(heap: MergeHeap, sources: readonly Float64Array[]): Merged {
  const firstKeys = new Float64Array(sources.length);
  for (const [source, keys] of sources.entries())
    firstKeys[source] = keys.length > 0 ? keys[0] : Infinity;
  heap.init(firstKeys, sources.length);
  const positions = new Int32Array(sources.length);
  const merged: Merged = { sources: [], keys: [] };
  const total = sources.reduce((sum, keys) => sum + keys.length, 0);
  while (!heap.empty()) {
    if (merged.keys.length >= total) throw new Error("heap yields more keys than the sources hold");
    const source = heap.topSource();
    merged.sources.push(source);
    merged.keys.push(heap.topKey());
    const position = ++positions[source];
    heap.advance(position < sources[source].length ? sources[source][position] : Infinity);
  }
  expect(heap.topKey()).toBe(Infinity);
  return merged;
}

/** The naive reference: every (source, key) pair, sorted by key, ties by lower source. */
function referenceMerge(sources: readonly Float64Array[]): Merged {
  const pairs: [number, number][] = [];
  for (const [source, keys] of sources.entries()) for (const key of keys) pairs.push([source, key]);
  pairs.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[0] - b[0]));
  return { sources: pairs.map((pair) => pair[0]), keys: pairs.map((pair) => pair[1]) };
}

/** Deals (pick, key) pairs to `sourceCount` sources; `disjoint` drops keys already dealt anywhere. */
function buildSources(
  sourceCount: number,
  pairs: readonly [number, number][],
  disjoint: boolean,
): Float64Array[] {
  const perSource: Set<number>[] = Array.from({ length: sourceCount }, () => new Set());
  const seen = new Set<number>();
  if (sourceCount === 0) return [];
  for (const [pick, key] of pairs) {
    if (disjoint && seen.has(key)) continue;
    seen.add(key);
    perSource[pick % sourceCount].add(key);
  }
  return perSource.map((keys) => Float64Array.from([...keys].sort((a, b) => a - b)));
}

function trace(heap: MergeHeap, sources: readonly Float64Array[]): string {
  const merged = mergeThrough(heap, sources);
  return merged.keys.map((key, index) => `${merged.sources[index]}:${key}`).join(" ");
}

const keyArbitrary = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 5_000 }), weight: 4 },
  {
    arbitrary: fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
    weight: 1,
  },
);
const pairsArbitrary = (key: fc.Arbitrary<number>) =>
  fc.array(fc.tuple(fc.nat(), key), { maxLength: 3_000, size: "max" });
const properties = { seed: FC_SEED, numRuns: FC_RUNS };

describe.each(MERGE_HEAPS.map((entry) => [entry.name, entry] as const))(
  "MergeHeap contract: %s",
  (name, entry) => {
    test("name matches its MERGE_HEAPS entry", () => {
      expect(entry.create(4).name).toBe(name);
    });

    test("k = 0 is empty at once, also on a capacity-0 instance", () => {
      for (const heap of [entry.create(0), entry.create(8)]) {
        heap.init(new Float64Array(0), 0);
        expect(heap.empty()).toBe(true);
        expect(heap.topKey()).toBe(Infinity);
      }
    });

    test("k = 1 yields the single source in order", () => {
      expect(trace(entry.create(1), [Float64Array.of(3, 5, 9)])).toBe("0:3 0:5 0:9");
    });

    test("all-empty sources are empty at once", () => {
      const heap = entry.create(5);
      heap.init(new Float64Array(5).fill(Infinity), 5);
      expect(heap.empty()).toBe(true);
      expect(heap.topKey()).toBe(Infinity);
    });

    test("a tiny merge of three sources", () => {
      const sources = [
        Float64Array.of(1, 4, 9),
        Float64Array.of(),
        Float64Array.of(2, 3, 10, 11),
        Float64Array.of(5),
      ];
      expect(trace(entry.create(4), sources)).toMatchInlineSnapshot(
        `"0:1 2:2 2:3 0:4 3:5 0:9 2:10 2:11"`,
      );
    });

    test("equal keys come out lower source first", () => {
      const sources = [
        Float64Array.of(2, 7),
        Float64Array.of(1, 2, 7),
        Float64Array.of(2),
        Float64Array.of(1, 7),
      ];
      expect(trace(entry.create(4), sources)).toMatchInlineSnapshot(
        `"1:1 3:1 0:2 1:2 2:2 0:7 1:7 3:7"`,
      );
    });

    test("init reuses one instance for a second, smaller merge", () => {
      const heap = entry.create(6);
      const first = [0, 1, 2, 3, 4, 5].map((source) =>
        Float64Array.of(source + 1, source + 7, source + 13),
      );
      expect(mergeThrough(heap, first)).toEqual(referenceMerge(first));
      // Abandon a merge half-way, then start another with fewer sources.
      heap.init(Float64Array.of(1, 2, 3, 4, 5, 6), 6);
      heap.advance(100);
      const second = [Float64Array.of(8, 20), Float64Array.of(), Float64Array.of(1, 30)];
      expect(trace(heap, second)).toBe("2:1 0:8 0:20 2:30");
    });

    test("count above capacity is an assertion failure", () => {
      expect(() => entry.create(2).init(new Float64Array(3), 3)).toThrow(AssertionError);
    });

    test("a key that does not increase is an assertion failure", () => {
      const heap = entry.create(2);
      heap.init(Float64Array.of(5, 8), 2);
      expect(() => heap.advance(5)).toThrow(AssertionError);
    });

    test("property: disjoint sources merge exactly like the sorted reference", () => {
      const shared = entry.create(SOURCE_COUNT_MAX);
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: SOURCE_COUNT_MAX }),
          pairsArbitrary(keyArbitrary),
          (sourceCount, pairs) => {
            const sources = buildSources(sourceCount, pairs, true);
            const expected = referenceMerge(sources);
            expect(mergeThrough(entry.create(sourceCount), sources)).toEqual(expected);
            // The same merge on one long-lived instance exercises init reuse with count < capacity.
            expect(mergeThrough(shared, sources)).toEqual(expected);
          },
        ),
        properties,
      );
    });

    test("property: equal keys across sources break ties by lower source", () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 40 }),
          pairsArbitrary(fc.integer({ min: 0, max: 60 })),
          (sourceCount, pairs) => {
            const sources = buildSources(sourceCount, pairs, false);
            expect(mergeThrough(entry.create(sourceCount), sources)).toEqual(
              referenceMerge(sources),
            );
          },
        ),
        properties,
      );
    });
  },
);

describe("createMergeHeap", () => {
  test("returns a working heap for every capacity and honours a forced name", () => {
    for (const capacity of [0, 1, 2, 8, 64, 512]) {
      const sources = buildSources(
        capacity,
        Array.from({ length: 200 }, (_, i) => [i * 7, i] as [number, number]),
        true,
      );
      expect(mergeThrough(createMergeHeap(capacity), sources)).toEqual(referenceMerge(sources));
    }
    // The measured default (docs/benchmarks.md); change it together with mod.ts.
    expect([2, 64, 512].map((capacity) => createMergeHeap(capacity).name)).toEqual(
      Array(3).fill("keyed_loser_tree"),
    );
    expect(createMergeHeap(4, { name: "binary_heap" }).name).toBe("binary_heap");
    expect(() => createMergeHeap(4, { name: "no_such_heap" })).toThrow(AssertionError);
  });
});
