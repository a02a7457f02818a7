/**
 * Tests of bench/compare_stream.ts, the stream and the replay check of bench/nats_compare.ts
 * (which needs nats-server and is not run by the tests): the stream is deterministic, skewed and
 * counted right, and the check refuses a short, long, reordered or wrong replay.
 */
import { expect, test } from "bun:test";
import { compareStream, ReplayCheck, topicNames } from "./compare_stream.ts";

const SPEC = {
  messages: 20_000,
  partitions: 100,
  topicsPerPartition: 100,
  payloadBytes: 64,
  skew: 1,
  seed: 1,
};

test("the stream is deterministic, Zipf-like and its counts match it", () => {
  const stream = compareStream(SPEC);
  expect(compareStream(SPEC).partitionOf).toEqual(stream.partitionOf);
  const counts = new Float64Array(SPEC.partitions);
  for (const partition of stream.partitionOf) counts[partition]++;
  expect(Array.from(counts)).toEqual(Array.from(stream.counts));
  expect(stream.counts[0]).toBeGreaterThan(10 * stream.counts[SPEC.partitions - 1]);
  const share = stream.counts[stream.onePercent] / SPEC.messages;
  expect(Math.abs(share - 0.01)).toBeLessThan(0.002);
  expect(topicNames(stream, ".")[3 * 100 + 7]).toBe("bench.p3.t7");
  expect(topicNames(stream, "/")[3 * 100 + 7]).toBe("bench/p3/t7");
});

/** The seqs of `partition`'s messages (from firstSeq), in order. */
function seqsOf(stream: ReturnType<typeof compareStream>, partition: number, firstSeq: number) {
  const seqs: number[] = [];
  stream.partitionOf.forEach((p, i) => {
    if (partition < 0 || p === partition) seqs.push(firstSeq + i);
  });
  return seqs;
}

test("ReplayCheck passes exactly the selected messages in order, and nothing else", () => {
  const stream = compareStream(SPEC);
  const partition = stream.onePercent;
  const replay = (seqs: number[], selected = partition) => {
    const check = new ReplayCheck(stream, 5, selected);
    for (const seq of seqs) check.see(seq);
    return () => check.verify("test");
  };
  const right = seqsOf(stream, partition, 5);
  expect(replay(right)).not.toThrow();
  expect(replay(seqsOf(stream, -1, 5), -1)).not.toThrow();
  expect(replay(right.slice(1))).toThrow(/expected/);
  expect(replay([...right, right[right.length - 1] + 1])).toThrow();
  const swapped = [...right];
  [swapped[3], swapped[4]] = [swapped[4], swapped[3]];
  expect(replay(swapped)).toThrow(/after/);
  const other = seqsOf(stream, partition === 0 ? 1 : 0, 5);
  expect(replay([other[0], ...right.slice(1)])).toThrow(/partition/);
  expect(replay([...right.slice(0, -1), 5 + SPEC.messages])).toThrow(/outside/);
});
