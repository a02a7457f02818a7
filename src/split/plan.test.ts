import { expect, test } from "bun:test";
import { planHeuristic } from "./heuristic.ts";
import { groupPlan, planProblem, type PlannedSubtreeStore, type SplitPlan } from "./plan.ts";
import { tableFrom } from "./split_arbitraries.ts";

const TABLE = tableFrom({ "a/b/c": 1, "a/b/d": 2, "a/x/y": 4 });

test("planProblem names the first broken invariant", () => {
  const good = planHeuristic(TABLE);
  expect(planProblem(TABLE, good)).toBeNull();
  const store = (
    id: string,
    partition: string,
    topics: number[],
    bytes: number,
  ): PlannedSubtreeStore => ({
    id,
    partition,
    topics: Int32Array.from(topics),
    bytes,
  });
  const broken: [string, PlannedSubtreeStore[], number | null][] = [
    ["mixed partitions", [store("a+b", "a/b", [0, 1, 2], 7)], null],
    [
      "a topic twice",
      [store("a+b", "a/b", [0, 1], 3), store("a+b~2", "a/b", [1], 2), store("a+x", "a/x", [2], 4)],
      null,
    ],
    ["a topic missing", [store("a+b", "a/b", [0, 1], 3)], null],
    ["wrong bytes", [store("a+b", "a/b", [0, 1], 4), store("a+x", "a/x", [2], 4)], null],
    ["unsafe id", [store("a/b", "a/b", [0, 1], 3), store("a+x", "a/x", [2], 4)], null],
    ["hidden id", [store(".ab", "a/b", [0, 1], 3), store("a+x", "a/x", [2], 4)], null],
    ["same id", [store("a+b", "a/b", [0, 1], 3), store("a+b", "a/x", [2], 4)], null],
    [
      "empty store",
      [store("a+b", "a/b", [0, 1], 3), store("a+x", "a/x", [2], 4), store("a+z", "a/z", [], 0)],
      null,
    ],
    ["over budget", [store("a+b", "a/b", [0, 1], 3), store("a+x", "a/x", [2], 4)], 1],
  ];
  const reasons = broken.map(([name, stores, budget]) => {
    const plan: SplitPlan = {
      algorithm: "adaptive",
      subtrees: stores,
      budget,
      budgetRaisedTo: null,
    };
    return `${name}: ${planProblem(TABLE, plan)}`;
  });
  expect(reasons).toMatchInlineSnapshot(`
    [
      "mixed partitions: store "a+b" of partition "a/b" holds "a/x/y"",
      "a topic twice: topic "a/b/d" is in two stores",
      "a topic missing: topic "a/x/y" is in no store",
      "wrong bytes: store "a+b": bytes 4, its topics sum to 3",
      "unsafe id: store "a/b": id is not file-name safe",
      "hidden id: store ".ab": id is not file-name safe",
      "same id: store "a+b": id used twice",
      "empty store: store "a+z": no topics",
      "over budget: 2 stores, over the budget of 1",
    ]
  `);
});

test("groupPlan orders stores by id and numbers colliding ids", () => {
  const table = tableFrom({ "a/b/c": 1, "a/b/d": 2, "a/b/e": 3, "a/b/f": 4 });
  const stores = groupPlan(table, Int32Array.from([2, 0, 1, 0]), [
    { id: "x~h", partition: "a/b" },
    { id: "x~h", partition: "a/b" },
    { id: "w", partition: "a/b" },
  ]);
  expect(
    stores.map((store) => `${store.id}: ${Array.from(store.topics).join(",")} [${store.bytes}]`),
  ).toEqual(["w: 0 [1]", "x~h: 1,3 [6]", "x~h~~2: 2 [3]"]);
});
