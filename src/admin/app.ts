/**
 * The admin HTTP app (Hono), built from injected dependencies (ports.ts) so tests call it with
 * `app.request()` and no socket, and the runtime serves it with any server (Bun.serve today).
 *
 *   /healthz                        always open: {"ok":true}, or 503 {"ok":false,"reason"} while
 *                                   the store cannot write (a full disk: it retries by itself);
 *                                   200 {"ok":true,"degraded"} when full of topics (new refused)
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
 * Before any route: the Host must be one the app answers as, and a browser's cross-site request
 * (Origin or Sec-Fetch-Site) may not reach the API (host_origin.ts; 403). Planning (the split
 * routes) runs on the injected planner's threads, at most its concurrency at once and
 * ADMIN_PLAN_QUEUE_MAX waiting (work_gate.ts); beyond that 503 with Retry-After.
 *
 * Errors are JSON `{"error": reason}`: 400 bad parameters or table, 401 missing or wrong token,
 * 403 a Host or Origin refused, 404 no such route or prefix, 413 body or table over the limit,
 * 409 nothing to plan yet, 501 a volume source this server cannot measure, 503 planning busy.
 * Does not read clocks or files itself.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import {
  ADMIN_METRICS_PARTITIONS_MAX,
  ADMIN_PLAN_QUEUE_MAX,
  ADMIN_PLAN_RETRY_AFTER_SECONDS,
  ADMIN_RATE_SAMPLES_MAX,
  ADMIN_RATE_WINDOW_MS,
  ADMIN_SPLIT_TOPICS_MAX,
  ADMIN_TREE_CHILDREN_MAX,
  ADMIN_VOLUMES_BODY_BYTES_MAX,
} from "../constants.ts";
import { bearerTokenMatches } from "./auth.ts";
import { hostPolicyOf, hostRefusal, originRefusal } from "./host_origin.ts";
import { renderMetrics } from "./metrics.ts";
import { compareParams, planParams, topicsParams, type Query } from "./params.ts";
import {
  packVolumes,
  type PlanWork,
  type Planner,
  runPlanWork,
  tooManyTopics,
} from "./plan_work.ts";
import type { AdminDependencies, VolumeSource } from "./ports.ts";
import { PROMETHEUS_CONTENT_TYPE } from "./prometheus.ts";
import { RateMeter } from "./rate_meter.ts";
import { matchingTopicsOf, topicTreeOf } from "./topic_tree_view.ts";
import { UI_ASSETS, UI_CONTENT_SECURITY_POLICY, UI_INDEX } from "./ui_assets.ts";
import { WorkGate } from "./work_gate.ts";

export type { AdminDependencies } from "./ports.ts";

type Status = 400 | 401 | 403 | 404 | 409 | 413 | 500 | 501 | 503;

/** Builds the admin app. */
export function createAdminApp(dependencies: AdminDependencies): Hono {
  const app = new Hono();
  const rates = new RateMeter(ADMIN_RATE_WINDOW_MS * 1000, ADMIN_RATE_SAMPLES_MAX);
  const fail = (c: Context, status: Status, reason: string) => c.json({ error: reason }, status);

  app.use("*", async (c, next) => {
    await next();
    c.header("X-Content-Type-Options", "nosniff");
  });

  const token = dependencies.token;
  const hosts = hostPolicyOf({
    listenHost: dependencies.listenHost ?? "127.0.0.1",
    allowedHosts: dependencies.allowedHosts,
  });
  // Asked once per request (a users file's check may run a KDF, and counts each refusal).
  const bearerAnswers = new WeakMap<Request, boolean>();
  const bearerAccepted = async (c: Context): Promise<boolean> => {
    if (token === undefined) return false;
    let answer = bearerAnswers.get(c.req.raw);
    if (answer === undefined) {
      answer = await bearerTokenMatches(c.req.header("Authorization"), token, peerAddress(c));
      bearerAnswers.set(c.req.raw, answer);
    }
    return answer;
  };
  app.use("*", async (c, next) => {
    const host = hostOf(c.req.raw);
    const refused =
      hostRefusal(host, hosts) ??
      // A bearer token is never a browser's ambient credential: a page can send it cross-origin
      // only after a CORS preflight, which this app never grants. A request that carries the right
      // token was made by someone who holds it, so its Origin says nothing to refuse.
      ((await bearerAccepted(c)) ? null : crossSiteRefusal(c.req.raw, c.req.path, host as string));
    return refused === null ? next() : fail(c, 403, refused);
  });
  app.get("/healthz", (c) => {
    const stats = dependencies.stats();
    const reason = stats.store.unwritable;
    if (typeof reason === "string") return c.json({ ok: false, reason }, 503);
    // Full of topics: every known topic is still served (200), but new ones are refused.
    const topics = stats.topics;
    if (topics !== undefined && topics.known >= topics.max)
      return c.json({
        ok: true,
        degraded: `server holds ${topics.known} topics, the limit: new topics are refused`,
      });
    return c.json({ ok: true });
  });

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

  if (token !== undefined) {
    app.use("*", async (c, next) => {
      if (await bearerAccepted(c)) return next();
      c.header("WWW-Authenticate", 'Bearer realm="aria-admin"');
      const sent = c.req.header("Authorization") !== undefined;
      // A wrong token waits as a failed sign-in does (a guesser slows down); none is the UI asking.
      if (sent) await dependencies.bearerRefused?.(peerAddress(c) ?? "unknown address");
      return fail(
        c,
        401,
        sent ? "wrong admin token" : "this server requires Authorization: Bearer <admin token>",
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
    const { source, prefix, depth, filter } = params.value;
    const rows = dependencies.volumes(source);
    if (rows === null) return fail(c, 501, unavailable(source));
    if (filter !== null)
      return c.json({
        source,
        filter: filter.toString(),
        ...matchingTopicsOf(rows, filter, ADMIN_TREE_CHILDREN_MAX),
      });
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

  const planner: Planner = dependencies.planner ?? {
    run: async (work) => runPlanWork(work),
    concurrency: 1,
  };
  const gate = new WorkGate(planner.concurrency, ADMIN_PLAN_QUEUE_MAX);
  /**
   * Runs one plan or compare through the gate: `work` is built only once the request is admitted,
   * so a refused request reads no body and packs no table.
   */
  async function planned(c: Context, work: () => Promise<PlanWork | Response>) {
    const entered = gate.enter();
    if (entered === null) {
      c.header("Retry-After", String(ADMIN_PLAN_RETRY_AFTER_SECONDS));
      const { active, waiting } = gate.load;
      return fail(
        c,
        503,
        `split planning is busy (${active} running, ${waiting} waiting); retry in ${ADMIN_PLAN_RETRY_AFTER_SECONDS} s`,
      );
    }
    const leave = await entered;
    try {
      const built = await work();
      if (built instanceof Response) return built;
      const answer = await planner.run(built);
      return c.body(answer.body as Uint8Array<ArrayBuffer>, answer.status, {
        "Content-Type": "application/json",
      });
    } finally {
      leave();
    }
  }

  app.get("/api/split/plan", (c) => {
    const params = planParams(queryOf(c), true);
    if (!params.ok) return fail(c, 400, params.reason);
    const { source, algorithm, maxStores } = params.value;
    return planned(c, async () => {
      const input = liveInput(c, source);
      return input instanceof Response
        ? input
        : { kind: "plan", source, input, algorithm, maxStores };
    });
  });
  app.post("/api/split/plan", limitBody, (c) => {
    const params = planParams(queryOf(c), false);
    if (!params.ok) return fail(c, 400, params.reason);
    const { algorithm, maxStores } = params.value;
    return planned(c, async () => ({
      kind: "plan",
      source: "upload",
      input: { csv: await c.req.text() },
      algorithm,
      maxStores,
    }));
  });

  app.get("/api/split/compare", (c) => {
    const params = compareParams(queryOf(c), true);
    if (!params.ok) return fail(c, 400, params.reason);
    const { source, maxStores } = params.value;
    return planned(c, async () => {
      const input = liveInput(c, source);
      return input instanceof Response ? input : { kind: "compare", source, input, maxStores };
    });
  });
  app.post("/api/split/compare", limitBody, (c) => {
    const params = compareParams(queryOf(c), false);
    if (!params.ok) return fail(c, 400, params.reason);
    const { maxStores } = params.value;
    return planned(c, async () => ({
      kind: "compare",
      source: "upload",
      input: { csv: await c.req.text() },
      maxStores,
    }));
  });

  /** The volumes of a source, packed for the planner, or the error response. */
  function liveInput(c: Context, source: VolumeSource): PlanWork["input"] | Response {
    const rows = dependencies.volumes(source);
    if (rows === null) return fail(c, 501, unavailable(source));
    if (rows.length === 0)
      return fail(
        c,
        409,
        `no topic volumes in the ${source} source yet: publish messages, or upload a volume table`,
      );
    if (rows.length > ADMIN_SPLIT_TOPICS_MAX) return fail(c, 409, tooManyTopics(rows.length));
    return { packed: packVolumes(rows) };
  }

  dependencies.routes?.(app);
  app.notFound((c) => fail(c, 404, `no route ${c.req.method} ${c.req.path}`));
  app.onError((error, c) => fail(c, 500, `internal error: ${error.message}`));
  return app;
}

function queryOf(c: Context): Query {
  return c.req.query();
}

function unavailable(source: VolumeSource): string {
  return `the ${source} volume source is not available on this server yet`;
}

/** Where the request was sent: its Host header, or the host of an absolute URL (HTTP/1.0, tests). */
function hostOf(request: Request): string | null {
  const header = request.headers.get("Host");
  if (header !== null) return header;
  return /^https?:\/\/([^/?#]*)/i.exec(request.url)?.[1] ?? null;
}

/** The API's paths: what a cross-site page must not read even with a GET. */
const API_PATH = /^\/(api|internal)(\/|$)|^\/metrics$/;

/**
 * Why a browser's request from another site is refused, or null. Every method but GET and HEAD
 * (they change state or start work), and GETs of the API: with an Origin it must be this server's;
 * without one, a browser's Sec-Fetch-Site must not say another site (an `<img src>` of
 * /api/split/compare is a GET with no Origin). A request with neither is not a browser's.
 */
function crossSiteRefusal(request: Request, path: string, host: string): string | null {
  if ((request.method === "GET" || request.method === "HEAD") && !API_PATH.test(path)) return null;
  const origin = request.headers.get("Origin");
  if (origin !== null) return originRefusal(origin, host);
  const site = request.headers.get("Sec-Fetch-Site");
  if (site === "cross-site" || site === "same-site")
    return `a request from another site (Sec-Fetch-Site: ${site}) may not call this server`;
  return null;
}

/** The client's IP, as the runtime hands it to the app (`c.env`), or undefined. */
function peerAddress(c: Context): string | undefined {
  return (c.env as { remoteAddress?: string } | undefined)?.remoteAddress;
}
