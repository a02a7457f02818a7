import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { ReferenceStream } from "../testing/reference_stream.ts";
import { Filter, FilterMatcher, TopicTable } from "../topic/mod.ts";
import { INDEX_BLOCK_ENTRIES } from "../constants.ts";
import { BLOCK_UNIT_ENTRIES, CLASS_LIVE_DIVISOR } from "./block_pool.ts";
import {
  BLOCK_NONE,
  BlockPool,
  dumpTip,
  PartitionIndexes,
  chooseReadStrategy,
  Tip,
  type TipCursor,
} from "./mod.ts";

function payloadOf(seq: number, bytes: number): Uint8Array {
  const payload = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) payload[i] = (seq * 31 + i) & 0xff;
  return payload;
}

function drain(tip: Tip, cursor: TipCursor): { seq: number; topic: string; payload: number[] }[] {
  const out = [];
  while (cursor.next()) {
    const at = cursor.offset;
    out.push({
      seq: tip.ring.seqAt(at),
      topic: tip.topics.topicName(tip.ring.topicAt(at)),
      payload: Array.from(tip.ring.payloadAt(at)),
    });
  }
  return out;
}

/** Checks the block pool and indexes balance against the ring (no leak, no double use). */
function checkAccounting(tip: Tip): void {
  const stats = tip.stats();
  expect(stats.poolBlocksUsed + stats.poolBlocksFree).toBe(stats.poolBlocksMax);
  expect(stats.indexEntriesLive).toBe(stats.records);
  expect(stats.records).toBe(stats.nextSeq - stats.firstSeq);
  let blocks = 0;
  const seen = new Set<number>();
  for (const partition of dumpTip(tip).partitions) {
    blocks += partition.blocks.length;
    for (const block of partition.blocks) {
      expect(seen.has(block)).toBe(false);
      seen.add(block);
    }
    // A partition holds the fewest blocks its live entries need, plus at most one partial head.
    expect(partition.blocks.length).toBeLessThanOrEqual(
      Math.ceil(partition.seqs.length / BLOCK_UNIT_ENTRIES) + 1,
    );
    expect(partition.seqs).toEqual([...partition.seqs].sort((a, b) => a - b));
  }
  expect(blocks).toBe(tip.pool.blocksUsed);
  expect(tip.pool.pagesEverUsed).toBeLessThanOrEqual(tip.pool.pagesMax);
}

