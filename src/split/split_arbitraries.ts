/**
 * Test support for split: fast-check arbitraries, small random volume tables with shared prefixes,
 * skewed bytes (a few heavy topics among light ones, some of 0 bytes) and segment names that sort
 * on both sides of "/" (`a-b`, `a.b` before it in code-unit order, letters after it); hand-written
 * tables; a readable dump of a plan for inline snapshots.
 * Test support only: imported by *.test.ts, never by the planners.
 */
import fc from "fast-check";
import { assert } from "../stdx/assert.ts";
import type { SplitPlan } from "./plan.ts";
import { volumeTableOf, type VolumeRow, type VolumeTable } from "./volume_table.ts";

const SEGMENTS = ["a", "b", "c", "a-b", "a.b", "z"];

/** A topic of 1 to 5 segments from a small alphabet, so topics share prefixes. */
export const topicArb: fc.Arbitrary<string> = fc
  .array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 5 })
  .map((segments) => segments.join("/"));

/** Skewed topic bytes: mostly light, sometimes heavy, sometimes 0. */
export const bytesArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 1_000 }) },
  { weight: 2, arbitrary: fc.integer({ min: 100_000, max: 1_000_000_000 }) },
  { weight: 1, arbitrary: fc.constant(0) },
);

/** 1 to `maxTopics` rows with unique topics. */
export function rowsArb(maxTopics = 40): fc.Arbitrary<VolumeRow[]> {
  return fc
    .uniqueArray(fc.tuple(topicArb, bytesArb, fc.nat(1_000)), {
      selector: ([topic]) => topic,
      minLength: 1,
      maxLength: maxTopics,
    })
    .map((rows) => rows.map(([topic, bytes, messages]) => ({ topic, bytes, messages })));
}

/** A table of 1 to `maxTopics` topics. */
export function tableArb(maxTopics = 40): fc.Arbitrary<VolumeTable> {
  return rowsArb(maxTopics).map(tableOf);
}

/**
 * Deep one-partition tables (`p/q/` + 1 to 4 segments of a, b, c, d), bytes either m * 2^k over
 * nine orders of magnitude or all of similar size: many nodes below the partition root, where
 * the planner's pruning acts.
 */
export function deepTableArb(maxTopics = 60): fc.Arbitrary<VolumeTable> {
  const segments = fc.array(fc.constantFrom("a", "b", "c", "d"), { minLength: 1, maxLength: 4 });
  const bytes = fc.oneof(
    fc
      .tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 30 }))
      .map(([m, k]) => m * 2 ** k),
    fc.integer({ min: 1, max: 100 }), // similar sizes: a subtree of many topics can be the best cut
  );
  return fc
    .uniqueArray(fc.tuple(segments, bytes), {
      selector: ([path]) => path.join("/"),
      minLength: 1,
      maxLength: maxTopics,
    })
    .map((rows) =>
      tableOf(
        rows.map(([path, size]) => ({ topic: `p/q/${path.join("/")}`, bytes: size, messages: 1 })),
      ),
    );
}

/** The table of valid rows (a test's own rows: failing to build is a bug in the test). */
export function tableOf(rows: readonly VolumeRow[]): VolumeTable {
  const result = volumeTableOf(rows);
  assert(result.ok, "test rows form a valid table");
  return result.table;
}

/** A table from `topic: bytes` pairs (messages 1), for hand-written examples. */
export function tableFrom(bytesOfTopic: Record<string, number>): VolumeTable {
  return tableOf(
    Object.entries(bytesOfTopic).map(([topic, bytes]) => ({ topic, bytes, messages: 1 })),
  );
}

/** A plan as `id (partition): topics [bytes]` lines. */
export function planLines(table: VolumeTable, plan: SplitPlan): string[] {
  return plan.subtrees.map(
    (store) =>
      `${store.id} (${store.partition}): ${Array.from(store.topics, (topic) => table.topics[topic]).join(" ")} [${store.bytes}]`,
  );
}
