/**
 * The admin HTTP app (Hono), built from injected dependencies so tests call it with
 * `app.request()` and no socket. This first cut serves health and the server's counters; the
 * metrics, topic tree, split views and web UI build on it.
 */
import { Hono } from "hono";

/** What the admin app reads from a running server. */
export interface AdminDependencies {
  /** The server's counters as one JSON-able object. */
  stats(): Record<string, unknown>;
}

/** Builds the admin app. */
export function createAdminApp(dependencies: AdminDependencies): Hono {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/api/stats", (c) => c.json(dependencies.stats()));
  app.notFound((c) => c.json({ error: `no route ${c.req.method} ${c.req.path}` }, 404));
  return app;
}
