/**
 * Permissions: deny wins over allow; a subscription is refused when any entry reaches outside
 * (never narrowed); publish answers cached per topic id agree with the uncached answer.
 */
import { expect, test } from "bun:test";
import { Filter, TopicTable } from "../topic/mod.ts";
import { Permissions, type Rule } from "./permissions.ts";

const rule = (allow: string[], deny: string[] = []): Rule => ({
  allow: allow.length === 0 ? null : Filter.of(...allow),
  deny: deny.length === 0 ? null : Filter.of(...deny),
});

test("publish: allowed subtrees and exact topics; deny wins over allow", () => {
  const permissions = new Permissions(
    rule(["app/orders/**", "metrics/cpu"], ["app/orders/audit/**", "app/orders/eu/secret"]),
    rule([]),
  );
  const cases: [string, boolean][] = [
    ["app/orders", true],
    ["app/orders/eu", true],
    ["app/orders/eu/secret", false],
    ["app/orders/audit", false],
    ["app/orders/audit/2026", false],
    ["app/ordersx", false],
    ["app/payments", false],
    ["metrics/cpu", true],
    ["metrics/cpu/0", false],
  ];
  // Not interned yet (decided by the rules), then interned past the first array (cached by id).
  const topics = new TopicTable();
  for (let i = 0; i < 300; i++) topics.internValid(`filler/${i}`);
  for (let round = 0; round < 3; round++) {
    for (const [topic, allowed] of cases) {
      expect([topic, permissions.mayPublish(topic, topics)]).toEqual([topic, allowed]);
      if (round === 1) topics.internValid(topic);
    }
  }
});

test("no allow rule: nothing may be published or subscribed", () => {
  const permissions = new Permissions(rule([]), rule([]));
  expect(permissions.mayPublish("a", new TopicTable())).toBe(false);
  expect(permissions.subscribeRefusal(Filter.of("a"))).toBe("a");
});

test("subscribe: a filter reaching outside is refused whole, naming the entry", () => {
  const permissions = new Permissions(
    rule([]),
    rule(["app/orders/**", "metrics/cpu"], ["app/orders/audit/**", "app/orders/eu/secret"]),
  );
  const refusal = (...texts: string[]) => permissions.subscribeRefusal(Filter.of(...texts));
  expect(refusal("app/orders/**")).toBe("app/orders/**"); // holds denied topics
  expect(refusal("app/**")).toBe("app/**"); // wider than allowed: not narrowed
  expect(refusal("**")).toBe("**");
  expect(refusal("app/orders/us/**")).toBeNull();
  expect(refusal("app/orders/eu/**")).toBe("app/orders/eu/**"); // holds app/orders/eu/secret
  expect(refusal("app/orders/eu/fr/**", "metrics/cpu")).toBeNull();
  expect(refusal("app/orders/audit/x")).toBe("app/orders/audit/x");
  expect(refusal("app/orders/audit/x/**")).toBe("app/orders/audit/x/**"); // inside a denied one
  expect(refusal("metrics/cpu/**")).toBe("metrics/cpu/**"); // only the exact topic is allowed
  expect(refusal("app/orders/us", "app/payments")).toBe("app/payments");
});

test("subscribe: a subtree wider than the allowed one is refused, with no deny rule at all", () => {
  const permissions = new Permissions(rule([]), rule(["app/orders/**"]));
  expect(permissions.subscribeRefusal(Filter.of("app/**"))).toBe("app/**");
  expect(permissions.subscribeRefusal(Filter.of("app"))).toBe("app");
  expect(permissions.subscribeRefusal(Filter.of("app/orders/eu/**"))).toBeNull();
});

test("publish: an id the table reclaimed and gave another topic is decided again", () => {
  const permissions = new Permissions(rule(["app/orders/**"]), rule([]));
  const topics = new TopicTable({ topicsMax: 1 });
  const first = topics.intern("app/orders/eu", 1);
  expect(permissions.mayPublish("app/orders/eu", topics)).toBe(true);
  // Retention removed everything below seq 10: the full table reclaims the id for a new topic.
  topics.reclaimBelow(() => 10);
  const second = topics.intern("app/payments/eu", 11);
  expect(second.ok && first.ok && second.topicId === first.topicId).toBe(true);
  expect(permissions.mayPublish("app/payments/eu", topics)).toBe(false);
});

test("subscribe: a * entry must lie inside an allowed entry and overlap no denied one", () => {
  const permissions = new Permissions(
    rule([]),
    rule(["app/**", "shop/*/orders/**"], ["app/eu/secret/**", "app/*/audit"]),
  );
  const refusal = (...texts: string[]) => permissions.subscribeRefusal(Filter.of(...texts));
  expect(refusal("app/*/public")).toBeNull();
  expect(refusal("app/*/secret/x")).toBe("app/*/secret/x"); // holds app/eu/secret/x
  expect(refusal("app/us/*")).toBe("app/us/*"); // holds app/us/audit
  expect(refusal("app/us/*/x")).toBeNull();
  expect(refusal("shop/*/orders/*")).toBeNull();
  expect(refusal("shop/eu/orders")).toBeNull();
  expect(refusal("shop/*/*")).toBe("shop/*/*"); // wider than shop/*/orders/**
  expect(refusal("*/eu/orders")).toBe("*/eu/orders");
});
