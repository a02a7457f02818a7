import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { partitionOf } from "../topic/mod.ts";
import { planAdaptive } from "./adaptive.ts";
import { greedyCuts } from "./cut_greedy.ts";
import { heuristicCuts, rootCuts } from "./cut_plan.ts";
import { planHeuristic } from "./heuristic.ts";
import { planMetrics } from "./metrics.ts";
import { planProblem } from "./plan.ts";
import { deepTableArb, planLines, tableArb, tableFrom } from "./split_arbitraries.ts";
import { buildTopicTree } from "./topic_tree.ts";

/** The worked example of docs/split.md. */
const EXAMPLE = tableFrom({
  "app/orders/new/eu": 9000,
  "app/orders/new/us": 1000,
  "app/orders/fill/eu": 300,
  "app/orders/fill/us": 100,
  "app/orders/cancel": 50,
  "app/audit/log": 20,
});

describe("planAdaptive on small trees", () => {
  test("worked example: the heuristic's budget of 4, then 5", () => {
    const four = planAdaptive(EXAMPLE);
    expect(four.budget).toBe(planHeuristic(EXAMPLE).subtrees.length);
    expect(planLines(EXAMPLE, four)).toMatchInlineSnapshot(`
      [
        "app+audit (app/audit): app/audit/log [20]",
        "app+orders (app/orders): app/orders/cancel app/orders/fill/eu app/orders/fill/us [450]",
        "app+orders+new (app/orders): app/orders/new/us [1000]",
        "app+orders+new+eu (app/orders): app/orders/new/eu [9000]",
      ]
    `);
    expect(planLines(EXAMPLE, planAdaptive(EXAMPLE, { maxStores: 5 }))).toMatchInlineSnapshot(`
      [
        "app+audit (app/audit): app/audit/log [20]",
        "app+orders (app/orders): app/orders/cancel app/orders/fill/us [150]",
        "app+orders+fill+eu (app/orders): app/orders/fill/eu [300]",
        "app+orders+new (app/orders): app/orders/new/us [1000]",
        "app+orders+new+eu (app/orders): app/orders/new/eu [9000]",
      ]
    `);
  });

  test("a large topic gets its own store; its small siblings share one", () => {
    const table = tableFrom({
      "a/b/big": 1_000_000,
      "a/b/s1": 10,
      "a/b/s2": 20,
      "a/b/s3": 30,
      "a/b/s4": 5,
    });
    expect(planLines(table, planAdaptive(table, { maxStores: 2 }))).toMatchInlineSnapshot(`
      [
        "a+b (a/b): a/b/s1 a/b/s2 a/b/s3 a/b/s4 [65]",
        "a+b+big (a/b): a/b/big [1000000]",
      ]
    `);
  });

  test("equal siblings are grouped into shared stores numbered under their prefix", () => {
    const rows: Record<string, number> = {};
    for (let i = 0; i < 8; i++) rows[`e/p/t${i}`] = 1000;
    const table = tableFrom(rows);
    expect(planLines(table, planAdaptive(table, { maxStores: 4 }))).toMatchInlineSnapshot(`
      [
        "e+p~1 (e/p): e/p/t0 e/p/t1 [2000]",
        "e+p~2 (e/p): e/p/t2 e/p/t3 [2000]",
        "e+p~3 (e/p): e/p/t4 e/p/t5 [2000]",
        "e+p~4 (e/p): e/p/t6 e/p/t7 [2000]",
      ]
    `);
  });

  test("above the heuristic's budget, the run seeded from the heuristic can win", () => {
    // Found by a property search: from one store per partition, greedy reaches 7 wasted bytes with
    // 5 stores; from the heuristic's 4 stores (12 wasted), one more cut reaches 6.
    const table = tableFrom({
      "p/q/a": 2,
      "p/q/b": 1,
      "p/q/b/a": 1,
      "p/q/b/a/a": 2,
      "p/q/c": 1,
      "p/q/c/a": 1,
      "p/q/d": 1,
      "p/q/d/a": 1,
    });
    const waste = [4, 5].map(
      (maxStores) => planMetrics(table, planAdaptive(table, { maxStores })).wastedBytesTotal,
    );
    expect([planMetrics(table, planHeuristic(table)).wastedBytesTotal, ...waste]).toEqual([
      12, 10, 6,
    ]);
  });

  test("equal topics in equal groups: from the heuristic's groups, twice its budget halves each", () => {
    // The shape of datasets/even.csv: 6 groups of 6 equal topics. From one store per partition,
    // greedy reaches 88,000 wasted bytes with 12 stores; halving each heuristic group reaches 72,000.
    const rows: Record<string, number> = {};
    for (let group = 0; group < 6; group++)
      for (let topic = 0; topic < 6; topic++) rows[`even/p0/c${group}/t${topic}`] = 1000;
    const table = tableFrom(rows);
    const waste = [6, 12].map(
      (maxStores) => planMetrics(table, planAdaptive(table, { maxStores })).wastedBytesTotal,
    );
    expect([planMetrics(table, planHeuristic(table)).wastedBytesTotal, ...waste]).toEqual([
      180_000, 180_000, 72_000,
    ]);
  });

  test("a budget below the partition count is raised to it and reported", () => {
    const plan = planAdaptive(EXAMPLE, { maxStores: 1 });
    expect([plan.budget, plan.budgetRaisedTo, plan.subtrees.length]).toEqual([2, 2, 2]);
    expect(planAdaptive(EXAMPLE, { maxStores: 2 }).budgetRaisedTo).toBeNull();
    expect(planAdaptive(EXAMPLE, { maxStores: 100 }).subtrees.length).toBe(EXAMPLE.topics.length);
  });
});

