import { expect, test } from "bun:test";
import fc from "fast-check";
import { SPLIT_STORE_ID_BYTES_MAX } from "../constants.ts";
import { fcParams } from "../testing/fc_params.ts";
import { validateTopic } from "../topic/mod.ts";
import { subtreeStoreIdOf } from "./subtree_store_id.ts";

test("ids: '/' as '+', unsafe characters escaped, '=' for a topic alone", () => {
  const ids = [
    subtreeStoreIdOf("app/orders/new", false),
    subtreeStoreIdOf("app/orders", true),
    subtreeStoreIdOf("v1.2/a_b/c-d", false),
    subtreeStoreIdOf(".hidden/x", false),
    subtreeStoreIdOf("a/../b", false),
    subtreeStoreIdOf("a:b/c?d/e%f/g=h/~", false),
  ];
  expect(ids).toMatchInlineSnapshot(`
    [
      "app+orders+new",
      "app+orders=",
      "v1.2+a_b+c-d",
      "%2Ehidden+x",
      "a+..+b",
      "a%3Ab+c%3Fd+e%25f+g%3Dh+%7E",
    ]
  `);
});

test("long prefixes keep a readable head and a hash; distinct prefixes stay distinct", () => {
  const long = `${"x".repeat(120)}/${"?".repeat(120)}`;
  const id = subtreeStoreIdOf(long, false);
  expect(id.length).toBeLessThanOrEqual(SPLIT_STORE_ID_BYTES_MAX);
  expect(id.startsWith(`${"x".repeat(120)}+%3F`)).toBe(true);
  expect(id).toMatch(/[^%][^%]~[0-9a-f]{8}$/);
  expect(subtreeStoreIdOf(`${long}a`, false)).not.toBe(id);
});

test("ids are file-name safe, bounded and one-to-one on topics", () => {
  const segment = fc.string({
    unit: fc.constantFrom(..."ab.-_~:?%=\\\"'!$&@^`|<>{}[]()".split("")),
    minLength: 1,
    maxLength: 90,
  });
  const topic = fc
    .array(segment, { minLength: 1, maxLength: 4 })
    .map((segments) => segments.join("/"))
    .filter((name) => validateTopic(name) === null);
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.tuple(topic, fc.boolean()), {
        minLength: 1,
        maxLength: 20,
        selector: ([name, exact]) => `${name}${exact}`,
      }),
      (entries) => {
        const ids = entries.map(([name, exact]) => subtreeStoreIdOf(name, exact));
        for (const id of ids) {
          expect(id).toMatch(/^[A-Za-z0-9._%+=~-]+$/);
          expect(id.startsWith(".")).toBe(false);
          expect(id.length).toBeLessThanOrEqual(SPLIT_STORE_ID_BYTES_MAX);
        }
        expect(new Set(ids).size).toBe(ids.length);
      },
    ),
    fcParams(),
  );
});