describe("ring layout", () => {
  test("wrap-around leaves a marker, evicts oldest, keeps the index in step", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024, poolBlocks: 4 });
    const a = topics.internValid("a/x/1");
    const b = topics.internValid("b/y");
    // 8 records of 24 + 100 bytes (128 padded) fill 1024 exactly; the 9th wraps to offset 0.
    for (let seq = 1; seq <= 8; seq++)
      tip.append(seq % 3 === 0 ? b : a, seq, seq * 10, payloadOf(seq, 100));
    expect(dumpTip(tip)).toMatchInlineSnapshot(`
      {
        "bytesUsed": 1024,
        "firstSeq": 1,
        "head": 1024,
        "nextSeq": 9,
        "partitions": [
          {
            "blocks": [
              0,
            ],
            "partition": "a/x",
            "seqs": [
              1,
              2,
              4,
              5,
              7,
              8,
            ],
          },
          {
            "blocks": [
              1,
            ],
            "partition": "b/y",
            "seqs": [
              3,
              6,
            ],
          },
        ],
        "pool": {
          "blocks": 2,
          "entriesLive": 8,
          "free": 3,
          "used": 1,
        },
        "records": [
          "0:1:a/x/1:100",
          "128:2:a/x/1:100",
          "256:3:b/y:100",
          "384:4:a/x/1:100",
          "512:5:a/x/1:100",
          "640:6:b/y:100",
          "768:7:a/x/1:100",
          "896:8:a/x/1:100",
        ],
        "tail": 0,
      }
    `);
    tip.append(a, 9, 90, payloadOf(9, 200));
    tip.append(b, 10, 100, payloadOf(10, 8));
    expect(dumpTip(tip)).toMatchInlineSnapshot(`
      {
        "bytesUsed": 1024,
        "firstSeq": 3,
        "head": 256,
        "nextSeq": 11,
        "partitions": [
          {
            "blocks": [
              0,
            ],
            "partition": "a/x",
            "seqs": [
              4,
              5,
              7,
              8,
              9,
            ],
          },
          {
            "blocks": [
              1,
            ],
            "partition": "b/y",
            "seqs": [
              3,
              6,
              10,
            ],
          },
        ],
        "pool": {
          "blocks": 2,
          "entriesLive": 8,
          "free": 3,
          "used": 1,
        },
        "records": [
          "256:3:b/y:100",
          "384:4:a/x/1:100",
          "512:5:a/x/1:100",
          "640:6:b/y:100",
          "768:7:a/x/1:100",
          "896:8:a/x/1:100",
          "0:9:a/x/1:200",
          "224:10:b/y:8",
        ],
        "tail": 256,
      }
    `);
    checkAccounting(tip);
  });

  test("32-byte records and empty payloads are legal", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024, poolBlocks: 4 });
    const a = topics.internValid("a");
    for (let seq = 1; seq <= 100; seq++)
      tip.append(a, seq, seq, payloadOf(seq, seq % 2 === 0 ? 8 : 0));
    const stats = tip.stats();
    expect({
      records: stats.records,
      bytesUsed: stats.bytesUsed,
      firstSeq: stats.firstSeq,
    }).toMatchInlineSnapshot(`
      {
        "bytesUsed": 1008,
        "firstSeq": 65,
        "records": 36,
      }
    `);
    const read = tip.read(new FilterMatcher(topics, Filter.of("**")), tip.ring.firstSeq);
    expect(
      read.ok &&
        drain(tip, read.cursor)
          .map((m) => m.payload.length)
          .slice(0, 4),
    ).toEqual([0, 8, 0, 8]);
    checkAccounting(tip);
  });

  test("a record larger than the ring empties it and is not held", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024, poolBlocks: 4 });
    const a = topics.internValid("a");
    tip.append(a, 1, 1, payloadOf(1, 8));
    tip.append(a, 2, 2, payloadOf(2, 2000));
    expect(tip.stats()).toMatchObject({ records: 0, firstSeq: 3, nextSeq: 3, poolBlocksUsed: 0 });
    tip.append(a, 3, 3, payloadOf(3, 8));
    expect(tip.read(new FilterMatcher(topics, Filter.of("a")), 1)).toEqual({
      ok: false,
      reason: "too-old",
      firstSeq: 3,
    });
    checkAccounting(tip);
  });
});

describe("block pool", () => {
  test("blocks follow live entries as the stream moves on", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 64 * 1024, poolBlocks: 8 });
    const ids = ["p/0", "p/1", "q/0"].map((t) => topics.internValid(t));
    const samples = [];
    // 32-byte records: 2048 fit. One partition is 2/3 of the stream.
    for (let seq = 1; seq <= 12000; seq++) {
      tip.append(ids[seq % 3 === 0 ? 2 : seq % 2], seq, seq, payloadOf(seq, 8));
      if (seq % 3000 === 0) {
        const s = tip.stats();
        samples.push(
          `seq ${seq}: records ${s.records} used ${s.poolBlocksUsed} free ${s.poolBlocksFree} live ${s.indexEntriesLive} pool-evictions ${s.evictionsForPool}`,
        );
      }
    }
    expect(samples).toMatchInlineSnapshot(`
      [
        "seq 3000: records 2048 used 3 free 5 live 2048 pool-evictions 0",
        "seq 6000: records 2048 used 3 free 5 live 2048 pool-evictions 0",
        "seq 9000: records 2048 used 3 free 5 live 2048 pool-evictions 0",
        "seq 12000: records 2048 used 3 free 5 live 2048 pool-evictions 0",
      ]
    `);
    checkAccounting(tip);
  });

  test("an exhausted pool evicts the oldest records instead of growing", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024 * 1024, poolBlocks: 3 });
    for (let seq = 1; seq <= 5000; seq++)
      tip.append(topics.internValid(`t${seq % 5}`), seq, seq, payloadOf(seq, 8));
    const stats = tip.stats();
    expect(stats.poolBlocksUsed).toBeLessThanOrEqual(3);
    expect(stats.evictionsForPool).toBeGreaterThan(0);
    checkAccounting(tip);
  });
});

