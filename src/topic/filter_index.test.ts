import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { Filter, FilterIndex, FilterMatcher, TopicTable } from "./mod.ts";

const segment = fc.constantFrom("a", "b", "c", "dd");
const topicArb = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const patternArb = fc
  .array(fc.constantFrom("a", "b", "*"), { minLength: 1, maxLength: 4 })
  .map((s) => s.join("/"));
const entryArb = fc.oneof(
  topicArb,
  topicArb.map((t) => `${t}/**`),
  fc.constant("**"),
  patternArb,
  patternArb.map((t) => `${t}/**`),
);
const filterArb = fc.array(entryArb, { minLength: 1, maxLength: 6 });

/** A value of the index: a filter and a name to tell values apart. */
type Named = { readonly filter: Filter; readonly name: number };

describe("FilterIndex", () => {
  test("yields exactly the values a linear scan of Filter.matches yields, each once", () => {
    fc.assert(
      fc.property(
        fc.array(filterArb, { minLength: 1, maxLength: 12 }),
        // Each step adds a filter, removes a registered value, or matches a topic.
        fc.array(
          fc.oneof(
            fc.record({ add: fc.nat(11) }),
            fc.record({ remove: fc.nat(40) }),
            fc.record({ topic: topicArb }),
          ),
          { maxLength: 60 },
        ),
        (filters, steps) => {
          const index = new FilterIndex<Named>();
          const registered: Named[] = [];
          let names = 0;
          for (const step of steps) {
            if ("add" in step) {
              const value = {
                filter: Filter.of(...filters[step.add % filters.length]),
                name: names++,
              };
              index.add(value);
              registered.push(value);
            } else if ("remove" in step) {
              if (registered.length === 0) continue;
              const [value] = registered.splice(step.remove % registered.length, 1);
              index.remove(value);
            } else {
              const out: Named[] = [];
              index.matching(step.topic, out);
              const expected = registered.filter((v) => v.filter.matches(step.topic));
              const byName = (a: Named, b: Named) => a.name - b.name;
              expect(out.sort(byName)).toEqual(expected.sort(byName));
            }
            expect(index.size).toBe(registered.length);
          }
        },
      ),
      fcParams(),
    );
  });

  test("matchers registered in a table answer new and old topics as Filter.matches does", () => {
    fc.assert(
      fc.property(
        fc.array(topicArb, { maxLength: 20 }),
        fc.array(filterArb, { minLength: 1, maxLength: 8 }),
        fc.array(topicArb, { maxLength: 40 }),
        fc.nat(8),
        (before, filters, after, closeAt) => {
          const table = new TopicTable();
          for (const topic of before) table.internValid(topic);
          const matchers = filters.map((texts) => new FilterMatcher(table, Filter.of(...texts)));
          for (const [i, topic] of after.entries()) {
            // Some matchers close part-way: they answer later topics by themselves.
            if (i === closeAt) for (const matcher of matchers.slice(0, closeAt)) matcher.close();
            table.internValid(topic);
          }
          for (const matcher of matchers)
            for (let id = 0; id < table.topicCount; id++)
              expect(matcher.matches(id)).toBe(matcher.filter.matches(table.topicName(id)));
        },
      ),
      fcParams(),
    );
  });

  test("a new topic of a partition no entry can match is not walked; a later entry is seen", () => {
    const table = new TopicTable();
    let walks = 0;
    const matching = table.filters.matching.bind(table.filters);
    table.filters.matching = (name, out) => {
      walks++;
      matching(name, out);
    };
    const x = new FilterMatcher(table, Filter.of("x/y/**", "n/q/z"));
    const answers = (topic: string, ...matchers: FilterMatcher[]) => {
      const id = table.internValid(topic);
      return matchers.map((matcher) => matcher.matches(id));
    };
    // "m/…": no entry begins with "m": no walk, and no matcher matches.
    expect([answers("m/p/t1", x), walks]).toEqual([[false], 0]);
    expect([answers("m/p/t2", x), walks]).toEqual([[false], 0]);
    // "n/…": x has an entry beginning with "n": walked (in every partition of "n").
    expect([answers("n/p/t3", x), walks]).toEqual([[false], 1]);
    expect([answers("n/q/z", x), walks]).toEqual([[true], 2]);
    // A matcher registered later is seen by the next new topic of a partition judged before.
    const m = new FilterMatcher(table, Filter.of("m/p/**"));
    expect([answers("m/p/t4", x, m), walks]).toEqual([[false, true], 3]);
    m.close();
    expect([answers("m/p/t5", x), walks]).toEqual([[false], 3]);
    const everything = new FilterMatcher(table, Filter.of("**"));
    expect(answers("m/p/t6", x, everything)).toEqual([false, true]);
    everything.close();
    const pattern = new FilterMatcher(table, Filter.of("*/p/t7"));
    expect(answers("m/p/t7", x, pattern)).toEqual([false, true]);
    pattern.close();
    expect([answers("m/p/t8", x), walks]).toEqual([[false], 5]);
  });

  test("a new topic among 50 × 256 subscriptions of 256 entries costs no per-filter match", () => {
    const table = new TopicTable();
    // 256 distinct filters (parsing is quadratic in entries), each shared by 50 matchers.
    const filters = Array.from({ length: 256 }, (_, f) =>
      Filter.of(
        ...Array.from({ length: 256 }, (_, e) =>
          e % 2 === 0 ? `c${f}/s${e}/t` : `c${f}/s${e}/**`,
        ),
      ),
    );
    const matchers: FilterMatcher[] = [];
    for (let c = 0; c < 50; c++)
      for (const filter of filters) matchers.push(new FilterMatcher(table, filter));
    let filterCalls = 0;
    const original = Filter.prototype.matches;
    Filter.prototype.matches = function (this: Filter, name: string) {
      filterCalls++;
      return original.call(this, name);
    };
    try {
      const started = performance.now();
      const ids = [];
      for (let t = 0; t < 1000; t++) ids.push(table.internValid(`new/p${t % 10}/t${t}`));
      const hit = table.internValid("c7/s3/x/y"); // under the subtree `c7/s3/**`
      const exact = table.internValid("c9/s4/t");
      const elapsedMs = performance.now() - started;
      let yes = 0;
      let wrong = 0;
      for (const matcher of matchers) {
        for (const id of ids) if (matcher.matches(id)) wrong++;
        if (matcher.matches(hit)) yes++;
        if (matcher.matches(exact)) yes++;
      }
      expect({ filterCalls, yes, wrong }).toEqual({ filterCalls: 0, yes: 100, wrong: 0 });
      // A linear scan is 12,800 filters per topic; the walk is a few map lookups. Generous bound.
      expect(elapsedMs).toBeLessThan(500);
    } finally {
      Filter.prototype.matches = original;
    }
    // Registering the 12,800 matchers (3.3 M entries) is what takes seconds, not the interning
    // timed above: 3.5-7.8 s on a loaded 2-core machine, past the default 5 s.
  }, 20_000);

  test("a new topic among 50 × 256 subscriptions of * patterns walks * children, no scan", () => {
    const table = new TopicTable();
    // `c7/*` + `/s3` and `*` + `/c7/s3/**`: the walk follows a literal and a `*` child per node.
    const filters = Array.from({ length: 256 }, (_, f) =>
      Filter.of(
        ...Array.from({ length: 64 }, (_, e) =>
          e % 2 === 0 ? `c${f}/*/s${e}` : `*/c${f}/s${e}/**`,
        ),
      ),
    );
    const matchers: FilterMatcher[] = [];
    for (let c = 0; c < 50; c++)
      for (const filter of filters) matchers.push(new FilterMatcher(table, filter));
    let filterCalls = 0;
    const original = Filter.prototype.matches;
    Filter.prototype.matches = function (this: Filter, name: string) {
      filterCalls++;
      return original.call(this, name);
    };
    try {
      const started = performance.now();
      const ids = [];
      for (let t = 0; t < 1000; t++) ids.push(table.internValid(`new/p${t % 10}/t${t}`));
      const one = table.internValid("c7/any/s4"); // `c7/*` + `/s4`
      const below = table.internValid("x/c9/s3/y"); // `*` + `/c9/s3/**`
      const elapsedMs = performance.now() - started;
      let yes = 0;
      let wrong = 0;
      for (const matcher of matchers) {
        for (const id of ids) if (matcher.matches(id)) wrong++;
        if (matcher.matches(one)) yes++;
        if (matcher.matches(below)) yes++;
      }
      expect({ filterCalls, yes, wrong }).toEqual({ filterCalls: 0, yes: 100, wrong: 0 });
      expect(elapsedMs).toBeLessThan(500);
    } finally {
      Filter.prototype.matches = original;
    }
  });
});
