/**
 * The admin HTTP app (Hono), built from injected dependencies (ports.ts) so tests call it with
 * `app.request()` and no socket, and the runtime serves it with any server (Bun.serve today).
 *
 *   /healthz                        always open: {"ok":true}
 *   /, /ui/*                        the web UI (static, bundled into the binary: ui_assets.ts)
 *   /metrics                        Prometheus text (metrics.ts)
 *   /api/stats                      counters of broker, tip, store + publish rates + split status
 *                                   (the last split as the data directory records it)
 *   /api/topics?prefix&depth&source the topic tree with messages and bytes per node: by default
 *                                   what the data directory holds (persisted), or source=live
 *   GET  /api/split/plan            plan the live volumes (or source=persisted): the JSON of
 *                                   `aria split plan --json`
 *   POST /api/split/plan            plan an uploaded volume table (CSV body, size-limited)
 *   GET|POST /api/split/compare     both planners on one table, plus the table (the UI's split view)
 *
 * Errors are JSON `{"error": reason}`: 400 bad parameters or table, 401 missing or wrong token,
 * 404 no such route or prefix, 413 body or table over the limit, 409 nothing to plan yet, 501 a
 * volume source this server cannot measure. Does not read clocks or files itself.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import {
  ADMIN_METRICS_PARTITIONS_MAX,
  ADMIN_RATE_SAMPLES_MAX,
  ADMIN_RATE_WINDOW_MS,
  ADMIN_SPLIT_TOPICS_MAX,
  ADMIN_TREE_CHILDREN_MAX,
  ADMIN_VOLUMES_BODY_BYTES_MAX,
} from "../constants.ts";
import {
  parseVolumeTable,
  planJson,
  planSplit,
  volumeTableOf,
  type VolumeTable,
  type VolumeTableResult,
} from "../split/mod.ts";
import { bearerTokenMatches } from "./auth.ts";
import { renderMetrics } from "./metrics.ts";
import { compareParams, planParams, topicsParams, type Query } from "./params.ts";
import type { AdminDependencies, VolumeSource } from "./ports.ts";
import { PROMETHEUS_CONTENT_TYPE } from "./prometheus.ts";
import { RateMeter } from "./rate_meter.ts";
import { topicTreeOf } from "./topic_tree_view.ts";
import { UI_ASSETS, UI_CONTENT_SECURITY_POLICY, UI_INDEX } from "./ui_assets.ts";

export type { AdminDependencies } from "./ports.ts";

type Status = 400 | 401 | 404 | 409 | 413 | 500 | 501;

/** Builds the admin app. */
export function createAdminApp(dependencies: AdminDependencies): Hono {
  const app = new Hono();
  const rates = new RateMeter(ADMIN_RATE_WINDOW_MS * 1000, ADMIN_RATE_SAMPLES_MAX);
  const fail = (c: Context, status: Status, reason: string) => c.json({ error: reason }, status);

  app.use("*", async (c, next) => {
    await next();
    c.header("X-Content-Type-Options", "nosniff");
  });
  app.get("/healthz", (c) => c.json({ ok: true }));

  // The UI shell holds no data, and a browser cannot send a bearer header when it opens a page:
  // it is served openly and sends the token on every API call it makes.
  const serveAsset = (c: Context, asset: { body: string; contentType: string } | undefined) => {
    if (asset === undefined) return fail(c, 404, `no route GET ${c.req.path}`);
    return c.body(asset.body, 200, {
      "Content-Type": asset.contentType,
      "Cache-Control": "no-cache",
      "Content-Security-Policy": UI_CONTENT_SECURITY_POLICY,
    });
  };
  app.get("/", (c) => serveAsset(c, UI_INDEX));
  app.get("/ui/:name", (c) => serveAsset(c, UI_ASSETS.get(c.req.param("name"))));

  const token = dependencies.token;
  if (token !== undefined) {
    app.use("*", async (c, next) => {
      if (bearerTokenMatches(c.req.header("Authorization"), token)) return next();
      c.header("WWW-Authenticate", 'Bearer realm="aria-admin"');
      return fail(
        c,
        401,
        c.req.header("Authorization") === undefined
          ? "this server requires Authorization: Bearer <admin token>"
          : "wrong admin token",
      );
    });
  }

  const statsNow = () => {
    const stats = dependencies.stats();
    const nowUs = dependencies.clock.nowUs();
    const rate = rates.sample(nowUs, stats.broker.messagesPublished, stats.broker.bytesPublished);
    return { stats, nowUs, rate };
  };

  app.get("/metrics", (c) => {
    const { stats } = statsNow();
    const text = renderMetrics({
      stats,
      volumes: dependencies.volumes("live") ?? [],
      recoverySeconds: dependencies.recoverySeconds(),
      split: dependencies.split(),
      partitionsMax: ADMIN_METRICS_PARTITIONS_MAX,
    });
    return c.body(text, 200, { "Content-Type": PROMETHEUS_CONTENT_TYPE });
  });

  app.get("/api/stats", (c) => {
    const { stats, nowUs, rate } = statsNow();
    return c.json({ ...stats, rates: rate, split: dependencies.split(), timeUs: nowUs });
  });

  app.get("/api/topics", (c) => {
    const params = topicsParams(queryOf(c));
    if (!params.ok) return fail(c, 400, params.reason);
    const { source, prefix, depth } = params.value;
    const rows = dependencies.volumes(source);
    if (rows === null) return fail(c, 501, unavailable(source));
    const node = topicTreeOf(rows, prefix, { depth, childrenMax: ADMIN_TREE_CHILDREN_MAX });
    if (node === null)
      return fail(c, 404, `no topic under ${JSON.stringify(prefix)} in the ${source} volumes`);
    return c.json({ source, prefix, depth, node });
  });

  const limitBody = bodyLimit({
    maxSize: ADMIN_VOLUMES_BODY_BYTES_MAX,
    onError: (c) =>
      fail(
        c,
        413,
        `the body is larger than the limit of ${ADMIN_VOLUMES_BODY_BYTES_MAX} bytes; plan bigger tables with 'aria split plan'`,
      ),
  });

  app.get("/api/split/plan", (c) => {
    const params = planParams(queryOf(c), true);
    if (!params.ok) return fail(c, 400, params.reason);
    const table = liveTable(c, params.value.source);
    if (table instanceof Response) return table;
    return c.json(planJson(table, planSplit(table, params.value)));
  });
  app.post("/api/split/plan", limitBody, async (c) => {
    const params = planParams(queryOf(c), false);
    if (!params.ok) return fail(c, 400, params.reason);
    const table = uploadedTable(c, await c.req.text());
    if (table instanceof Response) return table;
    return c.json(planJson(table, planSplit(table, params.value)));
  });

  app.get("/api/split/compare", (c) => {
    const params = compareParams(queryOf(c), true);
    if (!params.ok) return fail(c, 400, params.reason);
    const table = liveTable(c, params.value.source);
    if (table instanceof Response) return table;
    return c.json(compare(table, params.value.source, params.value.maxStores));
  });
  app.post("/api/split/compare", limitBody, async (c) => {
    const params = compareParams(queryOf(c), false);
    if (!params.ok) return fail(c, 400, params.reason);
    const table = uploadedTable(c, await c.req.text());
    if (table instanceof Response) return table;
    return c.json(compare(table, "upload", params.value.maxStores));
  });

  /** The table of a volume source, or the error response. */
  function liveTable(c: Context, source: VolumeSource): VolumeTable | Response {
    const rows = dependencies.volumes(source);
    if (rows === null) return fail(c, 501, unavailable(source));
    if (rows.length === 0)
      return fail(
        c,
        409,
        `no topic volumes in the ${source} source yet: publish messages, or upload a volume table`,
      );
    if (rows.length > ADMIN_SPLIT_TOPICS_MAX) return fail(c, 409, tooManyTopics(rows.length));
    return tableOrFail(c, volumeTableOf(rows), 500);
  }

  /** The table of an uploaded CSV body, or the error response. */
  function uploadedTable(c: Context, text: string): VolumeTable | Response {
    const table = tableOrFail(c, parseVolumeTable(text), 400);
    if (!(table instanceof Response) && table.topics.length > ADMIN_SPLIT_TOPICS_MAX)
      return fail(c, 413, tooManyTopics(table.topics.length));
    return table;
  }

  function tableOrFail(
    c: Context,
    result: VolumeTableResult,
    status: 400 | 500,
  ): VolumeTable | Response {
    return result.ok ? result.table : fail(c, status, `volume table: ${result.reason}`);
  }

  dependencies.routes?.(app);
  app.notFound((c) => fail(c, 404, `no route ${c.req.method} ${c.req.path}`));
  app.onError((error, c) => fail(c, 500, `internal error: ${error.message}`));
  return app;
}

/** Both planners on one table, and the table itself (the UI draws it). */
function compare(
  table: VolumeTable,
  source: VolumeSource | "upload",
  maxStores: number | undefined,
): unknown {
  return {
    source,
    table: {
      topics: table.topics,
      bytes: Array.from(table.bytes),
      messages: Array.from(table.messages),
      bytesTotal: table.bytesTotal,
    },
    plans: {
      heuristic: planJson(table, planSplit(table, { algorithm: "heuristic" })),
      adaptive: planJson(table, planSplit(table, { algorithm: "adaptive", maxStores })),
    },
  };
}

function queryOf(c: Context): Query {
  return c.req.query();
}

function unavailable(source: VolumeSource): string {
  return `the ${source} volume source is not available on this server yet`;
}

function tooManyTopics(count: number): string {
  return `the table has ${count} topics, more than the ${ADMIN_SPLIT_TOPICS_MAX} the admin app plans in-process; use 'aria split plan'`;
}
