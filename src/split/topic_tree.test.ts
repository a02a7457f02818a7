import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { isUnder, partitionOf } from "../topic/mod.ts";
import { tableArb, tableFrom } from "./split_arbitraries.ts";
import { buildTopicTree, NODE_SELF, type TopicTree } from "./topic_tree.ts";

function dump(tree: TopicTree): string[] {
  const lines: string[] = [];
  const visit = (node: number, indent: string) => {
    const topic =
      tree.topicOfNode[node] >= 0 ? ` topic=${tree.table.topics[tree.topicOfNode[node]]}` : "";
    const root = tree.partitionRoots.includes(node) ? " ROOT" : "";
    lines.push(
      `${indent}${tree.kind[node] === NODE_SELF ? "[self] " : ""}${tree.path[node]} n=${tree.topicCount[node]} bytes=${tree.bytes[node]}${topic}${root}`,
    );
    for (
      let slot = tree.childStart[node];
      slot < tree.childStart[node] + tree.childCount[node];
      slot++
    )
      visit(tree.children[slot], `${indent}  `);
  };
  for (let node = 0; node < tree.nodeCount; node++) if (tree.parent[node] < 0) visit(node, "");
  return lines;
}

test("prefix nodes, self leaves, partition roots, children by bytes", () => {
  const tree = buildTopicTree(
    tableFrom({
      "app/orders/new": 5,
      "app/orders/new/eu": 90,
      "app/orders/fill": 7,
      app: 1,
      "app/audit": 2,
      solo: 3,
    }),
  );
  expect(dump(tree)).toMatchInlineSnapshot(`
    [
      "app n=5 bytes=105",
      "  app/orders n=3 bytes=102 ROOT",
      "    app/orders/new n=2 bytes=95",
      "      app/orders/new/eu n=1 bytes=90 topic=app/orders/new/eu",
      "      [self] app/orders/new n=1 bytes=5 topic=app/orders/new",
      "    app/orders/fill n=1 bytes=7 topic=app/orders/fill",
      "  app/audit n=1 bytes=2 topic=app/audit ROOT",
      "  [self] app n=1 bytes=1 topic=app ROOT",
      "solo n=1 bytes=3 topic=solo ROOT",
    ]
  `);
  expect(tree.partitionNames).toEqual(["app/audit", "app/orders", "solo", "app"]);
});

test("sums, leaves and partition roots hold on random tables", () => {
  fc.assert(
    fc.property(tableArb(), (table) => {
      const tree = buildTopicTree(table);
      const paths = new Set<string>();
      for (let node = 0; node < tree.nodeCount; node++) {
        expect(tree.parent[node]).toBeLessThan(node);
        const key = `${tree.kind[node]}:${tree.path[node]}`;
        expect(paths.has(key)).toBe(false);
        paths.add(key);
        let topics = 0;
        let bytes = 0;
        table.topics.forEach((topic, index) => {
          const under =
            tree.kind[node] === NODE_SELF
              ? topic === tree.path[node]
              : isUnder(topic, tree.path[node]);
          if (under) {
            topics++;
            bytes += table.bytes[index];
          }
        });
        expect([tree.topicCount[node], tree.bytes[node]]).toEqual([topics, bytes]);
      }
      table.topics.forEach((topic, index) => {
        expect(tree.path[tree.nodeOfTopic[index]]).toBe(topic);
        expect(tree.topicOfNode[tree.leafOfTopic[index]]).toBe(index);
        const roots = Array.from(tree.partitionRoots).filter((root) => {
          for (let node = tree.leafOfTopic[index]; node >= 0; node = tree.parent[node])
            if (node === root) return true;
          return false;
        });
        expect(roots.map((root) => tree.path[root])).toEqual([partitionOf(topic)]);
      });
    }),
    fcParams(),
  );
});
