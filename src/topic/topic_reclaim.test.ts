/**
 * TopicTable's reclaim against a naive reference: ids of topics with no record at or after the
 * horizon are handed out again once the table is full; ids held (a record at or after the
 * horizon, or a seq given to intern) never are; every matcher — registered, closed, or behind by
 * more epochs than the table lists — answers for an id's current name only.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { Filter } from "./filter.ts";
import { FilterMatcher } from "./filter_matcher.ts";
import { TopicTable } from "./topic_table.ts";

const segment = fc.constantFrom("a", "b", "c");
const topicArb = fc.array(segment, { minLength: 1, maxLength: 3 }).map((s) => s.join("/"));
const filterArb = fc.oneof(
  topicArb,
  topicArb.map((t) => `${t}/**`),
  fc.constant("**"),
);
const opArb = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("intern" as const), topic: topicArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("horizon" as const), back: fc.nat(6) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("open" as const), filter: filterArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("close" as const), which: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("ask" as const), which: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: "reclaim" as const }) },
);

describe("TopicTable reclaim", () => {
  test("ids held are kept, freed ids are reused, and matchers answer for current names only", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(opArb, { minLength: 50, maxLength: 200, size: "max" }),
        (topicsMax, reclaimScanIds, reclaimBatchIds, ops) => {
          const table = new TopicTable({ topicsMax, reclaimScanIds, reclaimBatchIds });
          let seq = 0;
          let horizon = 0;
          table.reclaimBelow(() => horizon);
          /** The reference: each interned name's id and newest seq. */
          const held = new Map<string, { id: number; lastSeq: number }>();
          const matchers: FilterMatcher[] = [];
          const check = (matcher: FilterMatcher) => {
            for (const [name, { id }] of held)
              expect({ name, matches: matcher.matches(id) }).toEqual({
                name,
                matches: matcher.filter.matches(name),
              });
          };
          for (const op of ops) {
            if (op.kind === "intern") {
              const result = table.intern(op.topic, ++seq);
              const before = held.get(op.topic);
              if (before !== undefined) {
                expect(result).toEqual({ ok: true, topicId: before.id });
                before.lastSeq = seq;
                continue;
              }
              // The names the table forgot: exactly some of those no record holds.
              for (const [name, entry] of held) {
                if (table.lookup(name) === entry.id) continue;
                expect(entry.lastSeq).toBeLessThan(horizon);
                held.delete(name);
              }
              if (!result.ok) {
                expect(result.reason).toContain("limit");
                expect(held.size).toBe(topicsMax);
                continue;
              }
              for (const entry of held.values()) expect(entry.id).not.toBe(result.topicId);
              held.set(op.topic, { id: result.topicId, lastSeq: seq });
            } else if (op.kind === "horizon") {
              horizon = Math.max(horizon, seq + 1 - op.back);
            } else if (op.kind === "open") {
              matchers.push(new FilterMatcher(table, Filter.of(op.filter)));
            } else if (op.kind === "close") {
              if (matchers.length > 0) matchers[op.which % matchers.length].close();
            } else if (op.kind === "ask") {
              if (matchers.length > 0) check(matchers[op.which % matchers.length]);
            } else {
              table.reclaim();
              for (const [name, entry] of held)
                if (table.lookup(name) !== entry.id) held.delete(name);
            }
            for (const [name, entry] of held) {
              expect(table.lookup(name)).toBe(entry.id);
              expect(table.topicName(entry.id)).toBe(name);
            }
            expect(table.stats().known).toBe(held.size);
          }
          for (const matcher of matchers) check(matcher);
        },
      ),
      fcParams(),
    );
  });

  test("a matcher behind by more epochs than the table lists forgets everything and stays right", () => {
    const table = new TopicTable({ topicsMax: 2, reclaimBatchIds: 1 });
    let horizon = 0;
    table.reclaimBelow(() => horizon);
    const registered = new FilterMatcher(table, Filter.of("x/**"));
    const closed = new FilterMatcher(table, Filter.of("x/**"));
    let seq = 0;
    // The index says YES for x/keep to both (interned while both were registered).
    const keep = table.internValid("x/keep");
    closed.close();
    for (let round = 0; round < 40; round++) {
      // x/keep stays held; the other slot's name is freed each round: an epoch per new name.
      table.intern("x/keep", ++seq);
      horizon = seq;
      expect(table.intern(`y/${round}`, ++seq).ok).toBe(true);
    }
    expect(table.reclaimEpoch).toBeGreaterThan(20);
    const last = table.lookup("y/39");
    expect([registered.matches(keep), registered.matches(last)]).toEqual([true, false]);
    expect([closed.matches(keep), closed.matches(last)]).toEqual([true, false]);
  });

  test("a step looks at reclaimScanIds ids; a whole pass that found nothing idles until the horizon moves", () => {
    const table = new TopicTable({ topicsMax: 100, reclaimScanIds: 10, reclaimBatchIds: 100 });
    let horizon = 0;
    table.reclaimBelow(() => horizon);
    for (let i = 0; i < 100; i++) table.intern(`t/${i}`, 100 + i);
    // Only ids 50.. are free to go: the first steps (ids 0..49) find nothing and refuse.
    horizon = 200;
    for (let i = 0; i < 50; i++) table.intern(`t/${i}`, 300);
    const refused: boolean[] = [];
    for (let i = 0; i < 6; i++) refused.push(!table.intern(`n/${i}`, 300).ok);
    expect(refused).toEqual([true, true, true, true, true, false]);
    expect(table.topicsReclaimed).toBe(10);
    // Everything held: passes find nothing (then idle); once the horizon moves, ids come back.
    for (let i = 60; i < 100; i++) table.intern(`t/${i}`, 300);
    for (let i = 0; i < 9; i++) expect(table.intern(`m/${i}`, 300).ok).toBe(true);
    for (let i = 0; i < 30; i++) expect(table.intern(`z/${i}`, 300).ok).toBe(false);
    expect(table.topicsReclaimed).toBe(10);
    horizon = 400;
    expect(table.intern("z/0", 400).ok).toBe(true);
  });
});
