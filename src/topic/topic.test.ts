import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  dottedTopicAdvice,
  Filter,
  FilterMatcher,
  foreignFilterAdvice,
  TopicTable,
  partitionOf,
  validateTopic,
} from "./mod.ts";
import { fcParams } from "../testing/fc_params.ts";

describe("validateTopic", () => {
  test("reasons", () => {
    const names = [
      "a",
      "app/codestore/commits",
      "",
      "/a",
      "a/",
      "a//b",
      "a b",
      "a/*/c",
      "a/#",
      "a+b",
      "é",
      "a\tb",
      "x".repeat(255),
      "x".repeat(256),
      Array(32).fill("s").join("/"),
      Array(33).fill("s").join("/"),
    ];
    expect(
      names.map(
        (name) =>
          `${name.length > 20 ? `${name.slice(0, 8)}…` : name} → ${validateTopic(name) ?? "valid"}`,
      ),
    ).toMatchInlineSnapshot(`
        [
          "a → valid",
          "app/code… → valid",
          " → topic is empty",
          "/a → topic starts with '/'",
          "a/ → topic ends with '/'",
          "a//b → topic has an empty segment at byte 2",
          "a b → topic has whitespace or a control character at byte 1",
          "a/*/c → topic has wildcard character '*' at byte 2",
          "a/# → topic has wildcard character '#' at byte 2",
          "a+b → topic has wildcard character '+' at byte 1",
          "é → topic has a non-ASCII character at byte 0",
          "a	b → topic has whitespace or a control character at byte 1",
          "xxxxxxxx… → valid",
          "xxxxxxxx… → topic is 256 bytes, more than the limit of 255",
          "s/s/s/s/… → valid",
          "s/s/s/s/… → topic has 33 segments, more than the limit of 32",
        ]
      `);
  });
});

describe("partitionOf", () => {
  test("first two segments", () => {
    expect(
      ["a", "a/b", "a/b/c", "app/codestore/commits/x"].map(partitionOf),
    ).toMatchInlineSnapshot(`
      [
        "a",
        "a/b",
        "a/b",
        "app/codestore",
      ]
    `);
  });
});

