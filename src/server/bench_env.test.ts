/**
 * Tests of bench_env.ts's forceLinearTipReads, how the recovery-mix scenario's baseline server
 * reads its tip: a read the planner would serve from the index takes the linear pass instead,
 * and finds the same records.
 */
import { expect, test } from "bun:test";
import { Filter, FilterMatcher, TopicTable } from "../topic/mod.ts";
import { Tip } from "../tip/mod.ts";
import { forceLinearTipReads } from "./bench_env.ts";

test("forced linear tip reads: the strategy changes, the records do not", () => {
  const topics = new TopicTable();
  const tip = new Tip(topics, { capacityBytes: 4 * 1024 * 1024 });
  const ids = Array.from({ length: 100 }, (_, k) => topics.internValid(`bench/p${k}/t`));
  for (let seq = 1; seq <= 20_000; seq++) tip.append(ids[seq % 100], seq, seq, new Uint8Array(8));
  const matcher = new FilterMatcher(topics, Filter.of("bench/p7/**"));
  const seqsOf = () => {
    const read = tip.read(matcher, 1);
    if (!read.ok) throw new Error("read");
    const seqs: number[] = [];
    while (read.cursor.next()) seqs.push(tip.ring.seqAt(read.cursor.offset));
    return { strategy: read.cursor.strategy, seqs };
  };
  const planned = seqsOf();
  expect(planned.strategy).toBe("indexed");
  expect(planned.seqs.length).toBe(200);
  forceLinearTipReads(tip);
  const forced = seqsOf();
  expect(forced.strategy).toBe("linear");
  expect(forced.seqs).toEqual(planned.seqs);
});