describe("reads", () => {
  test("from a seq older than the ring: too-old with the first seq held", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024, poolBlocks: 4 });
    const a = topics.internValid("a/b");
    for (let seq = 1; seq <= 40; seq++) tip.append(a, seq, seq, payloadOf(seq, 8));
    const matcher = new FilterMatcher(topics, Filter.of("a/**"));
    expect(tip.read(matcher, 3)).toEqual({
      ok: false,
      reason: "too-old",
      firstSeq: tip.ring.firstSeq,
    });
    const read = tip.read(matcher, tip.ring.firstSeq, { strategy: "indexed" });
    expect(read.ok && drain(tip, read.cursor).length).toBe(32);
  });

  test("a cursor outrun by appends stops with fellBehind", () => {
    const topics = new TopicTable();
    const tip = new Tip(topics, { capacityBytes: 1024, poolBlocks: 4 });
    const a = topics.internValid("a/b");
    for (let seq = 1; seq <= 20; seq++) tip.append(a, seq, seq, payloadOf(seq, 8));
    for (const strategy of ["linear", "indexed"] as const) {
      const read = tip.read(new FilterMatcher(topics, Filter.of("a/b")), tip.ring.firstSeq, {
        strategy,
      });
      if (!read.ok) throw new Error("read");
      expect(read.cursor.next()).toBe(true);
      const next = tip.ring.nextSeq;
      for (let seq = next; seq < next + 40; seq++) tip.append(a, seq, seq, payloadOf(seq, 8));
      expect(read.cursor.next()).toBe(false);
      expect(read.cursor.fellBehind).toBe(true);
    }
  });

  test("read strategy: indexed for a small share, linear for most of the stream", () => {
    const counts = [900_000, 1000, 99_000];
    const live = { liveOf: (p: number) => counts[p] };
    const base = { live, ringRecords: 1_000_000, fromSeq: 1, firstSeq: 1, nextSeq: 1_000_001 };
    expect([
      chooseReadStrategy({ ...base, partitions: Int32Array.of(1) }),
      chooseReadStrategy({ ...base, partitions: Int32Array.of(2) }),
      chooseReadStrategy({ ...base, partitions: Int32Array.of(0) }),
      chooseReadStrategy({ ...base, partitions: Int32Array.of(0, 1, 2) }),
      chooseReadStrategy({ ...base, partitions: Int32Array.of(), fromSeq: 2_000_000 }),
    ]).toMatchInlineSnapshot(`
      [
        "indexed",
        "indexed",
        "linear",
        "linear",
        "linear",
      ]
    `);
  });
});

// ---- Property: indexed == linear == planned == naive reference ------------------------------------

const segment = fc.constantFrom("a", "b", "c", "d", "e");
const topicArb = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const filterArb = fc.array(
  fc.oneof(
    topicArb,
    topicArb.map((t) => `${t}/**`),
    fc.constant("**"),
  ),
  { minLength: 1, maxLength: 4 },
);
const streamArb = fc.record({
  capacityBytes: fc.constantFrom(1024, 2048, 4096, 16384),
  poolBlocks: fc.constantFrom(2, 3, 8, 64),
  topics: fc.array(topicArb, { minLength: 1, maxLength: 12 }),
  // sizes from 0 bytes up; runs of one topic and spread-out picks both show up
  messages: fc.array(
    fc.record({
      topicIndex: fc.nat(11),
      payloadBytes: fc.oneof(fc.constant(8), fc.nat(300)),
      run: fc.integer({ min: 1, max: 40 }),
    }),
    { minLength: 1, maxLength: 200 },
  ),
  reads: fc.array(
    fc.record({ filter: filterArb, back: fc.nat(5000), pause: fc.nat(30), appendMore: fc.nat(60) }),
    { minLength: 1, maxLength: 6 },
  ),
});

