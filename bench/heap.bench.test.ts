/**
 * Smoke test of bench/heap.bench.ts: runs the benchmark body once per implementation with tiny
 * parameters and checks its checksum against the sort-based reference, so the bench cannot rot.
 */

import { describe, expect, test } from "bun:test";
import { MERGE_HEAPS } from "./heaps/mod.ts";
import { generateSources, mergeAll, referenceChecksum, specialize } from "./heap.bench.ts";

describe("heap.bench mergeAll", () => {
  for (const { name, create } of MERGE_HEAPS) {
    test(`${name} matches the reference checksum`, () => {
      for (const sourceCount of [1, 2, 8, 64]) {
        const sources = generateSources(sourceCount, 1_000, 7 + sourceCount);
        const heap = create(sourceCount);
        const expected = referenceChecksum(sources);
        expect(mergeAll(heap, sources)).toBe(expected);
        // The bench reuses one instance across iterations, through a specialized clone of the body.
        expect(specialize(mergeAll, `${name} k=${sourceCount}`)(heap, sources)).toBe(expected);
      }
    });
  }

  test("generateSources deals every key exactly once, ascending per source", () => {
    const sources = generateSources(8, 1_000, 1);
    const all = sources.flatMap((keys) => Array.from(keys));
    expect(all.length).toBe(1_000);
    expect(new Set(all).size).toBe(1_000);
    for (const keys of sources)
      for (let i = 1; i < keys.length; i++) expect(keys[i]).toBeGreaterThan(keys[i - 1]);
  });
});
