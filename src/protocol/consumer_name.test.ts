/**
 * consumerNameRefusal: every name it accepts can be addressed by the admin API the way
 * `aria consumers rm` sends it (encodeURIComponent); `.` and `..` cannot (URL dot segments).
 */
import { expect, test } from "bun:test";
import { Hono } from "hono";
import { addConsumerRoutes } from "../admin/consumer_routes.ts";
import { consumerNameRefusal } from "./frame_parser.ts";

/** The name the admin route sees for a DELETE of `name` as the CLI sends it, or null (no route). */
async function addressed(name: string): Promise<string | null> {
  const app = new Hono();
  let asked: string | null = null;
  addConsumerRoutes(app, {
    consumerList: () => [],
    removeConsumer: (seen) => {
      asked = seen;
      return "removed";
    },
  });
  const url = new URL(`http://127.0.0.1/api/consumers/${encodeURIComponent(name)}`);
  await app.request(url.href, { method: "DELETE" });
  return asked;
}

test("consumer names . and .. are refused; every accepted name reaches the admin route", async () => {
  expect(consumerNameRefusal(".")).toContain("URL");
  expect(consumerNameRefusal("..")).toContain("URL");
  expect(consumerNameRefusal("a%2F")).not.toBeNull();
  for (const name of [
    "...",
    ".a",
    "a/..",
    "../a",
    "a/b/c",
    "$share/g.1f2e3d4c5b6a/0a1b2c3d4e5f",
    "mqtt/sensor_7.3f2a9c01b4d2/1a94c0e12f7b3",
    "x:y-z_1.2",
  ]) {
    expect(consumerNameRefusal(name)).toBeNull();
    expect(await addressed(name)).toBe(name);
  }
});
