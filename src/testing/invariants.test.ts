import { expect, test } from "bun:test";
import { Checker, InvariantViolation } from "./invariants.ts";
import type { ReferenceMessage } from "./reference_stream.ts";

/**
 * The checker's retention and repair bookkeeping: a seq is gone only when a removed file of its
 * partition (and topics, for a subtree store) held it, or a repair reported it lost; a store read
 * may skip only gone seqs; a gone seq that reads again after a recovery comes back.
 */
const encoder = new TextEncoder();

function checkerWith(topics: string[]): { checker: Checker; stream: ReferenceMessage[] } {
  const checker = new Checker();
  for (let i = 0; i < topics.length; i++)
    checker.onAppend(i + 1, 1000 + i, topics[i], encoder.encode(`m${i}`));
  return { checker, stream: checker.reference.map((m) => ({ ...m })) };
}

function violation(work: () => void): string {
  try {
    work();
  } catch (error) {
    if (error instanceof InvariantViolation) return error.invariant;
    throw error;
  }
  return "none";
}

test("a removed segment makes only its partition's seqs in its range gone", () => {
  // seqs 1..6 alternate between partitions app/a and sys/b
  const { checker, stream } = checkerWith([
    "app/a/x",
    "sys/b/y",
    "app/a/x",
    "sys/b/y",
    "app/a/z",
    "sys/b/y",
  ]);
  expect(checker.onRemoved("app/a", 1, 3, null)).toBe(2);
  expect([1, 2, 3, 4].map((seq) => checker.isGone(seq))).toEqual([true, false, true, false]);
  expect(checker.goneFloor).toBe(2);
  const kept = stream.filter((m) => !checker.isGone(m.seq));
  expect(violation(() => checker.checkHolds(kept, 7, "test", { recovered: false }))).toBe("none");
  // Skipping a seq that is not gone is a loss.
  const lossy = kept.filter((m) => m.seq !== 4);
  expect(violation(() => checker.checkHolds(lossy, 7, "test", { recovered: false }))).toBe(
    "store-complete",
  );
  // A gone seq that still reads: retention did not remove what it said.
  expect(violation(() => checker.checkHolds(stream, 7, "test", { recovered: false }))).toBe(
    "retention-removes",
  );
  // After a crash the REMOVE may not have been durable: the seqs come back.
  expect(violation(() => checker.checkHolds(stream, 7, "test", { recovered: true }))).toBe("none");
  expect(checker.isGone(1)).toBe(false);
  expect(checker.goneFloor).toBe(1);
});

test("a removed subtree store makes only its topics gone; a repair's lost range any topic", () => {
  const { checker, stream } = checkerWith(["app/a/x", "app/a/z", "app/a/x", "sys/b/y"]);
  expect(checker.onRemoved("app/a", 1, 3, new Set(["app/a/x"]))).toBe(2);
  expect(checker.isGone(2)).toBe(false);
  checker.onLost(2, 4);
  expect(checker.goneFloor).toBe(5);
  expect(violation(() => checker.checkHolds([], 5, "test", { recovered: false }))).toBe("none");
  // A read must not yield a seq past the store's end, nor one that differs from the stream.
  const changed = { ...stream[0], payload: encoder.encode("other") };
  expect(violation(() => checker.checkHolds([changed], 5, "test", { recovered: true }))).toBe(
    "store-matches-stream",
  );
});

test("retention that kept its files (no room to record it) un-marks only the seqs it marked", () => {
  const { checker, stream } = checkerWith(["app/a/x", "app/a/x", "app/a/x", "sys/b/y"]);
  checker.onLost(2, 2); // a repair lost seq 2
  const marked: number[] = [];
  expect(checker.onRemoved("app/a", 1, 3, null, marked)).toBe(2);
  expect(marked).toEqual([1, 3]);
  checker.onKept(marked);
  expect([1, 2, 3].map((seq) => checker.isGone(seq))).toEqual([false, true, false]);
  expect(checker.goneFloor).toBe(1);
  // The kept seqs must read; the lost one may be missing.
  const read = stream.filter((m) => m.seq !== 2);
  expect(violation(() => checker.checkHolds(read, 5, "test", { recovered: false }))).toBe("none");
  const lossy = read.filter((m) => m.seq !== 3);
  expect(violation(() => checker.checkHolds(lossy, 5, "test", { recovered: false }))).toBe(
    "store-complete",
  );
});