describe("Filter", () => {
  test("normalises: covered entries drop, duplicates collapse, entries sort", () => {
    expect(
      Filter.of("a/b/c", "a/b/**", "x/y", "x/y", "a/b/c/d").toStrings(),
    ).toMatchInlineSnapshot(`
      [
        "a/b/**",
        "x/y",
      ]
    `);
    expect(Filter.of("z", "a/**", "**").toStrings()).toMatchInlineSnapshot(`
      [
        "**",
      ]
    `);
    expect(Filter.of("a/b", "a/b/**").toStrings()).toMatchInlineSnapshot(`
      [
        "a/b/**",
      ]
    `);
  });

  test("invalid filters get a reason", () => {
    const cases = [
      [],
      ["a/b*"],
      ["a/*x/c/**"],
      ["a/**/b"],
      ["/**"],
      ["a/b/"],
      Array(257).fill("a"),
    ];
    expect(
      cases.map((texts) => {
        const parsed = Filter.parse(texts);
        return parsed.ok ? "ok" : parsed.reason;
      }),
    ).toMatchInlineSnapshot(`
      [
        "filter has no entries",
        "filter entry "a/b*": '*' stands for one whole segment, so segment "b*" is invalid",
        "filter entry "a/*x/c/**": '*' stands for one whole segment, so segment "*x" is invalid",
        "filter entry "a/**/b": '**' may only end a filter (as in a/**)",
        "filter entry "/**": topic is empty",
        "filter entry "a/b/": topic ends with '/'",
        "filter has 257 entries, more than the limit of 256",
      ]
    `);
  });

  test("another system's wildcards get what Aria writes instead; validation is unchanged", () => {
    const cases = [
      ["app/#"],
      ["#"],
      ["app/+/x"],
      ["app/+/#"],
      ["orders.*"],
      ["app/orders.*.created"],
    ];
    expect(
      cases.map((texts) => {
        const parsed = Filter.parse(texts);
        return parsed.ok ? "ok" : parsed.reason;
      }),
    ).toMatchInlineSnapshot(`
      [
        "filter entry "app/#": topic has wildcard character '#' at byte 4; '#' is MQTT's multi-level wildcard: Aria writes app/** (app and every topic below it)",
        "filter entry "#": topic has wildcard character '#' at byte 0; '#' is MQTT's multi-level wildcard: Aria writes ** (every topic)",
        "filter entry "app/+/x": topic has wildcard character '+' at byte 4; '+' is MQTT's single-level wildcard: Aria writes app/*/x",
        "filter entry "app/+/#": topic has wildcard character '+' at byte 4; '#' is MQTT's multi-level wildcard: Aria writes app/*/** (app/* and every topic below it)",
        "filter entry "orders.*": '*' stands for one whole segment, so segment "orders.*" is invalid; Aria's separator is '/', not '.' (NATS's): Aria writes orders/*",
        "filter entry "app/orders.*.created": '*' stands for one whole segment, so segment "orders.*.created" is invalid; Aria's separator is '/', not '.' (NATS's): Aria writes app/orders/*/created",
      ]
    `);
    // Valid Aria filters stay valid, and get no advice (a NATS `>` is refused by the CLI only).
    expect(["orders.>", ">", "orders.created"].map((text) => Filter.parse([text]).ok)).toEqual([
      true,
      true,
      true,
    ]);
    expect(
      ["app/**", "**", "a/b", "orders.created", "app/v1.2", "a/*", "a/**/b"].map(
        foreignFilterAdvice,
      ),
    ).toEqual([null, null, null, null, null, null, null]);
    expect(["orders.>", ">", "app/orders.>"].map(foreignFilterAdvice)).toMatchInlineSnapshot(`
      [
        "Aria's separator is '/', not '.' (NATS's): the subtree is orders/**",
        "'>' is NATS's wildcard for everything: Aria writes **",
        "Aria's separator is '/', not '.' (NATS's): the subtree is app/orders/**",
      ]
    `);
  });

  test("a dotted name without '/' gets a warning; one with '/' or a wildcard does not", () => {
    expect(
      ["orders.created", "a.b.c", "app/v1.2", "orders", "orders.>", "orders.", ".x"].map(
        (text) => `${text}: ${dottedTopicAdvice(text)}`,
      ),
    ).toMatchInlineSnapshot(`
      [
        "orders.created: Aria's separator is '/', not '.': this is one segment (orders/created has 2)",
        "a.b.c: Aria's separator is '/', not '.': this is one segment (a/b/c has 3)",
        "app/v1.2: null",
        "orders: null",
        "orders.>: null",
        "orders.: null",
        ".x: null",
      ]
    `);
  });

  test("matching", () => {
    const filter = Filter.of("app/codestore/**", "app/orders/created");
    const topics = [
      "app/codestore",
      "app/codestore/commits",
      "app/codestorex",
      "app/orders/created",
      "app/orders/created/eu",
      "app/orders",
      "app",
    ];
    expect(topics.map((t) => `${t}: ${filter.matches(t)}`)).toMatchInlineSnapshot(`
      [
        "app/codestore: true",
        "app/codestore/commits: true",
        "app/codestorex: false",
        "app/orders/created: true",
        "app/orders/created/eu: false",
        "app/orders: false",
        "app: false",
      ]
    `);
  });

  test("touchesPartition", () => {
    const filter = Filter.of("a/**", "b/c/d", "e/f/**", "g");
    const partitions = ["a", "a/x", "ab", "b/c", "b", "e/f", "e", "g", "g/h"];
    expect(partitions.map((p) => `${p}: ${filter.touchesPartition(p)}`)).toMatchInlineSnapshot(`
      [
        "a: true",
        "a/x: true",
        "ab: false",
        "b/c: true",
        "b: false",
        "e/f: true",
        "e: false",
        "g: true",
        "g/h: false",
      ]
    `);
  });
});

const segment = fc.constantFrom("a", "b", "c", "dd");
const topicArb = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const entryArb = fc.oneof(
  topicArb,
  topicArb.map((t) => `${t}/**`),
  fc.constant("**"),
);

