import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { greedyCuts } from "./cut_greedy.ts";
import { heuristicCuts } from "./cut_plan.ts";
import { planHeuristic } from "./heuristic.ts";
import { planProblem } from "./plan.ts";
import { planLines, tableArb, tableFrom } from "./split_arbitraries.ts";
import { buildTopicTree } from "./topic_tree.ts";

test("first three segments name the store; shorter topics get their own", () => {
  const table = tableFrom({
    "desk/fx/orders/new": 3100,
    "desk/fx/orders/fill": 41,
    "desk/fx/orders": 1,
    "desk/fx": 5,
    desk: 2,
    "desk/rates/usd/c1": 7,
    "desk/rates/usd/c2/x": 8,
  });
  expect(planLines(table, planHeuristic(table))).toMatchInlineSnapshot(`
    [
      "desk (desk): desk [2]",
      "desk+fx (desk/fx): desk/fx [5]",
      "desk+fx+orders (desk/fx): desk/fx/orders desk/fx/orders/fill desk/fx/orders/new [3142]",
      "desk+rates+usd (desk/rates): desk/rates/usd/c1 desk/rates/usd/c2/x [15]",
    ]
  `);
});

test("the published rule, exactly, on random tables; the tree-cut form agrees", () => {
  fc.assert(
    fc.property(tableArb(), (table) => {
      const plan = planHeuristic(table);
      expect(planProblem(table, plan)).toBeNull();
      const subtreeOfTopic = new Map<string, string>();
      for (const store of plan.subtrees)
        for (const topic of store.topics) subtreeOfTopic.set(table.topics[topic], store.id);
      const keys = new Map<string, string>();
      for (const topic of table.topics) {
        const segments = topic.split("/");
        const key = segments.length < 3 ? topic : segments.slice(0, 3).join("/");
        // Same key <=> same store.
        const id = subtreeOfTopic.get(topic)!;
        if (keys.has(key)) expect(id).toBe(keys.get(key)!);
        keys.set(key, id);
      }
      expect(new Set(keys.values()).size).toBe(keys.size);
      const tree = buildTopicTree(table);
      const cuts = greedyCuts(tree, heuristicCuts(tree), 0);
      expect(cuts.planSubtreeStores()).toEqual([...plan.subtrees]);
      expect(cuts.stores).toBe(plan.subtrees.length);
    }),
    fcParams(),
  );
});
