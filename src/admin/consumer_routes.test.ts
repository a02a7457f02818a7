/** consumer_routes: list, and delete with 204 / 404 / 409. */
import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import type { ConsumerInfo } from "../broker/mod.ts";
import { addConsumerRoutes } from "./consumer_routes.ts";

const info: ConsumerInfo = {
  name: "c",
  filter: ["a/**"],
  shared: false,
  ackedSeq: 4,
  nextSeq: 5,
  pendingSeqs: 2,
  members: 0,
  lastActiveUs: 7,
  owner: "alice",
};

describe("consumer routes", () => {
  test("GET lists; DELETE answers 204, 404, 409", async () => {
    const app = new Hono();
    const removed: string[] = [];
    const asked: string[] = [];
    addConsumerRoutes(app, {
      consumerList: () => [info],
      removeConsumer: (name) => {
        asked.push(name);
        if (name === "busy") return "busy";
        if (name !== "c") return "unknown";
        removed.push(name);
        return "removed";
      },
    });
    const list = await app.request("/api/consumers");
    expect(await list.json()).toEqual({ consumers: [info] });
    const statuses = [];
    for (const name of ["c", "nope", "busy", "mqtt%2Fclient%2F1"])
      statuses.push((await app.request(`/api/consumers/${name}`, { method: "DELETE" })).status);
    expect(statuses).toEqual([204, 404, 409, 404]);
    expect(removed).toEqual(["c"]);
    // Names the MQTT door makes hold "/": sent encoded, decoded here.
    expect(asked[3]).toBe("mqtt/client/1");
  });
});
