import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { isUnder } from "../topic/mod.ts";
import { planAdaptive } from "./adaptive.ts";
import { planHeuristic } from "./heuristic.ts";
import { planMetrics, subtreeReadBytes, topicWaste } from "./metrics.ts";
import { tableArb, tableFrom } from "./split_arbitraries.ts";
import { buildTopicTree, NODE_PREFIX } from "./topic_tree.ts";

/** The worked example of docs/split.md (computed by hand there). */
const EXAMPLE = tableFrom({
  "app/orders/new/eu": 9000,
  "app/orders/new/us": 1000,
  "app/orders/fill/eu": 300,
  "app/orders/fill/us": 100,
  "app/orders/cancel": 50,
  "app/audit/log": 20,
});

test("hand-computed metrics: heuristic", () => {
  // Stores: new {9000, 1000}, fill {300, 100}, cancel {50}, log {20}.
  // Topic waste: 1000 + 9000 + 100 + 300 + 0 + 0 = 10400; worst new/us (9000, ratio 10000/1000).
  // Subtrees: new/eu/** 1000, new/us/** 9000, fill/eu/** 100, fill/us/** 300: 10400 over 11 prefixes.
  expect(planMetrics(EXAMPLE, planHeuristic(EXAMPLE))).toMatchInlineSnapshot(`
    {
      "stores": 4,
      "subtrees": {
        "count": 11,
        "wastedBytesTotal": 10400,
        "worstRatio": {
          "ratio": 10,
          "subtree": "app/orders/new/us/**",
        },
        "worstWaste": {
          "subtree": "app/orders/new/us/**",
          "wastedBytes": 9000,
        },
      },
      "wastedBytesTotal": 10400,
      "worstRatio": {
        "ratio": 10,
        "topic": "app/orders/new/us",
      },
      "worstWaste": {
        "topic": "app/orders/new/us",
        "wastedBytes": 9000,
      },
    }
  `);
});

test("hand-computed metrics: adaptive at the same budget", () => {
  // Stores: new/eu {9000}, new {us 1000}, orders {fill/eu 300, fill/us 100, cancel 50} = 450, audit {20}.
  // Topic waste: 150 + 350 + 400 = 900; worst cancel (400, ratio 450/50 = 9).
  // Subtrees: fill/** 450-400 = 50, fill/eu 150, fill/us 350, cancel 400: 950.
  expect(planMetrics(EXAMPLE, planAdaptive(EXAMPLE))).toMatchInlineSnapshot(`
    {
      "stores": 4,
      "subtrees": {
        "count": 11,
        "wastedBytesTotal": 950,
        "worstRatio": {
          "ratio": 9,
          "subtree": "app/orders/cancel/**",
        },
        "worstWaste": {
          "subtree": "app/orders/cancel/**",
          "wastedBytes": 400,
        },
      },
      "wastedBytesTotal": 900,
      "worstRatio": {
        "ratio": 9,
        "topic": "app/orders/cancel",
      },
      "worstWaste": {
        "topic": "app/orders/cancel",
        "wastedBytes": 400,
      },
    }
  `);
});

test("a topic of 0 bytes counts one wanted byte in its ratio", () => {
  const table = tableFrom({ "a/b/c": 0, "a/b/c/d": 0, "a/b/c/e": 7 });
  expect(planMetrics(table, planHeuristic(table)).worstRatio).toEqual({ topic: "a/b/c", ratio: 7 });
});

test("topic and subtree waste match a naive count on random plans", () => {
  fc.assert(
    fc.property(tableArb(), fc.integer({ min: 0, max: 30 }), (table, maxStores) => {
      const plan = planAdaptive(table, { maxStores });
      const tree = buildTopicTree(table);
      const waste = topicWaste(table, plan);
      const read = subtreeReadBytes(tree, plan);
      let total = 0;
      for (const store of plan.subtrees) {
        total += (store.topics.length - 1) * store.bytes;
        for (const topic of store.topics)
          expect(waste[topic]).toBe(store.bytes - table.bytes[topic]);
      }
      const metrics = planMetrics(table, plan, { tree });
      expect(metrics.wastedBytesTotal).toBe(total);
      expect(metrics.worstWaste.wastedBytes).toBe(Math.max(...waste));
      let subtreeTotal = 0;
      let subtrees = 0;
      for (let node = 0; node < tree.nodeCount; node++) {
        if (tree.kind[node] !== NODE_PREFIX) continue;
        subtrees++;
        const prefix = tree.path[node];
        const touching = plan.subtrees.filter((store) =>
          Array.from(store.topics).some((topic) => isUnder(table.topics[topic], prefix)),
        );
        const under = table.topics.reduce(
          (sum, topic, index) => sum + (isUnder(topic, prefix) ? table.bytes[index] : 0),
          0,
        );
        const expected = touching.reduce((sum, store) => sum + store.bytes, 0);
        expect(read[node]).toBe(expected);
        subtreeTotal += expected - under;
      }
      expect([metrics.subtrees.count, metrics.subtrees.wastedBytesTotal]).toEqual([
        subtrees,
        subtreeTotal,
      ]);
    }),
    fcParams(),
  );
});
