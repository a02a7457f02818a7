import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { PartitionLog } from "./partition_log.ts";
import type { SegmentMeta } from "./segment_index.ts";

type Record = { seq: number; time: number; gen: number; position: number; length: number };

function segmentOf(log: PartitionLog, end: number, id: number): SegmentMeta {
  const lastSeq = log.pendingSeq(end - 1);
  return {
    id,
    partition: log.name,
    firstSeq: log.pendingSeq(log.pendingHead),
    lastSeq,
    firstTimeUs: 0,
    lastTimeUs: 0,
    records: end - log.pendingHead,
    bytes: 0,
  };
}

/** Every pending record of `log`, read through its accessors. */
function pendingOf(log: PartitionLog): Record[] {
  const records: Record[] = [];
  for (let i = log.pendingHead; i < log.pendingTail; i++) {
    records.push({
      seq: log.pendingSeq(i),
      time: log.pendingTime(i),
      gen: log.pendingGen(i),
      position: log.pendingPosition(i),
      length: log.pendingLength(i),
    });
  }
  return records;
}

describe("PartitionLog pending records", () => {
  test("appends and closes in any pattern keep every pending record, its index and the byte count", () => {
    // Runs of appends (up to 3 blocks' worth) and closes of any part of the pending list.
    const action = fc.oneof(
      fc.record({ append: fc.integer({ min: 1, max: 12_000 }) }),
      fc.record({ close: fc.integer({ min: 1, max: 16_000 }) }),
    );
    fc.assert(
      fc.property(fc.array(action, { maxLength: 12 }), (actions) => {
        const log = new PartitionLog("p");
        const model: Record[] = [];
        let seq = 0;
        let segmentId = 0;
        for (const step of actions) {
          if ("append" in step) {
            for (let n = 0; n < step.append; n++) {
              seq += 1 + (seq % 3);
              const record = {
                seq,
                time: seq * 10,
                gen: Math.floor(seq / 1000),
                position: seq * 7,
                length: 20 + (seq % 50),
              };
              model.push(record);
              log.addPending(record.seq, record.time, record.gen, record.position, record.length);
            }
          } else if (log.pendingCount > 0) {
            const count = Math.min(step.close, log.pendingCount);
            const headBefore = log.pendingHead;
            const tailBefore = log.pendingTail;
            // An index taken before the close still names the same record after it.
            const kept = headBefore + count < tailBefore ? log.pendingSeq(tailBefore - 1) : null;
            log.closeSegment(segmentOf(log, headBefore + count, ++segmentId), headBefore + count);
            model.splice(0, count);
            expect(log.pendingHead).toBe(headBefore + count);
            expect(log.pendingTail).toBe(tailBefore);
            if (kept !== null) expect(log.pendingSeq(tailBefore - 1)).toBe(kept);
          }
          expect(pendingOf(log)).toEqual(model);
          expect(log.pendingBytes).toBe(model.reduce((sum, r) => sum + r.length, 0));
          for (const probe of [0, seq, model[0]?.seq ?? 0, model[model.length >> 1]?.seq ?? 0]) {
            const after = model.findIndex((r) => r.seq > probe);
            expect(log.pendingAfter(probe)).toBe(
              after < 0 ? log.pendingTail : log.pendingHead + after,
            );
          }
        }
      }),
      fcParams({ runs: 60 }),
    );
  });
});