describe("property: every strategy equals the naive reference", () => {
  test("random streams, filters and start seqs, with appends between reads", () => {
    fc.assert(
      fc.property(streamArb, (spec) => {
        const topics = new TopicTable();
        const tip = new Tip(topics, {
          capacityBytes: spec.capacityBytes,
          poolBlocks: spec.poolBlocks,
        });
        const reference = new ReferenceStream();
        let seq = 1;
        const appendOne = (topicIndex: number, payloadBytes: number) => {
          const name = spec.topics[topicIndex % spec.topics.length];
          const payload = payloadOf(seq, payloadBytes);
          tip.append(topics.internValid(name), seq, seq * 7, payload);
          reference.append({ seq, timeUs: seq * 7, topic: name, payload });
          seq++;
        };
        for (const m of spec.messages)
          for (let i = 0; i < m.run; i++) appendOne(m.topicIndex, m.payloadBytes);
        checkAccounting(tip);
        for (const read of spec.reads) {
          const filter = Filter.of(...read.filter);
          const fromSeq = Math.max(0, tip.ring.nextSeq - read.back);
          const expected = reference
            .read(filter, Math.max(fromSeq, tip.ring.firstSeq), tip.ring.nextSeq)
            .map((m) => ({ seq: m.seq, topic: m.topic, payload: Array.from(m.payload) }));
          for (const strategy of ["linear", "indexed", "planned"] as const) {
            const result = tip.read(new FilterMatcher(topics, filter), fromSeq, { strategy });
            if (Math.max(fromSeq, 1) < tip.ring.firstSeq) {
              expect(result).toEqual({ ok: false, reason: "too-old", firstSeq: tip.ring.firstSeq });
              continue;
            }
            if (!result.ok) throw new Error("read refused");
            expect(drain(tip, result.cursor)).toEqual(expected);
          }
          // A cursor paused mid-read survives appends, or says it fell behind: never wrong data.
          const start = Math.max(fromSeq, tip.ring.firstSeq);
          const result = tip.read(new FilterMatcher(topics, filter), start, {
            strategy: read.pause % 2 === 0 ? "indexed" : "linear",
          });
          if (!result.ok) continue;
          const got = [];
          for (let i = 0; i < read.pause && result.cursor.next(); i++)
            got.push(tip.ring.seqAt(result.cursor.offset));
          for (let i = 0; i < read.appendMore; i++) appendOne(i * 7 + read.pause, 8 + (i % 3) * 40);
          const resume = result.cursor.resumeSeq;
          const more = drain(tip, result.cursor).map((m) => m.seq);
          if (result.cursor.fellBehind) expect(tip.ring.firstSeq).toBeGreaterThan(resume);
          const seqs = [...got, ...more];
          const wanted = expected.map((m) => m.seq);
          expect(seqs).toEqual(result.cursor.fellBehind ? wanted.slice(0, seqs.length) : wanted);
          checkAccounting(tip);
        }
      }),
      fcParams({ runs: 150 }),
    );
  });
});

/** Phases of a stream: each a number of partitions with a share of one hot partition. */
const phasesArb = fc.array(
  fc.record({
    partitions: fc.integer({ min: 1, max: 400 }),
    hotShare: fc.constantFrom(0, 0.5, 0.95),
    messages: fc.integer({ min: 1, max: 12_000 }),
    payloadBytes: fc.constantFrom(8, 40),
  }),
  { minLength: 1, maxLength: 4 },
);