describe("planAdaptive properties on random trees", () => {
  const budgetArb = fc.integer({ min: 0, max: 45 });

  test("valid plans within budget; under budget only when no cut saves anything", () => {
    fc.assert(
      fc.property(tableArb(), budgetArb, (table, maxStores) => {
        const plan = planAdaptive(table, { maxStores });
        expect(planProblem(table, plan)).toBeNull();
        const partitions = new Set(table.topics.map(partitionOf)).size;
        expect(plan.budget).toBe(Math.max(maxStores, partitions));
        expect(plan.subtrees.length).toBeLessThanOrEqual(plan.budget!);
        if (plan.subtrees.length < plan.budget!) {
          for (const store of plan.subtrees)
            expect(store.topics.length === 1 || store.bytes === 0).toBe(true);
        }
      }),
      fcParams(),
    );
  });

  test("never wastes more than the heuristic at any budget >= its store count", () => {
    fc.assert(
      fc.property(fc.oneof(tableArb(), deepTableArb()), fc.nat(10), (table, extra) => {
        const heuristic = planHeuristic(table);
        const adaptive = planAdaptive(table, { maxStores: heuristic.subtrees.length + extra });
        expect(planMetrics(table, adaptive).wastedBytesTotal).toBeLessThanOrEqual(
          planMetrics(table, heuristic).wastedBytesTotal,
        );
      }),
      fcParams({ runs: 300 }),
    );
  });

  test("waste never grows with the budget", () => {
    fc.assert(
      fc.property(tableArb(), (table) => {
        let previous = Infinity;
        for (let budget = 0; budget <= table.topics.length; budget++) {
          const waste = planMetrics(
            table,
            planAdaptive(table, { maxStores: budget }),
          ).wastedBytesTotal;
          expect(waste).toBeLessThanOrEqual(previous);
          previous = waste;
        }
        expect(previous).toBe(0);
      }),
      fcParams(),
    );
  });

  test("the pruned search picks the same cuts as the naive reference; waste figures agree", () => {
    fc.assert(
      fc.property(
        fc.oneof(tableArb(60), deepTableArb()),
        fc.integer({ min: 0, max: 60 }),
        (table, budget) => {
          const tree = buildTopicTree(table);
          for (const cuts of [rootCuts(tree), heuristicCuts(tree)]) {
            const fast = greedyCuts(tree, cuts, budget);
            const reference = greedyCuts(tree, cuts, budget, { reference: true });
            const stores = fast.planSubtreeStores();
            expect(stores).toEqual(reference.planSubtreeStores());
            expect(fast.wastedBytes).toBe(reference.wastedBytes);
            const plan = {
              algorithm: "adaptive" as const,
              subtrees: stores,
              budget: null,
              budgetRaisedTo: null,
            };
            expect(planMetrics(table, plan).wastedBytesTotal).toBe(fast.wastedBytes);
          }
        },
      ),
      fcParams({ runs: 400 }),
    );
  });

  test("pruning keeps a light many-topic subtree that hides beside a heavier sibling", () => {
    // Found by searching with a weakened bound: each one picks a worse cut than the reference.
    const cases: [Record<string, number>, number][] = [
      [
        {
          "p/q/m/x": 1,
          "p/q/m/y/t0": 1,
          "p/q/m/y/t1": 1,
          "p/q/m/z/u0": 0,
          "p/q/m/z/u1": 0,
          "p/q/m/z/u2": 0,
          "p/q/o0": 1,
        },
        3,
      ],
      [
        {
          "p/q/m/x": 2,
          "p/q/m/y/t0": 1,
          "p/q/m/y/t1": 1,
          "p/q/m/z/u0": 0,
          "p/q/m/z/u1": 0,
          "p/q/m/z/u2": 0,
          "p/q/m/z/u3": 0,
          "p/q/o0": 3,
        },
        2,
      ],
    ];
    const plans = cases.map(([bytes, budget]) => {
      const table = tableFrom(bytes);
      const tree = buildTopicTree(table);
      const fast = greedyCuts(tree, rootCuts(tree), budget).planSubtreeStores();
      expect(fast).toEqual(
        greedyCuts(tree, rootCuts(tree), budget, { reference: true }).planSubtreeStores(),
      );
      return planLines(table, {
        algorithm: "adaptive",
        subtrees: fast,
        budget,
        budgetRaisedTo: null,
      });
    });
    expect(plans).toMatchInlineSnapshot(`
      [
        [
          "p+q (p/q): p/q/m/x p/q/o0 [2]",
          "p+q+m+y (p/q): p/q/m/y/t0 p/q/m/y/t1 [2]",
          "p+q+m+z (p/q): p/q/m/z/u0 p/q/m/z/u1 p/q/m/z/u2 [0]",
        ],
        [
          "p+q (p/q): p/q/m/x p/q/m/y/t0 p/q/m/y/t1 p/q/o0 [7]",
          "p+q+m+z (p/q): p/q/m/z/u0 p/q/m/z/u1 p/q/m/z/u2 p/q/m/z/u3 [0]",
        ],
      ]
    `);
  });
});
