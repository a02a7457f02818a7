/**
 * split_routes: the routes a running server offers `aria split` (src/server/split_host.ts), so
 * the server — the data directory's one owner — performs the switch while it serves:
 *
 *   GET  /internal/split/layout    {"layout": [{partition, segments, stores}]} closed data in force
 *   POST /internal/split/reserve   {"count": n} → {"first": id}: ids for the split's new files
 *   POST /internal/split/commit    {"removed": [ids], "added": [stores]} → {"ok": true}, or 409
 *                                  with the reason when the swap no longer fits (nothing changed)
 *   GET  /internal/split/open      {"open": {partitions, records, bytes, oldestTimeUs, segmentAgeUs,
 *                                  segmentBytesMax}}: journal records in no closed segment yet
 *   POST /internal/split/seal      {"sealed": {segmentsClosed, records, bytes}} once every record
 *                                  published before it is in a closed segment (500: the store failed)
 *
 * Registered on the admin app through its `routes` hook, behind its Host, Origin and token checks.
 * Each POST reads at most its limit of body (413 beyond it, before the body is parsed): the
 * commit ADMIN_COMMIT_BODY_BYTES_MAX (a split's swap with its per-topic counts), reserve and seal
 * ADMIN_SMALL_BODY_BYTES_MAX (a count, or nothing).
 */
import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ADMIN_COMMIT_BODY_BYTES_MAX, ADMIN_SMALL_BODY_BYTES_MAX } from "../constants.ts";
import type { SplitHost } from "../split/executor.ts";
import type { LayoutSwap } from "../store/mod.ts";

/** Adds the split routes to `app`, served by `host`; `onSwitched` hears of each switch. */
export function addSplitRoutes(
  app: Hono,
  host: SplitHost,
  onSwitched?: (swap: LayoutSwap) => void,
): void {
  const small = limitOf(ADMIN_SMALL_BODY_BYTES_MAX);
  app.get("/internal/split/layout", async (c) => c.json({ layout: await host.layout() }));
  app.post("/internal/split/reserve", small, async (c) => {
    const body = (await c.req.json().catch(() => null)) as { count?: unknown } | null;
    const count = body?.count;
    if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 1 || count > 1 << 24)
      return c.json({ error: "count must be an integer in 1..2^24" }, 400);
    return c.json({ first: await host.reserveIds(count) });
  });
  app.post("/internal/split/commit", limitOf(ADMIN_COMMIT_BODY_BYTES_MAX), async (c) => {
    const swap = (await c.req.json().catch(() => null)) as LayoutSwap | null;
    if (swap === null || !Array.isArray(swap.removed) || !Array.isArray(swap.added))
      return c.json({ error: "body must be {removed, added}" }, 400);
    try {
      await host.switchLayout(swap);
    } catch (error) {
      return c.json({ error: (error as Error).message }, 409);
    }
    onSwitched?.(swap);
    return c.json({ ok: true });
  });
  app.get("/internal/split/open", async (c) => {
    if (host.openData === undefined)
      return c.json({ error: "this server does not report open segments" }, 501);
    return c.json({ open: await host.openData() });
  });
  app.post("/internal/split/seal", small, async (c) => {
    if (host.seal === undefined)
      return c.json({ error: "this server does not seal on request" }, 501);
    try {
      return c.json({ sealed: await host.seal() });
    } catch (error) {
      return c.json({ error: `sealing failed: ${(error as Error).message}` }, 500);
    }
  });
}

/** A body limit of `bytes`, answered like the app's other 413s. */
function limitOf(bytes: number) {
  return bodyLimit({
    maxSize: bytes,
    onError: (c: Context) =>
      c.json({ error: `the body is larger than the limit of ${bytes} bytes for this route` }, 413),
  });
}
