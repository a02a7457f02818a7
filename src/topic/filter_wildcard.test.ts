/**
 * The single-level wildcard `*`: parsing, matching, covering, overlapping and partitions,
 * checked against a brute-force reference (a regular expression per raw entry, and every topic
 * of a small universe).
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import {
  entriesIntersect,
  entryCovers,
  Filter,
  FilterIndex,
  FilterMatcher,
  TopicTable,
} from "./mod.ts";

const LETTERS = ["a", "b", "c", "dd"];
/** Topics of 1..5 segments over LETTERS and one segment no entry names ("zz"). */
const UNIVERSE: string[] = [];
for (let length = 1, level = [""]; length <= 5; length++) {
  level = level.flatMap((p) => [...LETTERS, "zz"].map((s) => (p === "" ? s : `${p}/${s}`)));
  UNIVERSE.push(...level);
}
const PARTITIONS = UNIVERSE.filter((t) => t.split("/").length <= 2);

const segmentArb = fc.constantFrom(...LETTERS, "*", "*");
const bodyArb = fc.array(segmentArb, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const entryArb = fc.oneof(
  bodyArb,
  bodyArb.map((b) => `${b}/**`),
  fc.constant("**"),
);

/** The reference: an entry's raw text as a regular expression over topic names. */
function reference(text: string): RegExp {
  if (text === "**") return /^.+$/;
  const subtree = text.endsWith("/**");
  const body = subtree ? text.slice(0, -3) : text;
  const pattern = body
    .split("/")
    .map((s) => (s === "*" ? "[^/]+" : s))
    .join("/");
  return new RegExp(`^${pattern}${subtree ? "(/.*)?" : ""}$`);
}

const entryOf = (text: string) => Filter.of(text).entries[0];

describe("single-level wildcard *", () => {
  test("parses whole segments only, anywhere, with a trailing /**", () => {
    expect(Filter.of("app/*/orders/**", "*", "a/*/*/b").toStrings()).toEqual([
      "*",
      "a/*/*/b",
      "app/*/orders/**",
    ]);
    expect(Filter.of("*/**").toStrings()).toEqual(["**"]);
    for (const bad of ["ab*", "a/b*/c", "a/*b", "a/**/b", "a/*/", "*/"]) {
      expect(Filter.parse([bad]).ok).toBe(false);
    }
  });

  test("matches exactly one whole segment", () => {
    const filter = Filter.of("app/*/orders");
    expect(
      ["app/eu/orders", "app/us/orders", "app/orders", "app/eu/x/orders", "app/eu/orders/x"].map(
        (t) => filter.matches(t),
      ),
    ).toEqual([true, true, false, false, false]);
    const below = Filter.of("app/*/orders/**");
    expect(
      ["app/eu/orders", "app/eu/orders/x/y", "app/orders", "app/eu/x"].map((t) => below.matches(t)),
    ).toEqual([true, true, false, false]);
  });

  test("normalisation drops covered entries", () => {
    expect(Filter.of("app/*/orders", "app/**").toStrings()).toEqual(["app/**"]);
    expect(Filter.of("app/*/orders", "app/*/**").toStrings()).toEqual(["app/*/**"]);
    expect(Filter.of("app/eu/orders", "app/*/orders").toStrings()).toEqual(["app/*/orders"]);
    expect(Filter.of("app/*/orders", "*/eu/orders").toStrings()).toEqual([
      "*/eu/orders",
      "app/*/orders",
    ]);
  });

  test("matches, after normalisation, exactly what its raw entries match", () => {
    fc.assert(
      fc.property(fc.array(entryArb, { minLength: 1, maxLength: 5 }), (texts) => {
        const filter = Filter.of(...texts);
        const expressions = texts.map(reference);
        for (const topic of UNIVERSE) {
          expect(filter.matches(topic)).toBe(expressions.some((e) => e.test(topic)));
        }
      }),
      fcParams({ runs: 60 }),
    );
  });

  test("covers and intersects agree with brute force over the universe", () => {
    fc.assert(
      fc.property(entryArb, entryArb, (outer, inner) => {
        const o = reference(outer);
        const i = reference(inner);
        const innerTopics = UNIVERSE.filter((t) => i.test(t));
        const covered = innerTopics.every((t) => o.test(t));
        const overlap = innerTopics.some((t) => o.test(t));
        expect(entryCovers(entryOf(outer), entryOf(inner))).toBe(covered);
        expect(entriesIntersect(entryOf(outer), entryOf(inner))).toBe(overlap);
      }),
      fcParams({ runs: 300 }),
    );
  });

  test("touchesPartition: exactly the partitions holding a matching topic", () => {
    expect(Filter.of("app/*/orders").touchesPartition("app/eu")).toBe(true);
    expect(Filter.of("app/*/orders").touchesPartition("other/eu")).toBe(false);
    expect(Filter.of("*/eu/orders").touchesPartition("shop/eu")).toBe(true);
    expect(Filter.of("*/eu/orders").touchesPartition("shop/us")).toBe(false);
    fc.assert(
      fc.property(fc.array(entryArb, { minLength: 1, maxLength: 4 }), (texts) => {
        const filter = Filter.of(...texts);
        for (const partition of PARTITIONS) {
          const holds = UNIVERSE.filter(
            (t) => t === partition || (partition.includes("/") && t.startsWith(`${partition}/`)),
          );
          expect(filter.touchesPartition(partition)).toBe(holds.some((t) => filter.matches(t)));
        }
      }),
      fcParams({ runs: 60 }),
    );
  });

  test("the index walks * children, yields each value once, and prunes removed patterns", () => {
    type Named = { readonly filter: Filter; readonly name: string };
    const index = new FilterIndex<Named>();
    const a = { filter: Filter.of("app/*/orders", "app/eu/**"), name: "a" };
    const b = { filter: Filter.of("*/*/orders/**"), name: "b" };
    const c = { filter: Filter.of("app/us/orders"), name: "c" };
    for (const value of [a, b, c]) index.add(value);
    const names = (topic: string) => {
      const out: Named[] = [];
      index.matching(topic, out);
      return out.map((v) => v.name).sort();
    };
    expect(names("app/eu/orders")).toEqual(["a", "b"]);
    expect(names("app/us/orders")).toEqual(["a", "b", "c"]);
    expect(names("app/us/orders/x")).toEqual(["b"]);
    expect(names("app/orders")).toEqual([]);
    for (const value of [a, b, c]) index.remove(value);
    expect(names("app/eu/orders")).toEqual([]);
    const root = (
      index as unknown as { patterns: { children: Map<string, unknown>; star: unknown } }
    ).patterns;
    expect([root.children.size, root.star]).toEqual([0, undefined]);
  });

  test("a matcher's partitions: every known partition the pattern touches, and new ones", () => {
    const table = new TopicTable();
    for (const t of ["app/eu/orders", "shop/us/x", "shop/eu/y", "solo"]) table.internValid(t);
    const matcher = new FilterMatcher(table, Filter.of("*/eu/orders", "*"));
    const names = () => Array.from(matcher.partitions(), (id) => table.partitionName(id));
    expect(names()).toEqual(["app/eu", "shop/eu", "solo"]);
    table.internValid("new/eu/z");
    table.internValid("new/us/orders");
    expect(names()).toEqual(["app/eu", "shop/eu", "solo", "new/eu"]);
    matcher.close();
  });
});