describe("filters and interning, against a naive reference", () => {
  test("normalised filter matches exactly what its raw entries match", () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { minLength: 1, maxLength: 6 }),
        fc.array(topicArb, { maxLength: 30 }),
        (texts, topics) => {
          const filter = Filter.of(...texts);
          for (const topic of topics) {
            const naive = texts.some(
              (e) =>
                e === "**" ||
                e === topic ||
                (e.endsWith("/**") &&
                  (topic === e.slice(0, -3) || topic.startsWith(e.slice(0, -2)))),
            );
            expect(filter.matches(topic)).toBe(naive);
            if (naive) expect(filter.touchesPartition(partitionOf(topic))).toBe(true);
          }
        },
      ),
      fcParams(),
    );
  });

  test("matcher answers by id equal Filter.matches, as topics keep appearing", () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { minLength: 1, maxLength: 6 }),
        fc.array(topicArb, { maxLength: 60 }),
        (texts, topics) => {
          const table = new TopicTable();
          const filter = Filter.of(...texts);
          const matcher = new FilterMatcher(table, filter);
          for (const topic of topics) {
            const id = table.internValid(topic);
            expect(table.topicName(id)).toBe(topic);
            expect(table.partitionName(table.partitionOfTopic(id))).toBe(partitionOf(topic));
            expect(matcher.matches(id)).toBe(filter.matches(topic));
            const touched = Array.from(matcher.partitions());
            const expected = [];
            for (let p = 0; p < table.partitionCount; p++)
              if (filter.touchesPartition(table.partitionName(p))) expected.push(p);
            expect(touched).toEqual(expected);
          }
          for (let id = 0; id < table.topicCount; id++)
            expect(matcher.matches(id)).toBe(filter.matches(table.topicName(id)));
        },
      ),
      fcParams(),
    );
  });
});

describe("TopicTable", () => {
  test("ids are dense and stable; bad names get reasons", () => {
    const table = new TopicTable();
    const ids = ["a/b/c", "a/b/d", "x", "a/b/c", "a/e"].map((t) => table.internValid(t));
    expect({
      ids,
      topics: table.topicCount,
      partitions: table.partitionCount,
      bad: table.intern("a//b"),
    }).toMatchInlineSnapshot(`
        {
          "bad": {
            "ok": false,
            "reason": "topic has an empty segment at byte 2",
          },
          "ids": [
            0,
            1,
            2,
            0,
            3,
          ],
          "partitions": 3,
          "topics": 4,
        }
      `);
    expect(table.lookup("nope")).toBe(-1);
  });

  test("grows past its initial capacity", () => {
    const table = new TopicTable();
    for (let i = 0; i < 5000; i++) expect(table.internValid(`p${i % 7}/q/t${i}`)).toBe(i);
    expect(table.partitionOfTopic(4999)).toBe(table.lookupPartition("p1/q"));
  });

  test("each topic's partition is partitionOf's, through the partition cache's collisions", () => {
    // More partitions than the cache has slots, names that share prefixes, lengths and slots
    // ("a/b" and "a/bc", "ab" and "a/b"), topics of one and two segments.
    const table = new TopicTable();
    const names: string[] = [];
    for (let i = 0; i < 3000; i++) {
      const p = `p${i % 1500}`;
      names.push(`${p}/q${i % 3}/t${i}`, `${p}/q${i % 3}`, p, `${p}x/q/t${i}`, `a/${p}`);
    }
    names.push("a/b", "a/bc", "ab", "a/b/c", "a/bc/d", "ab/c/d");
    for (const name of names) {
      const id = table.internValid(name);
      expect(table.partitionName(table.partitionOfTopic(id))).toBe(partitionOf(name));
    }
  });
});

describe("TopicTable limit", () => {
  test("a full table refuses new topics with a reason, counts them, and still knows old ones", () => {
    const table = new TopicTable({ topicsMax: 3 });
    for (const name of ["a", "b", "c"]) table.internValid(name);
    const refused = [table.intern("d"), table.intern("e/f")];
    expect({ refused, known: table.intern("b"), stats: table.stats() }).toMatchInlineSnapshot(`
      {
        "known": {
          "ok": true,
          "topicId": 1,
        },
        "refused": [
          {
            "ok": false,
            "reason": "server holds 3 topics, the limit",
          },
          {
            "ok": false,
            "reason": "server holds 3 topics, the limit",
          },
        ],
        "stats": {
          "known": 3,
          "max": 3,
          "refused": 2,
        },
      }
    `);
  });
});
