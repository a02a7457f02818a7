/**
 * read_strategy: chooses how a tip read finds its records, from counts the tip already keeps.
 * A linear scan visits every record from fromSeq; an indexed merge visits only the records of
 * the partitions the filter touches but pays a heap step and a random ring access per record.
 * The choice estimates both and picks the cheaper, so a subscriber to most of the stream (`**`, or
 * a filter over most partitions) never pays more than the scan. The cost weights were measured
 * with bench/tip.bench.ts (see docs/benchmarks.md); they only need to be right within a factor
 * near the crossover, where the two strategies cost about the same anyway.
 */
import type { ReadStrategy } from "./tip_cursor.ts";

/** A forced strategy, or "planned" (a public option value) to let chooseReadStrategy pick. */
export type ReadChoice = ReadStrategy | "planned";

/** Relative cost of visiting one record in a linear scan. */
export const LINEAR_VISIT_COST = 1;
/** Relative cost of visiting one record through an index (random access, no heap). */
export const INDEXED_VISIT_COST = 2;
/** Added cost per heap level (log2 of the sources merged) for each indexed visit. */
export const HEAP_LEVEL_COST = 0.5;

/** What the choice looks at. */
export interface ReadStrategyInput {
  /** Partitions the filter touches that hold live records. */
  partitions: Int32Array;
  /** Live records per partition id (the partition indexes fit). */
  live: { liveOf(partition: number): number };
  ringRecords: number;
  fromSeq: number;
  firstSeq: number;
  nextSeq: number;
}

/** Picks the cheaper strategy for one read. */
export function chooseReadStrategy(input: ReadStrategyInput): ReadStrategy {
  const span = input.nextSeq - Math.max(input.fromSeq, input.firstSeq);
  if (span <= 0 || input.ringRecords === 0) return "linear";
  let touched = 0;
  for (let i = 0; i < input.partitions.length; i++)
    touched += input.live.liveOf(input.partitions[i]);
  // Records are spread over the ring in no known way: assume the touched share holds after fromSeq.
  const indexedVisits = touched * (span / input.ringRecords);
  const indexedCost =
    indexedVisits * (INDEXED_VISIT_COST + HEAP_LEVEL_COST * Math.log2(input.partitions.length + 1));
  return indexedCost < span * LINEAR_VISIT_COST ? "indexed" : "linear";
}
