/**
 * The MQTT ↔ Aria topic mapping: examples, lossless round trips of random MQTT names, Aria
 * validity of every result, and matching: for random names and filters, the MQTT rule (a reference
 * written from the spec) agrees with Aria's Filter on the mapped strings plus the `$` rule.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { TOPIC_BYTES_MAX } from "../constants.ts";
import { fcParams } from "../testing/fc_params.ts";
import { Filter, validateTopic } from "../topic/mod.ts";
import { REASON } from "./packets.ts";
import {
  ariaTopicToMqtt,
  isDollarTopic,
  mqttFilterMatches,
  mqttFilterToAria,
  mqttTopicToAria,
} from "./topic_map.ts";

const aria = (name: string) => {
  const result = mqttTopicToAria(name);
  return result.ok ? result.topic : `refused ${result.reasonCode.toString(16)}`;
};
const ariaFilter = (filter: string) => {
  const result = mqttFilterToAria(filter);
  if (!result.ok) return `refused ${result.reasonCode.toString(16)}`;
  const share = result.share === null ? "" : ` share=${result.share}`;
  return `${result.entries.join(" ")}${share}${result.dollarExcluded ? " $excluded" : ""}`;
};

describe("topic names", () => {
  test("examples", () => {
    const examples = [
      "sensors/kitchen",
      "$SYS/broker/uptime",
      "a//b",
      "/a",
      "a/",
      "/",
      "a b/c",
      "café/été",
      "100%",
      "a/%",
      "a/*",
      "日本",
      "\uFEFFbom",
      "tab\there",
    ];
    expect(Object.fromEntries(examples.map((name) => [name, aria(name)]))).toMatchInlineSnapshot(`
      {
        "$SYS/broker/uptime": "$SYS/broker/uptime",
        "/": "%/%",
        "/a": "%/a",
        "100%": "100%25",
        "a b/c": "a%20b/c",
        "a/": "a/%",
        "a/%": "a/%25",
        "a/*": "a/%2A",
        "a//b": "a/%/b",
        "café/été": "caf%C3%A9/%C3%A9t%C3%A9",
        "sensors/kitchen": "sensors/kitchen",
        "tab\\there": "tab%09here",
        "日本": "%E6%97%A5%E6%9C%AC",
        "\uFEFFbom": "%EF%BB%BFbom",
      }
    `);
  });

  test("refused: empty, wildcards, too long or too deep once mapped", () => {
    expect(aria("")).toBe("refused 90");
    expect(aria("a/+")).toBe("refused 90");
    expect(aria("#")).toBe("refused 90");
    expect(aria("x".repeat(TOPIC_BYTES_MAX))).toBe("x".repeat(TOPIC_BYTES_MAX));
    expect(aria("é".repeat(42))).toBe("%C3%A9".repeat(42));
    // 43 two-byte characters: 258 bytes once escaped.
    expect(aria("é".repeat(43))).toBe("refused 90");
    expect(aria(new Array(32).fill("a").join("/"))).not.toStartWith("refused");
    expect(aria(new Array(33).fill("a").join("/"))).toBe("refused 90");
    const empty = mqttTopicToAria("");
    expect(empty.ok ? null : empty.reasonCode).toBe(REASON.TOPIC_NAME_INVALID);
  });

  const nameArbitrary = fc
    .oneof(
      fc.string({ unit: "binary", maxLength: 30 }),
      fc.string({ maxLength: 30 }),
      fc
        .array(fc.constantFrom("a", "b", "", " ", "%", "%25", "é", "$", "*", "\uFEFF"), {
          minLength: 1,
          maxLength: 6,
        })
        .map((levels) => levels.join("/")),
    )
    .filter(
      (name) =>
        name.length > 0 &&
        name.isWellFormed() &&
        !name.includes("\u0000") &&
        !name.includes("+") &&
        !name.includes("#"),
    );

  test("lossless: every MQTT name maps to a valid Aria topic and back", () => {
    fc.assert(
      fc.property(nameArbitrary, (name) => {
        const mapped = mqttTopicToAria(name);
        if (!mapped.ok) {
          expect(mapped.reason).toMatch(/more than/);
          return;
        }
        expect(validateTopic(mapped.topic)).toBe(null);
        expect(ariaTopicToMqtt(mapped.topic)).toBe(name);
        if (validateTopic(name) === null && !name.includes("%")) expect(mapped.topic).toBe(name);
      }),
      fcParams({ runs: 2000 }),
    );
  });

  test("injective: two names never map to one topic", () => {
    fc.assert(
      fc.property(nameArbitrary, nameArbitrary, (a, b) => {
        const x = mqttTopicToAria(a);
        const y = mqttTopicToAria(b);
        if (x.ok && y.ok && a !== b) expect(x.topic).not.toBe(y.topic);
      }),
      fcParams({ runs: 2000 }),
    );
  });

  test("native topics that are no mapping's result are shown as they are", () => {
    expect(ariaTopicToMqtt("a/%zz")).toBe("a/%zz");
    expect(ariaTopicToMqtt("a/%41")).toBe("a/%41");
    expect(ariaTopicToMqtt("a/%C3")).toBe("a/%C3");
    expect(ariaTopicToMqtt("a/b%2")).toBe("a/b%2");
    expect(ariaTopicToMqtt("a/%/b")).toBe("a//b");
  });
});

describe("topic filters", () => {
  test("examples", () => {
    const examples = [
      "sensors/+/temperature",
      "sensors/#",
      "#",
      "+",
      "+/b/#",
      "a//+",
      "/#",
      "$SYS/#",
      "$share/workers/jobs/+",
      "$share/g/#",
      "café/+",
      "a/#/b",
      "a+/b",
      "a/b#",
      "$share//a",
      "$share/g",
      "$share/g/",
      "$share/g+/a",
    ];
    expect(
      Object.fromEntries(examples.map((filter) => [filter, ariaFilter(filter)])),
    ).toMatchInlineSnapshot(`
      {
        "#": "** $excluded",
        "$SYS/#": "$SYS/**",
        "$share//a": "refused 8f",
        "$share/g": "refused 8f",
        "$share/g+/a": "refused 8f",
        "$share/g/": "refused 8f",
        "$share/g/#": "** share=g $excluded",
        "$share/workers/jobs/+": "jobs/* share=workers",
        "+": "* $excluded",
        "+/b/#": "*/b/** $excluded",
        "/#": "%/**",
        "a+/b": "refused 8f",
        "a/#/b": "refused 8f",
        "a//+": "a/%/*",
        "a/b#": "refused 8f",
        "café/+": "caf%C3%A9/*",
        "sensors/#": "sensors/**",
        "sensors/+/temperature": "sensors/*/temperature",
      }
    `);
  });

  const LEVELS = ["a", "b", "", "é", "%", "$x", "*"];
  const nameArbitrary = fc
    .array(fc.constantFrom(...LEVELS), { minLength: 1, maxLength: 5 })
    .map((levels) => levels.join("/"))
    .filter((name) => name.length > 0);
  const filterArbitrary = fc
    .tuple(
      fc.array(fc.constantFrom(...LEVELS, "+", "+"), { minLength: 1, maxLength: 5 }),
      fc.boolean(),
    )
    .map(([levels, hash]) => (hash ? [...levels.slice(0, -1), "#"] : levels).join("/"))
    .filter((filter) => filter.length > 0);

  test("the MQTT rule ⇔ Aria's Filter on the mapped strings, with the $ rule", () => {
    let matched = 0;
    fc.assert(
      fc.property(filterArbitrary, nameArbitrary, (filter, name) => {
        const mappedFilter = mqttFilterToAria(filter);
        const mappedName = mqttTopicToAria(name);
        if (!mappedFilter.ok || !mappedName.ok) throw new Error(`not mapped: ${filter} ${name}`);
        const ariaMatches = Filter.of(...mappedFilter.entries).matches(mappedName.topic);
        const excluded = mappedFilter.dollarExcluded && isDollarTopic(name);
        const expected = mqttFilterMatches(filter, name);
        if (expected) matched++;
        expect(ariaMatches && !excluded).toBe(expected);
      }),
      fcParams({ runs: 3000 }),
    );
    // The draw reaches both answers often.
    expect(matched).toBeGreaterThan(100);
  });

  test("the reference rule on the spec's examples (4.7.1, 4.7.2)", () => {
    const cases: [string, string, boolean][] = [
      ["sport/tennis/player1/#", "sport/tennis/player1", true],
      ["sport/tennis/player1/#", "sport/tennis/player1/ranking", true],
      ["sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true],
      ["sport/#", "sport", true],
      ["sport/tennis/+", "sport/tennis/player1", true],
      ["sport/tennis/+", "sport/tennis/player1/ranking", false],
      ["sport/+", "sport", false],
      ["sport/+", "sport/", true],
      ["+/+", "/finance", true],
      ["/+", "/finance", true],
      ["+", "/finance", false],
      ["#", "$SYS/x", false],
      ["+/monitor/Clients", "$SYS/monitor/Clients", false],
      ["$SYS/#", "$SYS/x", true],
      ["$SYS/monitor/+", "$SYS/monitor/Clients", true],
    ];
    for (const [filter, name, expected] of cases) {
      expect([filter, name, mqttFilterMatches(filter, name)]).toEqual([filter, name, expected]);
      const mapped = mqttFilterToAria(filter);
      const topic = mqttTopicToAria(name);
      if (!mapped.ok || !topic.ok) throw new Error("mapped");
      const aria = Filter.of(...mapped.entries).matches(topic.topic);
      expect(aria && !(mapped.dollarExcluded && isDollarTopic(name))).toBe(expected);
    }
  });
});

describe("any input", () => {
  const anyString = fc.oneof(
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.string({
      unit: fc.constantFrom("a", "/", "+", "#", "%", "$", "\u0000", "\uD800", " ", "*"),
    }),
  );

  test("never throws; what maps is a valid Aria topic or filter", () => {
    fc.assert(
      fc.property(anyString, (text) => {
        const topic = mqttTopicToAria(text);
        if (topic.ok) expect(validateTopic(topic.topic)).toBe(null);
        const filter = mqttFilterToAria(text);
        if (filter.ok) expect(Filter.parse(filter.entries).ok).toBe(true);
      }),
      fcParams({ runs: 2000 }),
    );
  });

  test("every Aria topic is an MQTT name, mapped back to itself unless it holds a %", () => {
    const ariaTopic = fc
      .array(fc.stringMatching(/^[!-~]{1,8}$/), { minLength: 1, maxLength: 5 })
      .map((segments) => segments.map((segment) => segment.replace(/[*#+/]/g, "_")).join("/"))
      .filter((topic) => validateTopic(topic) === null);
    fc.assert(
      fc.property(ariaTopic, (topic) => {
        const name = ariaTopicToMqtt(topic);
        expect(name.length > 0 && !/[+#]/.test(name) && !name.includes("\u0000")).toBe(true);
        const back = mqttTopicToAria(name);
        if (!topic.includes("%")) expect(back.ok && back.topic).toBe(topic);
        else if (name !== topic) expect(back.ok && back.topic).toBe(topic);
      }),
      fcParams({ runs: 2000 }),
    );
  });
});
