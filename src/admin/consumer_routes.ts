/**
 * consumer_routes: the durable consumers in the admin API (`aria consumers ls|rm` call them):
 *
 *   GET    /api/consumers        {"consumers": [{name, filter, shared, ackedSeq, nextSeq,
 *                                pendingSeqs, members, lastActiveUs, owner}]} by name
 *   DELETE /api/consumers/NAME   204 removed; 404 no such consumer; 409 a subscription of it is open
 *
 * `pendingSeqs` is an upper bound: the seqs published after the consumer's position, matching
 * its filter or not. Registered through the admin app's `routes` hook, behind its Host, Origin
 * and token checks (the same as every /api route). No body is read.
 */
import type { Hono } from "hono";
import type { ConsumerInfo } from "../broker/mod.ts";

/** What the routes ask of the broker. */
export interface ConsumerHost {
  consumerList(): ConsumerInfo[];
  removeConsumer(name: string): "removed" | "unknown" | "busy";
}

/** Adds the consumer routes to `app`, served by `host`. */
export function addConsumerRoutes(app: Hono, host: ConsumerHost): void {
  app.get("/api/consumers", (c) => c.json({ consumers: host.consumerList() }));
  app.delete("/api/consumers/:name", (c) => {
    const name = c.req.param("name");
    const removed = host.removeConsumer(name);
    if (removed === "unknown")
      return c.json({ error: `no durable consumer named ${JSON.stringify(name)}` }, 404);
    if (removed === "busy")
      return c.json(
        {
          error: `durable consumer ${JSON.stringify(name)} has a subscription open; close it first`,
        },
        409,
      );
    return c.body(null, 204);
  });
}