describe("property: size classes across phases of cold and busy partitions", () => {
  test("blocks grow across classes, pages are reused after eviction, reads stay right", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(64 * 1024, 256 * 1024),
        fc.constantFrom(16, 40),
        phasesArb,
        fc.nat(),
        (capacityBytes, poolBlocks, phases, seed) => {
          const topics = new TopicTable();
          const tip = new Tip(topics, { capacityBytes, poolBlocks });
          const reference = new ReferenceStream();
          let seq = 1;
          let pagesUsedMax = 0;
          let draw = seed;
          const random = () => {
            draw = (draw * 1103515245 + 12345) >>> 0;
            return draw / 2 ** 32;
          };
          for (const phase of phases) {
            for (let i = 0; i < phase.messages; i++, seq++) {
              const p = random() < phase.hotShare ? 0 : Math.floor(random() * phase.partitions);
              const name = `g${p % 7}/p${p}/t`;
              const payload = payloadOf(seq, phase.payloadBytes);
              tip.append(topics.internValid(name), seq, seq, payload);
              reference.append({ seq, timeUs: seq, topic: name, payload });
              pagesUsedMax = Math.max(pagesUsedMax, tip.pool.pagesUsed);
            }
            checkAccounting(tip);
            // Pages are reused, never touched afresh while a used one is free.
            expect(tip.pool.pagesEverUsed).toBe(pagesUsedMax);
            const hot = tip.topics.lookupPartition("g0/p0");
            const live = tip.indexes.liveOf(hot);
            if (
              tip.stats().evictionsForPool === 0 &&
              live >= CLASS_LIVE_DIVISOR * INDEX_BLOCK_ENTRIES + 256
            )
              expect(tip.pool.capacityOf(tip.indexes.tailBlockOf(hot))).toBe(INDEX_BLOCK_ENTRIES);
            const fromSeq = tip.ring.firstSeq + Math.floor(random() * tip.ring.count);
            for (const filter of [Filter.of("g0/**"), Filter.of("g1/**", "g3/p3/t")]) {
              const expected = reference.read(filter, fromSeq, tip.ring.nextSeq).map((m) => m.seq);
              const read = tip.read(new FilterMatcher(topics, filter), fromSeq, {
                strategy: "indexed",
              });
              if (!read.ok) throw new Error("read refused");
              expect(drain(tip, read.cursor).map((m) => m.seq)).toEqual(expected);
            }
          }
          // A record larger than the ring empties it: every page goes back to the pool.
          tip.append(topics.internValid("big/x"), seq, seq, new Uint8Array(capacityBytes));
          expect({ pages: tip.pool.pagesUsed, blocks: tip.pool.blocksUsed }).toEqual({
            pages: 0,
            blocks: 0,
          });
        },
      ),
      fcParams({ runs: 25 }),
    );
  });
});

test("BLOCK_NONE is not a block id", () => {
  expect(BLOCK_NONE).toBeLessThan(0);
});

describe("partition index", () => {
  test("a seq delta past u32 closes the block early; blocks free as entries drop", () => {
    const pool = new BlockPool(4);
    const indexes = new PartitionIndexes(pool);
    expect(indexes.push(0, 0, 1)).toBe(true);
    expect(indexes.push(0, 1, 2 + 0xffffffff)).toBe(true);
    expect({
      used: pool.blocksUsed,
      head: indexes.headBlockOf(0),
      tail: indexes.tailBlockOf(0),
      counts: [indexes.countOf(0, 0), indexes.countOf(0, 1)],
    }).toEqual({ used: 2, head: 0, tail: 1, counts: [1, 1] });
    indexes.dropOldest(0);
    expect({ used: pool.blocksUsed, head: indexes.headBlockOf(0) }).toEqual({ used: 1, head: 1 });
    indexes.dropOldest(0);
    expect({ used: pool.blocksUsed, live: indexes.entriesLiveCount }).toEqual({ used: 0, live: 0 });
  });

  test("an exhausted pool refuses a push and changes nothing", () => {
    const pool = new BlockPool(2);
    const indexes = new PartitionIndexes(pool);
    // Two pages of 64 smallest blocks each: one block per cold partition.
    const blocks = (2 * INDEX_BLOCK_ENTRIES) / BLOCK_UNIT_ENTRIES;
    for (let p = 0; p < blocks; p++) expect(indexes.push(p, p, p + 1)).toBe(true);
    expect(pool.canAcquire()).toBe(false);
    expect(indexes.push(blocks, blocks, blocks + 1)).toBe(false);
    expect({
      used: pool.blocksUsed,
      pages: pool.pagesUsed,
      live: indexes.entriesLiveCount,
    }).toEqual({ used: blocks, pages: 2, live: blocks });
    // A partition with room in its block still takes entries.
    expect(indexes.push(0, blocks, blocks + 2)).toBe(true);
  });
});
