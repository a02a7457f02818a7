/**
 * The admin app in-process through `app.request()`: routes, parameters and their 400 reasons,
 * size limits (413), the token check, the Prometheus document, the plan JSON against
 * `aria split plan --json` itself, and the bundled UI files (served, self-contained, offline).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RECOVERY_SECONDS_BOUNDS } from "../broker/broker.ts";
import { runCli } from "../cli/mod.ts";
import {
  ADMIN_COMMIT_BODY_BYTES_MAX,
  ADMIN_METRICS_PARTITIONS_MAX,
  ADMIN_PLAN_QUEUE_MAX,
  ADMIN_PLAN_RETRY_AFTER_SECONDS,
  ADMIN_SMALL_BODY_BYTES_MAX,
  ADMIN_SPLIT_TOPICS_MAX,
  ADMIN_TREE_CHILDREN_MAX,
  ADMIN_TREE_DEPTH_MAX,
  ADMIN_VOLUMES_BODY_BYTES_MAX,
} from "../constants.ts";
import type { VolumeRow } from "../split/mod.ts";
import type { TopicStats } from "../topic/mod.ts";
import { Histogram } from "../stdx/histogram.ts";
import type { SplitHost } from "../split/executor.ts";
import { createAdminApp } from "./app.ts";
import { type PlanAnswer, type PlanWork, runPlanWork } from "./plan_work.ts";
import { addSplitRoutes } from "./split_routes.ts";
import type { AdminDependencies, ServerStats } from "./ports.ts";
import { UI_ASSETS } from "./ui_assets.ts";

const DATASETS = join(import.meta.dir, "../../../shared/datasets");

/**
 * A fake server: counters the test moves by hand, a clock it advances. Its persisted volumes are
 * its live ones (a server that has not restarted) unless `persisted` says otherwise (null: a
 * server that cannot measure them).
 */
function fakeServer(
  options: {
    token?: string;
    rows?: VolumeRow[];
    persisted?: VolumeRow[] | null;
    more?: Partial<AdminDependencies>;
    topics?: TopicStats;
    /** More of the server's stats (process, build). */
    extra?: Partial<ServerStats>;
  } = {},
) {
  const state = {
    nowUs: 1_700_000_000_000_000,
    messages: 0,
    bytes: 0,
    /** Why the store cannot write (null: it can). */
    unwritable: null as string | null,
    rows: options.rows ?? [
      { topic: "app/orders/created", bytes: 6000, messages: 60 },
      { topic: "app/orders/filled", bytes: 3000, messages: 30 },
      { topic: "app/orders", bytes: 100, messages: 1 },
      { topic: "app/audit/log", bytes: 900, messages: 9 },
      { topic: "ops", bytes: 50, messages: 5 },
    ],
  };
  const recovery = {
    tip: new Histogram(RECOVERY_SECONDS_BOUNDS),
    disk: new Histogram(RECOVERY_SECONDS_BOUNDS),
  };
  recovery.tip.observe(0.002);
  recovery.tip.observe(0.3);
  recovery.disk.observe(7);
  const stats = (): ServerStats => ({
    ...options.extra,
    topics: options.topics === undefined ? undefined : { ...options.topics },
    broker: {
      connections: 3,
      subscriptions: 6,
      subscriptionsByPhase: { resolving: 0, disk: 1, tip: 2, live: 2, stalled: 1 },
      messagesPublished: state.messages,
      bytesPublished: state.bytes,
      messagesDelivered: 42,
      messagesDeliveredShared: 40,
      publishersPaused: 2,
      nextSeq: state.messages + 1,
      visibleSeq: state.messages + 1,
      recoveries: { disk: 1, tip: 2 },
    },
    tip: {
      capacityBytes: 1 << 20,
      bytesUsed: 4096,
      records: 100,
      firstSeq: 17,
      nextSeq: 117,
      poolBlocksUsed: 3,
      poolBlocksFree: 61,
      poolBlocksMax: 64,
      indexEntriesLive: 100,
      indexBytesUsed: 24576,
      evictionsForPool: 0,
    },
    store: {
      nextSeq: 117,
      committedSeq: 116,
      partitions: 3,
      journals: 1,
      journalBytes: 2048,
      spareJournalBytes: 4096,
      segments: 4,
      segmentBytes: 65536,
      pendingRecords: 0,
      pendingBytes: 0,
      segmentsWritten: 4,
      manifestBytes: 128,
      openFiles: 2,
      fileOpens: 9,
      stores: 0,
      storeBytes: 0,
      bytesRead: 0,
      unwritable: state.unwritable,
    },
  });
  const dependencies: AdminDependencies = {
    stats,
    volumes: (source) =>
      source === "live"
        ? state.rows
        : options.persisted === undefined
          ? state.rows
          : options.persisted,
    recoverySeconds: () => recovery,
    split: () => ({ storeBytes: 0, last: null }),
    clock: { nowUs: () => state.nowUs },
    token: options.token,
    ...options.more,
  };
  return { app: createAdminApp(dependencies), state };
}

async function json(
  response: Response | Promise<Response>,
  // biome-ignore lint/suspicious/noExplicitAny: the tests read JSON bodies of many shapes
): Promise<{ status: number; body: any }> {
  const awaited = await response;
  return { status: awaited.status, body: await awaited.json() };
}

function csvOf(rows: VolumeRow[]): string {
  return `topic,bytes,messages\n${rows.map((row) => `${row.topic},${row.bytes},${row.messages}`).join("\n")}\n`;
}

describe("health, stats and rates", () => {
  test("/healthz", async () => {
    const { app } = fakeServer();
    expect(await json(app.request("/healthz"))).toEqual({ status: 200, body: { ok: true } });
  });

  test("/healthz answers 503 with the reason while the store cannot write; /metrics says so", async () => {
    const { app, state } = fakeServer();
    const gauge = async () =>
      (await (await app.request("/metrics")).text()).match(/^aria_store_writable (\d)$/m)?.[1];
    expect(await gauge()).toBe("1");
    state.unwritable = "The store cannot write its journal (no space left on device)";
    expect(await json(app.request("/healthz"))).toEqual({
      status: 503,
      body: { ok: false, reason: state.unwritable },
    });
    expect(await gauge()).toBe("0");
    state.unwritable = null;
    expect((await app.request("/healthz")).status).toBe(200);
  });

  test("/healthz stays 200 but says degraded when full of topics; /metrics counts topics", async () => {
    const topics = { known: 3, max: 4, refused: 0 };
    const { app } = fakeServer({ topics });
    const metric = async (name: string) =>
      (await (await app.request("/metrics")).text()).match(
        new RegExp(`^${name} (\\d+)$`, "m"),
      )?.[1];
    expect(await json(app.request("/healthz"))).toEqual({ status: 200, body: { ok: true } });
    topics.known = 4;
    topics.refused = 7;
    expect(await json(app.request("/healthz"))).toEqual({
      status: 200,
      body: { ok: true, degraded: "server holds 4 topics, the limit: new topics are refused" },
    });
    expect(
      await Promise.all(
        ["aria_topics", "aria_topics_max", "aria_topics_refused_total"].map(metric),
      ),
    ).toEqual(["4", "4", "7"]);
  });

  test("/api/stats carries the parts' counters and publish rates over the window", async () => {
    const { app, state } = fakeServer();
    const first = await json(app.request("/api/stats"));
    expect(first.status).toBe(200);
    expect(Object.keys(first.body)).toEqual(["broker", "tip", "store", "rates", "split", "timeUs"]);
    expect(first.body.rates).toEqual({
      messagesPerSecond: null,
      bytesPerSecond: null,
      windowSeconds: 0,
    });
    state.nowUs += 1_000_000;
    state.messages += 250;
    state.bytes += 25_000;
    expect((await json(app.request("/api/stats"))).body.rates).toEqual({
      messagesPerSecond: 250,
      bytesPerSecond: 25_000,
      windowSeconds: 1,
    });
    // Ten more seconds at 100 msg/s: the 5 s window forgets the first burst.
    for (let second = 0; second < 10; second++) {
      state.nowUs += 1_000_000;
      state.messages += 100;
      state.bytes += 1000;
      await app.request("/api/stats");
    }
    const later = (await json(app.request("/api/stats"))).body;
    expect(later.rates.messagesPerSecond).toBe(100);
    expect(later.rates.windowSeconds).toBe(5);
    expect(later.broker.nextSeq).toBe(state.messages + 1);
    expect(later.split).toEqual({ storeBytes: 0, last: null });
  });

  test("unknown routes and methods are 404 with a JSON reason", async () => {
    const { app } = fakeServer();
    expect(await json(app.request("/api/nothing"))).toEqual({
      status: 404,
      body: { error: "no route GET /api/nothing" },
    });
    expect(await json(app.request("/api/stats", { method: "DELETE" }))).toEqual({
      status: 404,
      body: { error: "no route DELETE /api/stats" },
    });
    expect((await app.request("/ui/missing.js")).status).toBe(404);
  });
});

describe("/metrics", () => {
  test("the process and the build under the usual names; the subscriptions furthest behind", async () => {
    const { app } = fakeServer({
      extra: {
        process: {
          residentBytes: 123_456_789,
          cpuUserSeconds: 1.5,
          cpuSystemSeconds: 0.25,
          openFiles: 17,
          openFilesMax: 65536,
          startTimeSeconds: 1_796_300_000.5,
        },
        build: { version: "0.1.0", commit: "abc123", runtime: "bun 1.4.5" },
        lags: [
          { session: 4, subscription: 2, filter: "app/**", phase: "disk", seqsBehind: 90210 },
          { session: 3, subscription: 1, filter: "x".repeat(300), phase: "live", seqsBehind: 0 },
        ],
      },
    });
    const text = await (await app.request("/metrics")).text();
    checkExposition(text);
    const samples = text
      .split("\n")
      .filter((line) => /^(process_|aria_build_info|aria_subscription_lag)/.test(line));
    expect(samples).toEqual([
      "process_resident_memory_bytes 123456789",
      "process_cpu_seconds_total 1.75",
      "process_open_fds 17",
      "process_max_fds 65536",
      "process_start_time_seconds 1796300000.5",
      'aria_subscription_lag_seqs{session="4",subscription="2",filter="app/**",phase="disk"} 90210',
      `aria_subscription_lag_seqs{session="3",subscription="1",filter="${"x".repeat(199)}…",phase="live"} 0`,
      'aria_build_info{version="0.1.0",commit="abc123",runtime="bun 1.4.5"} 1',
    ]);
  });

  test("the whole document", async () => {
    const { app, state } = fakeServer();
    state.messages = 116;
    state.bytes = 10_050;
    const response = await app.request("/metrics");
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await response.text();
    checkExposition(text);
    expect(text).toMatchInlineSnapshot(`
      "# HELP aria_published_messages_total Messages published (sequenced) since start.
      # TYPE aria_published_messages_total counter
      aria_published_messages_total 116
      # HELP aria_published_bytes_total Payload bytes published since start.
      # TYPE aria_published_bytes_total counter
      aria_published_bytes_total 10050
      # HELP aria_delivered_messages_total Messages delivered to subscribers since start.
      # TYPE aria_delivered_messages_total counter
      aria_delivered_messages_total 42
      # HELP aria_delivered_shared_messages_total Of those, delivered live through DATA frames encoded once for subscriptions with equal filters.
      # TYPE aria_delivered_shared_messages_total counter
      aria_delivered_shared_messages_total 40
      # HELP aria_publisher_pauses_total Times a publishing connection stopped being read because the store's sorter was behind (back-pressure).
      # TYPE aria_publisher_pauses_total counter
      aria_publisher_pauses_total 2
      # HELP aria_next_seq The seq the next published message gets.
      # TYPE aria_next_seq gauge
      aria_next_seq 117
      # HELP aria_visible_seq Seqs below this are durable and visible to subscribers.
      # TYPE aria_visible_seq gauge
      aria_visible_seq 117
      # HELP aria_partitions_published Partitions with messages published since start.
      # TYPE aria_partitions_published gauge
      aria_partitions_published 3
      # HELP aria_partition_published_messages_total Messages published since start, by partition (the largest by bytes; the rest as partition="*other*").
      # TYPE aria_partition_published_messages_total counter
      aria_partition_published_messages_total{partition="app/orders"} 91
      aria_partition_published_messages_total{partition="app/audit"} 9
      aria_partition_published_messages_total{partition="ops"} 5
      # HELP aria_partition_published_bytes_total Payload bytes published since start, by partition (the largest by bytes; the rest as partition="*other*").
      # TYPE aria_partition_published_bytes_total counter
      aria_partition_published_bytes_total{partition="app/orders"} 9100
      aria_partition_published_bytes_total{partition="app/audit"} 900
      aria_partition_published_bytes_total{partition="ops"} 50
      # HELP aria_connections Open protocol connections.
      # TYPE aria_connections gauge
      aria_connections 3
      # HELP aria_subscriptions Subscriptions by state: live, catching up from the tip or disk, stalled by a full send queue, resolving.
      # TYPE aria_subscriptions gauge
      aria_subscriptions{state="live"} 2
      aria_subscriptions{state="tip_recovery"} 2
      aria_subscriptions{state="disk_recovery"} 1
      aria_subscriptions{state="stalled"} 1
      aria_subscriptions{state="resolving"} 0
      # HELP aria_tip_used_bytes Bytes of the tip ring in use.
      # TYPE aria_tip_used_bytes gauge
      aria_tip_used_bytes 4096
      # HELP aria_tip_capacity_bytes Capacity of the tip ring in bytes.
      # TYPE aria_tip_capacity_bytes gauge
      aria_tip_capacity_bytes 1048576
      # HELP aria_tip_records Messages held in the tip.
      # TYPE aria_tip_records gauge
      aria_tip_records 100
      # HELP aria_tip_oldest_seq Seq of the oldest message in the tip (absent while the tip is empty).
      # TYPE aria_tip_oldest_seq gauge
      aria_tip_oldest_seq 17
      # HELP aria_tip_pool_blocks_used Index blocks of the tip's block pool in use.
      # TYPE aria_tip_pool_blocks_used gauge
      aria_tip_pool_blocks_used 3
      # HELP aria_tip_pool_blocks_free Index blocks of the tip's block pool free.
      # TYPE aria_tip_pool_blocks_free gauge
      aria_tip_pool_blocks_free 61
      # HELP aria_tip_pool_evictions_total Tip records evicted early to free index blocks.
      # TYPE aria_tip_pool_evictions_total counter
      aria_tip_pool_evictions_total 0
      # HELP aria_recoveries_total Subscriptions that caught up by recovering from the tip or disk.
      # TYPE aria_recoveries_total counter
      aria_recoveries_total{kind="tip"} 2
      aria_recoveries_total{kind="disk"} 1
      # HELP aria_recovery_duration_seconds Time from SUBSCRIBED to CAUGHT_UP, by where recovery started.
      # TYPE aria_recovery_duration_seconds histogram
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.001"} 0
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.005"} 1
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.01"} 1
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.05"} 1
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.1"} 1
      aria_recovery_duration_seconds_bucket{kind="tip",le="0.5"} 2
      aria_recovery_duration_seconds_bucket{kind="tip",le="1"} 2
      aria_recovery_duration_seconds_bucket{kind="tip",le="5"} 2
      aria_recovery_duration_seconds_bucket{kind="tip",le="10"} 2
      aria_recovery_duration_seconds_bucket{kind="tip",le="60"} 2
      aria_recovery_duration_seconds_bucket{kind="tip",le="+Inf"} 2
      aria_recovery_duration_seconds_sum{kind="tip"} 0.302
      aria_recovery_duration_seconds_count{kind="tip"} 2
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.001"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.005"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.01"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.05"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.1"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="0.5"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="1"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="5"} 0
      aria_recovery_duration_seconds_bucket{kind="disk",le="10"} 1
      aria_recovery_duration_seconds_bucket{kind="disk",le="60"} 1
      aria_recovery_duration_seconds_bucket{kind="disk",le="+Inf"} 1
      aria_recovery_duration_seconds_sum{kind="disk"} 7
      aria_recovery_duration_seconds_count{kind="disk"} 1
      # HELP aria_disk_bytes Bytes on disk by kind of file.
      # TYPE aria_disk_bytes gauge
      aria_disk_bytes{kind="segments"} 65536
      aria_disk_bytes{kind="stores"} 0
      aria_disk_bytes{kind="journal"} 2048
      aria_disk_bytes{kind="journal_spare"} 4096
      aria_disk_bytes{kind="manifest"} 128
      # HELP aria_store_segments Closed segments in force.
      # TYPE aria_store_segments gauge
      aria_store_segments 4
      # HELP aria_store_subtree_stores Subtree stores in force.
      # TYPE aria_store_subtree_stores gauge
      aria_store_subtree_stores 0
      # HELP aria_store_writable 1 while the store can write its journal; 0 while it cannot (see /healthz for why).
      # TYPE aria_store_writable gauge
      aria_store_writable 1
      # aria_split_last_*: absent, no split has switched on this data directory
      "
    `);
  });

  test("partition labels are bounded: the largest by bytes, the rest summed as *other*", async () => {
    const rows: VolumeRow[] = [];
    for (let index = 0; index < ADMIN_METRICS_PARTITIONS_MAX + 5; index++)
      rows.push({
        topic: `p${String(index).padStart(2, "0")}/x/y`,
        bytes: 1000 + index,
        messages: 1,
      });
    rows.push({ topic: "other", bytes: 1, messages: 7 }); // a real partition named "other" stays distinct
    const { app } = fakeServer({ rows });
    const text = await (await app.request("/metrics")).text();
    checkExposition(text);
    const bytesLines = text
      .split("\n")
      .filter((line) => line.startsWith("aria_partition_published_bytes_total{"));
    expect(bytesLines.length).toBe(ADMIN_METRICS_PARTITIONS_MAX + 1);
    expect(bytesLines[0]).toBe(`aria_partition_published_bytes_total{partition="p24/x"} 1024`);
    // Below the top 20 (p05..p24): p00..p04 and "other".
    expect(bytesLines.at(-1)).toBe(
      `aria_partition_published_bytes_total{partition="*other*"} ${1000 + 1001 + 1002 + 1003 + 1004 + 1}`,
    );
    expect(text).toContain(`aria_partition_published_messages_total{partition="*other*"} 12\n`);
    expect(text).toContain("aria_partitions_published 26\n");
  });

  test("an empty tip has no oldest seq; a finished split has its series", async () => {
    const dependencies: AdminDependencies = {
      stats: () => EMPTY_STATS,
      volumes: () => [],
      recoverySeconds: () => ({ tip: new Histogram([1]), disk: new Histogram([1]) }),
      split: () => ({
        storeBytes: 5000,
        last: {
          finishedUs: 1_700_000_000_500_000,
          durationSeconds: 2.5,
          algorithm: "adaptive",
          generation: 40,
          storesWritten: 6,
          storeBytes: 4500,
          plan: { stores: 8, wastedBytesTotal: 1234, worstRatio: 3.5 },
        },
      }),
      clock: { nowUs: () => 0 },
    };
    const text = await (await createAdminApp(dependencies).request("/metrics")).text();
    checkExposition(text);
    expect(text).not.toContain("aria_tip_oldest_seq");
    expect(text).not.toContain("aria_partition_published_bytes_total{");
    expect(text).toContain('aria_disk_bytes{kind="stores"} 5000\n');
    expect(text.split("\n").filter((line) => line.startsWith("aria_split_last"))).toEqual([
      "aria_split_last_time_seconds 1700000000.5",
      "aria_split_last_duration_seconds 2.5",
      "aria_split_last_written_stores 6",
      "aria_split_last_written_bytes 4500",
      "aria_split_last_stores 8",
      "aria_split_last_wasted_bytes 1234",
      "aria_split_last_worst_ratio 3.5",
    ]);
  });
});

/** A server that has seen nothing. */
const EMPTY_STATS: ServerStats = {
  broker: {
    connections: 0,
    subscriptions: 0,
    subscriptionsByPhase: { resolving: 0, disk: 0, tip: 0, live: 0, stalled: 0 },
    messagesPublished: 0,
    bytesPublished: 0,
    messagesDelivered: 0,
    messagesDeliveredShared: 0,
    publishersPaused: 0,
    nextSeq: 1,
    visibleSeq: 1,
    recoveries: { disk: 0, tip: 0 },
  },
  tip: {
    capacityBytes: 1024,
    bytesUsed: 0,
    records: 0,
    firstSeq: 1,
    nextSeq: 1,
    poolBlocksUsed: 0,
    poolBlocksFree: 2,
    poolBlocksMax: 2,
    indexEntriesLive: 0,
    indexBytesUsed: 0,
    evictionsForPool: 0,
  },
  store: {
    nextSeq: 1,
    committedSeq: 0,
    partitions: 0,
    journals: 1,
    journalBytes: 0,
    spareJournalBytes: 0,
    segments: 0,
    segmentBytes: 0,
    pendingRecords: 0,
    pendingBytes: 0,
    segmentsWritten: 0,
    manifestBytes: 0,
    openFiles: 0,
    fileOpens: 0,
    stores: 0,
    storeBytes: 0,
    bytesRead: 0,
  },
};

/**
 * Checks the Prometheus text format line by line: HELP then TYPE before a family's samples, every
 * sample of a declared family (histograms: _bucket, _sum, _count), valid names, labels and values,
 * no family declared twice.
 */
function checkExposition(text: string): void {
  expect(text.endsWith("\n")).toBe(true);
  const declared = new Map<string, string>();
  let current = "";
  for (const line of text.slice(0, -1).split("\n")) {
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*$/.exec(line);
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$/.exec(line);
    if (help !== null) {
      expect(declared.has(help[1])).toBe(false);
      current = help[1];
      continue;
    }
    if (type !== null) {
      expect(type[1]).toBe(current);
      declared.set(type[1], type[2]);
      continue;
    }
    if (line.startsWith("# ")) continue;
    const sample =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (-?[0-9.e+]+|NaN|[+-]Inf)$/.exec(
        line,
      );
    if (sample === null) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const family =
      declared.get(current) === "histogram"
        ? sample[1].replace(/_(bucket|sum|count)$/, "")
        : sample[1];
    if (family !== current)
      throw new Error(`sample ${sample[1]} outside its family (current ${current})`);
  }
}

describe("/api/topics", () => {
  test("the tree below a prefix, by bytes, with own volumes of topics that have children", async () => {
    const { app } = fakeServer();
    const { status, body } = await json(app.request("/api/topics?prefix=app&depth=2"));
    expect(status).toBe(200);
    expect(body).toMatchInlineSnapshot(`
      {
        "depth": 2,
        "node": {
          "bytes": 10000,
          "children": [
            {
              "bytes": 9100,
              "children": [
                {
                  "bytes": 6000,
                  "hasChildren": false,
                  "isTopic": true,
                  "messages": 60,
                  "name": "created",
                  "ownBytes": 6000,
                  "ownMessages": 60,
                  "path": "app/orders/created",
                  "topics": 1,
                },
                {
                  "bytes": 3000,
                  "hasChildren": false,
                  "isTopic": true,
                  "messages": 30,
                  "name": "filled",
                  "ownBytes": 3000,
                  "ownMessages": 30,
                  "path": "app/orders/filled",
                  "topics": 1,
                },
              ],
              "hasChildren": true,
              "isTopic": true,
              "messages": 91,
              "name": "orders",
              "ownBytes": 100,
              "ownMessages": 1,
              "path": "app/orders",
              "topics": 3,
            },
            {
              "bytes": 900,
              "children": [
                {
                  "bytes": 900,
                  "hasChildren": false,
                  "isTopic": true,
                  "messages": 9,
                  "name": "log",
                  "ownBytes": 900,
                  "ownMessages": 9,
                  "path": "app/audit/log",
                  "topics": 1,
                },
              ],
              "hasChildren": true,
              "isTopic": false,
              "messages": 9,
              "name": "audit",
              "ownBytes": 0,
              "ownMessages": 0,
              "path": "app/audit",
              "topics": 1,
            },
          ],
          "hasChildren": true,
          "isTopic": false,
          "messages": 100,
          "name": "app",
          "ownBytes": 0,
          "ownMessages": 0,
          "path": "app",
          "topics": 4,
        },
        "prefix": "app",
        "source": "persisted",
      }
    `);
  });

  test("the root, one level deep by default; children beyond the cap are counted", async () => {
    const rows: VolumeRow[] = [];
    for (let index = 0; index < ADMIN_TREE_CHILDREN_MAX + 3; index++)
      rows.push({ topic: `wide/t${index}`, bytes: index, messages: 1 });
    rows.push({ topic: "narrow/x", bytes: 1, messages: 1 });
    const { app } = fakeServer({ rows });
    const root = (await json(app.request("/api/topics"))).body.node;
    expect(root.topics).toBe(ADMIN_TREE_CHILDREN_MAX + 4);
    expect(root.children.map((child: { path: string }) => child.path)).toEqual(["wide", "narrow"]);
    expect(root.children[0].children).toBeUndefined();
    expect(root.children[0].hasChildren).toBe(true);
    const wide = (await json(app.request("/api/topics?prefix=wide"))).body.node;
    expect(wide.children.length).toBe(ADMIN_TREE_CHILDREN_MAX);
    expect(wide.childrenOmitted).toBe(3);
    expect(wide.children[0].path).toBe(`wide/t${ADMIN_TREE_CHILDREN_MAX + 2}`);
  });

  test("filter=F lists the topics a filter entry matches (the wildcard * included), largest first", async () => {
    const { app } = fakeServer({
      rows: [],
      persisted: [
        { topic: "app/eu/orders", bytes: 30, messages: 3 },
        { topic: "app/us/orders", bytes: 50, messages: 5 },
        { topic: "app/us/orders/x", bytes: 7, messages: 1 },
        { topic: "app/orders", bytes: 9, messages: 9 },
        { topic: "shop/eu/orders", bytes: 4, messages: 2 },
      ],
    });
    const one = (await json(app.request("/api/topics?filter=app/*/orders"))).body;
    expect(one).toEqual({
      source: "persisted",
      filter: "app/*/orders",
      topics: [
        { topic: "app/us/orders", messages: 5, bytes: 50 },
        { topic: "app/eu/orders", messages: 3, bytes: 30 },
      ],
      topicsOmitted: 0,
      total: { topics: 2, messages: 8, bytes: 80 },
    });
    const below = (await json(app.request("/api/topics?filter=*/eu/**"))).body;
    expect(below.topics.map((row: { topic: string }) => row.topic)).toEqual([
      "app/eu/orders",
      "shop/eu/orders",
    ]);
    const bad = await json(app.request("/api/topics?filter=app/%2B/orders"));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain("app/*/orders");
    expect((await json(app.request("/api/topics?filter=a/**&depth=2"))).status).toBe(400);
  });

  test("by default what the data directory holds (persisted); source=live what was published since start", async () => {
    const { app } = fakeServer({
      rows: [{ topic: "a/b", bytes: 10, messages: 1 }],
      persisted: [
        { topic: "a/b", bytes: 30, messages: 3 },
        { topic: "c", bytes: 5, messages: 1 },
      ],
    });
    const held = (await json(app.request("/api/topics"))).body;
    expect([held.source, held.node.messages, held.node.bytes, held.node.topics]).toEqual([
      "persisted",
      4,
      35,
      2,
    ]);
    const live = (await json(app.request("/api/topics?source=live"))).body;
    expect([live.source, live.node.messages, live.node.bytes, live.node.topics]).toEqual([
      "live",
      1,
      10,
      1,
    ]);
  });

  test("bad parameters are 400 with the reason; an unknown prefix 404; persisted volumes 501 where not measured", async () => {
    const { app } = fakeServer({ persisted: null });
    const cases: [string, number, string][] = [
      ["/api/topics?prefix=a//b", 400, 'prefix "a//b": topic has an empty segment at byte 2'],
      ["/api/topics?prefix=a/*", 400, 'prefix "a/*": '],
      ["/api/topics?depth=x", 400, 'depth "x" is not a whole number'],
      [
        `/api/topics?depth=${ADMIN_TREE_DEPTH_MAX + 1}`,
        400,
        `depth ${ADMIN_TREE_DEPTH_MAX + 1} is not between 0 and ${ADMIN_TREE_DEPTH_MAX}`,
      ],
      ["/api/topics?source=disk", 400, 'source "disk" is not live or persisted'],
      [
        "/api/topics?prefx=app",
        400,
        'unknown parameter "prefx" (expected source, prefix, depth, filter)',
      ],
      ["/api/topics?source=live&prefix=nope", 404, 'no topic under "nope" in the live volumes'],
      [
        "/api/topics?source=live&prefix=app/ord",
        404,
        'no topic under "app/ord" in the live volumes',
      ],
      [
        "/api/topics?source=persisted",
        501,
        "the persisted volume source is not available on this server yet",
      ],
      ["/api/topics", 501, "the persisted volume source is not available on this server yet"],
    ];
    for (const [path, status, reason] of cases) {
      const answer = await json(app.request(path));
      expect({ path, status: answer.status }).toEqual({ path, status });
      expect(answer.body.error).toStartWith(reason);
    }
  });
});

describe("/api/split/plan", () => {
  test("live volumes: the plan JSON, equal to aria split plan --json of the same table", async () => {
    const { app, state } = fakeServer();
    const live = await json(app.request("/api/split/plan?algorithm=adaptive&maxStores=3"));
    expect(live.status).toBe(200);
    const cli = await cliPlan(csvOf(state.rows), ["--algorithm", "adaptive", "--max-stores", "3"]);
    expect(live.body).toEqual(cli);
    expect(live.body.stores.length).toBe(3);
  });

  for (const dataset of ["orders-desk", "services-zipf", "iot-fleet", "even"]) {
    test(`uploaded ${dataset}.csv: both algorithms match the CLI byte for byte`, async () => {
      const { app } = fakeServer();
      const csv = readFileSync(join(DATASETS, `${dataset}.csv`), "utf8");
      for (const algorithm of ["heuristic", "adaptive"]) {
        const response = await app.request(`/api/split/plan?algorithm=${algorithm}`, {
          method: "POST",
          body: csv,
          headers: { "Content-Type": "text/csv" },
        });
        expect(response.status).toBe(200);
        expect(await response.text()).toBe(
          JSON.stringify(await cliPlan(csv, ["--algorithm", algorithm])),
        );
      }
    });
  }

  test("bad parameters and bad tables are 400 with the reason", async () => {
    const { app } = fakeServer();
    const table = csvOf([{ topic: "a/b", bytes: 1, messages: 1 }]);
    const cases: [string, string, string][] = [
      ["GET", "/api/split/plan", "algorithm is required (heuristic or adaptive)"],
      ["GET", "/api/split/plan?algorithm=best", 'algorithm "best" is not heuristic or adaptive'],
      [
        "GET",
        "/api/split/plan?algorithm=heuristic&maxStores=4",
        "maxStores applies to algorithm adaptive only",
      ],
      [
        "GET",
        "/api/split/plan?algorithm=adaptive&maxStores=-1",
        'maxStores "-1" is not a whole number',
      ],
      ["GET", "/api/split/plan?algorithm=adaptive&maxStores=0", "maxStores 0 is not between 1 and"],
      ["GET", "/api/split/plan?algorithm=adaptive&max_stores=4", 'unknown parameter "max_stores"'],
      [
        "POST",
        "/api/split/plan?algorithm=adaptive&source=live",
        'unknown parameter "source" (expected algorithm, maxStores)',
      ],
      ["GET", "/api/split/compare?maxStores=two", 'maxStores "two" is not a whole number'],
    ];
    for (const [method, path, reason] of cases) {
      const answer = await json(
        app.request(path, method === "POST" ? { method, body: table } : { method }),
      );
      expect({ path, status: answer.status }).toEqual({ path, status: 400 });
      expect(answer.body.error).toStartWith(reason);
    }
    const bodies: [string, string][] = [
      ["", 'volume table: line 1: header is "", expected "topic,bytes,messages"'],
      ["topic,bytes,messages\na/b,1,1\na//c,2,2\n", 'volume table: line 3: invalid topic "a//c"'],
      [
        "topic,bytes,messages\na/b,1,1\na/b,2,2\n",
        'volume table: line 3: duplicate topic "a/b" (first on line 2)',
      ],
      [
        "topic,bytes,messages\na/b,lots,1\n",
        'volume table: line 2: bytes "lots" is not a whole number',
      ],
    ];
    for (const [body, reason] of bodies) {
      const answer = await json(
        app.request("/api/split/plan?algorithm=heuristic", { method: "POST", body }),
      );
      expect(answer.status).toBe(400);
      expect(answer.body.error).toStartWith(reason);
    }
  });

  test("oversize bodies are 413, declared or streamed; so is a table over the topic limit", async () => {
    const { app } = fakeServer();
    const big = `topic,bytes,messages\n${"a/b,1,1\n".repeat(Math.ceil(ADMIN_VOLUMES_BODY_BYTES_MAX / 8))}`;
    const declared = await json(
      app.request("/api/split/plan?algorithm=heuristic", {
        method: "POST",
        body: big,
        headers: { "Content-Length": String(big.length) },
      }),
    );
    expect(declared.status).toBe(413);
    expect(declared.body.error).toStartWith(
      `the body is larger than the limit of ${ADMIN_VOLUMES_BODY_BYTES_MAX} bytes`,
    );
    const bytes = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 1 << 20)
          controller.enqueue(bytes.subarray(at, at + (1 << 20)));
        controller.close();
      },
    });
    const streamed = await app.request("/api/split/compare", {
      method: "POST",
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    const rows: VolumeRow[] = [];
    for (let index = 0; index <= ADMIN_SPLIT_TOPICS_MAX; index++)
      rows.push({ topic: `t/${index}`, bytes: 1, messages: 1 });
    const many = await json(
      app.request("/api/split/plan?algorithm=heuristic", { method: "POST", body: csvOf(rows) }),
    );
    expect(many.status).toBe(413);
    expect(many.body.error).toBe(
      `the table has ${ADMIN_SPLIT_TOPICS_MAX + 1} topics, more than the ${ADMIN_SPLIT_TOPICS_MAX} the admin app plans; use 'aria split plan'`,
    );
  });

  test("nothing published yet is 409; persisted volumes 501 where not measured", async () => {
    const { app } = fakeServer({ rows: [], persisted: null });
    const empty = await json(app.request("/api/split/plan?algorithm=heuristic"));
    expect(empty).toEqual({
      status: 409,
      body: {
        error:
          "no topic volumes in the live source yet: publish messages, or upload a volume table",
      },
    });
    expect((await app.request("/api/split/compare?source=persisted")).status).toBe(501);
  });

  test("compare: the table and both plans, for the UI", async () => {
    const { app } = fakeServer();
    const csv = readFileSync(join(DATASETS, "orders-desk.csv"), "utf8");
    const { status, body } = await json(
      app.request("/api/split/compare?maxStores=6", { method: "POST", body: csv }),
    );
    expect(status).toBe(200);
    expect(body.source).toBe("upload");
    expect(body.table.topics.length).toBe(49);
    expect(body.table.bytes.length).toBe(49);
    expect(body.table.bytesTotal).toBe(
      body.table.bytes.reduce((sum: number, value: number) => sum + value, 0),
    );
    expect(body.plans.heuristic).toEqual(await cliPlan(csv, ["--algorithm", "heuristic"]));
    expect(body.plans.adaptive).toEqual(
      await cliPlan(csv, ["--algorithm", "adaptive", "--max-stores", "6"]),
    );
    expect(body.plans.adaptive.metrics.wastedBytesTotal).toBeLessThan(
      body.plans.heuristic.metrics.wastedBytesTotal,
    );
  });
});

/** Runs `aria split plan --json` in-process on `csv` (written to a temp file) and parses its output. */
async function cliPlan(csv: string, args: string[]): Promise<unknown> {
  const path = join(
    Bun.env.TMPDIR ?? "/tmp",
    `aria-admin-test-${process.pid}-${Math.random().toString(36).slice(2)}.csv`,
  );
  await Bun.write(path, csv);
  let stdout = "";
  let stderr = "";
  try {
    const code = await runCli(["split", "plan", "--volumes", path, "--json", ...args], {
      out: (text) => void (stdout += text),
      err: (text) => void (stderr += text),
    });
    if (code !== 0) throw new Error(`aria split plan failed (${code}): ${stderr}`);
  } finally {
    await Bun.file(path).delete();
  }
  return JSON.parse(stdout);
}

describe("--admin-token", () => {
  const token = "s3cret-T0ken";

  test("every route but /healthz and the UI shell needs the bearer token", async () => {
    const { app } = fakeServer({ token });
    expect((await app.request("/healthz")).status).toBe(200);
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/ui/app.js")).status).toBe(200);
    for (const path of [
      "/metrics",
      "/api/stats",
      "/api/topics",
      "/api/split/plan?algorithm=heuristic",
      "/api/split/compare",
      "/api/nothing",
    ]) {
      const missing = await app.request(path);
      expect({ path, status: missing.status }).toEqual({ path, status: 401 });
      expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="aria-admin"');
      expect((await missing.json()).error).toBe(
        "this server requires Authorization: Bearer <admin token>",
      );
      for (const header of [
        `Bearer ${token}x`,
        `Bearer ${token.slice(0, -1)}`,
        `Basic ${token}`,
        token,
        "Bearer",
        `Bearer  `,
      ]) {
        const wrong = await app.request(path, { headers: { Authorization: header } });
        expect({ path, header, status: wrong.status }).toEqual({ path, header, status: 401 });
      }
      const right = await app.request(path, { headers: { Authorization: `bearer ${token}` } });
      expect({ path, status: right.status }).toEqual({
        path,
        status: path === "/api/nothing" ? 404 : 200,
      });
    }
    const post = await app.request("/api/split/plan?algorithm=heuristic", {
      method: "POST",
      body: "topic,bytes,messages\na/b,1,1\n",
    });
    expect(post.status).toBe(401);
  });

  test("a wrong token's 401 waits for bearerRefused (the failed sign-in delay per address); a missing one does not ask", async () => {
    const heard: string[] = [];
    let release = () => {};
    const { app } = fakeServer({
      token,
      more: {
        bearerRefused: (address) => {
          heard.push(address);
          return new Promise<void>((resolve) => {
            release = resolve;
          });
        },
      },
    });
    expect((await app.request("/api/stats")).status).toBe(401);
    expect(heard).toEqual([]);
    let answered = false;
    const wrong = Promise.resolve(
      app.request(
        "/api/stats",
        { headers: { Authorization: "Bearer nope" } },
        {
          remoteAddress: "10.1.2.3",
        },
      ),
    ).then((response) => {
      answered = true;
      return response;
    });
    await Bun.sleep(20);
    expect({ answered, heard }).toEqual({ answered: false, heard: ["10.1.2.3"] });
    release();
    expect((await wrong).status).toBe(401);
  });

  test("without a token every route is open", async () => {
    const { app } = fakeServer();
    expect((await app.request("/api/stats")).status).toBe(200);
    expect((await app.request("/metrics")).status).toBe(200);
  });
});

describe("Host and Origin", () => {
  const refusedHosts = [
    "",
    " ",
    "a".repeat(10_000),
    `${"a".repeat(63)}.`.repeat(5),
    "évil.com",
    "xn--vil-9la.com",
    "localhost, evil.com",
    "localhost.evil.com",
    "evil.com",
    "127.0.0.1.nip.io",
    "0x7f.1",
    "0x7f000001",
    "2130706433",
    "127.1",
    "a@127.0.0.1",
    "127.0.0.1:99999",
    "127.0.0.1:",
    ":7401",
    "[::1",
    "[::1]x",
    "[::ffff:127.0.0.1]",
    "[::1%eth0]",
    "[zz::1]",
    "localhost/x",
    "..",
    "http://localhost",
  ];
  const loopback = [
    "localhost",
    "LOCALHOST:7401",
    "localhost.",
    "LocalHost.:1",
    "127.0.0.1",
    "127.0.0.1:7401",
    "[::1]",
    "[::1]:7401",
    "[0:0:0:0:0:0:0:1]:7401",
  ];

  async function statusOf(
    app: ReturnType<typeof fakeServer>["app"],
    host: string,
    path = "/api/stats",
  ) {
    const answer = await app.request(path, { headers: { Host: host } });
    const body = await answer.json();
    return { host, status: answer.status, error: body.error as string | undefined };
  }

  test("by default loopback names only, with any port; anything else is 403 with the reason", async () => {
    const { app } = fakeServer();
    for (const host of loopback) expect(await statusOf(app, host)).toMatchObject({ status: 200 });
    for (const host of refusedHosts) {
      for (const path of ["/api/stats", "/healthz", "/", "/internal/split/layout"]) {
        const answer = await statusOf(app, host, path);
        expect({ host, path, status: answer.status }).toEqual({ host, path, status: 403 });
        expect(answer.error).toMatch(/host/i);
        expect(answer.error?.length).toBeLessThan(300);
      }
    }
    expect((await statusOf(app, "evil.com")).error).toBe(
      'this server does not answer as host "evil.com" (a web page reaching it under another name is refused); allow the name with --admin-allowed-hosts',
    );
    // Two Host headers arrive joined: not one host.
    const two = await app.request("/api/stats", {
      headers: [
        ["Host", "localhost"],
        ["Host", "evil.com"],
      ],
    });
    expect(two.status).toBe(403);
  });

  test("allowed names, *, and the listener's own address", async () => {
    const named = fakeServer({ more: { allowedHosts: ["aria.example.com", "Bus.Local."] } }).app;
    for (const host of ["aria.example.com", "ARIA.example.com.:443", "bus.local", "localhost"])
      expect(await statusOf(named, host)).toMatchObject({ status: 200 });
    for (const host of ["example.com", "x.aria.example.com", "aria.example.com.evil.com"])
      expect(await statusOf(named, host)).toMatchObject({ status: 403 });

    const any = fakeServer({ more: { allowedHosts: ["*"] } }).app;
    for (const host of ["evil.com", "127.0.0.1.nip.io", "0x7f.1"])
      expect(await statusOf(any, host)).toMatchObject({ status: 200 });
    for (const host of ["", "a@127.0.0.1", "évil.com", "a, b"])
      expect(await statusOf(any, host)).toMatchObject({ status: 403 });

    const bound = fakeServer({ more: { listenHost: "10.1.2.3" } }).app;
    expect(await statusOf(bound, "10.1.2.3:7401")).toMatchObject({ status: 200 });
    expect(await statusOf(bound, "10.1.2.4:7401")).toMatchObject({ status: 403 });
    const bound6 = fakeServer({ more: { listenHost: "fd00::5" } }).app;
    expect(await statusOf(bound6, "[fd00::5]:7401")).toMatchObject({ status: 200 });

    // Every interface: any IP literal is one of its own addresses (no name, no rebinding).
    for (const listenHost of ["0.0.0.0", "::"]) {
      const wildcard = fakeServer({ more: { listenHost } }).app;
      for (const host of ["192.168.0.9:7401", "[fe80::1]:7401", "localhost"])
        expect(await statusOf(wildcard, host)).toMatchObject({ status: 200 });
      for (const host of ["evil.com", "0x7f.1", "1.2.3.4.nip.io", "256.1.1.1", "01.2.3.4"])
        expect(await statusOf(wildcard, host)).toMatchObject({ status: 403 });
    }
  });

  const csv = "topic,bytes,messages\na/b,1,1\n";
  const post = (headers: Record<string, string>) => ({ method: "POST", body: csv, headers });

  test("a POST must come from the server's own origin, or carry no Origin (a non-browser)", async () => {
    const { app } = fakeServer();
    const path = "/api/split/plan?algorithm=heuristic";
    const host = "localhost:7401";
    const accepted: Record<string, string>[] = [
      {},
      { Origin: "http://localhost:7401" },
      { Origin: "https://LOCALHOST:7401" },
      { Origin: "http://localhost.:7401" },
      { "Sec-Fetch-Site": "same-origin", Origin: "http://localhost:7401" },
      { "Sec-Fetch-Site": "none" },
    ];
    for (const headers of accepted) {
      const answer = await app.request(path, post({ Host: host, ...headers }));
      expect({ headers, status: answer.status }).toEqual({ headers, status: 200 });
    }
    const refused = [
      "http://evil.com",
      "http://localhost:7402",
      "http://localhost",
      "http://127.0.0.1:7401",
      "null",
      "",
      "localhost:7401",
      "http://localhost:7401/",
      "http://a@localhost:7401",
      "http://localhost:7401, http://evil.com",
      "ftp://localhost:7401",
      `http://${"a".repeat(20_000)}`,
      "http://évil.com",
    ];
    for (const origin of refused) {
      const answer = await app.request(path, post({ Host: host, Origin: origin }));
      expect({ origin, status: answer.status }).toEqual({ origin, status: 403 });
      expect((await answer.json()).error).toMatch(/^the Origin .* is not this server's/);
    }
    const crossSite = await app.request(path, post({ Host: host, "Sec-Fetch-Site": "cross-site" }));
    expect(crossSite.status).toBe(403);
    expect((await crossSite.json()).error).toBe(
      "a request from another site (Sec-Fetch-Site: cross-site) may not call this server",
    );
    // Without a port in Host, the Origin's scheme's default port.
    const bare = await app.request(path, post({ Host: "localhost", Origin: "http://localhost" }));
    expect(bare.status).toBe(200);
  });

  test("GETs of the API refuse another site's Origin; the UI shell and /healthz do not", async () => {
    const { app } = fakeServer();
    const evil = { Host: "localhost:7401", Origin: "http://evil.com" };
    for (const path of ["/api/stats", "/api/topics", "/metrics", "/internal/split/layout"]) {
      expect({ path, status: (await app.request(path, { headers: evil })).status }).toEqual({
        path,
        status: 403,
      });
      const site = { Host: "localhost:7401", "Sec-Fetch-Site": "cross-site" };
      expect((await app.request(path, { headers: site })).status).toBe(403);
    }
    for (const path of ["/", "/ui/app.js", "/healthz"])
      expect((await app.request(path, { headers: evil })).status).toBe(200);
    const own = { Host: "localhost:7401", Origin: "http://localhost:7401" };
    expect((await app.request("/api/stats", { headers: own })).status).toBe(200);
  });

  test("the right bearer token is not ambient: with it another Origin passes, without it not", async () => {
    const token = "t0ken";
    const { app } = fakeServer({ token });
    const path = "/api/split/plan?algorithm=heuristic";
    const evil = { Host: "localhost:7401", Origin: "http://evil.com" };
    expect(
      (await app.request(path, post({ ...evil, Authorization: `Bearer ${token}` }))).status,
    ).toBe(200);
    expect((await app.request(path, post({ ...evil, Authorization: "Bearer wrong" }))).status).toBe(
      403,
    );
    expect((await app.request(path, post(evil))).status).toBe(403);
    // The Host check holds whatever the token.
    const rebound = { Host: "evil.com", Authorization: `Bearer ${token}` };
    expect((await app.request(path, post(rebound))).status).toBe(403);
  });
});

describe("body limits", () => {
  function splitApp() {
    const swaps: unknown[] = [];
    const host: SplitHost = {
      layout: async () => [],
      reserveIds: async (count) => count,
      switchLayout: async (swap) => void swaps.push(swap),
      seal: async () => ({ segmentsClosed: 0, records: 0, bytes: 0 }),
    };
    const { app } = fakeServer({ more: { routes: (app) => addSplitRoutes(app, host) } });
    return { app, swaps };
  }
  const streamOf = (bytes: Uint8Array) =>
    ({
      method: "POST",
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let at = 0; at < bytes.length; at += 1 << 16)
            controller.enqueue(bytes.subarray(at, at + (1 << 16)));
          controller.close();
        },
      }),
      duplex: "half",
    }) as RequestInit;

  test("each split route takes at most its limit: 413 beyond it, declared or streamed", async () => {
    const { app, swaps } = splitApp();
    for (const [path, limit] of [
      ["/internal/split/reserve", ADMIN_SMALL_BODY_BYTES_MAX],
      ["/internal/split/seal", ADMIN_SMALL_BODY_BYTES_MAX],
      ["/internal/split/commit", ADMIN_COMMIT_BODY_BYTES_MAX],
    ] as const) {
      const over = new Uint8Array(limit + 1).fill(0x20);
      const declared = await app.request(path, { method: "POST", body: over });
      expect({ path, status: declared.status }).toEqual({ path, status: 413 });
      expect((await declared.json()).error).toBe(
        `the body is larger than the limit of ${limit} bytes for this route`,
      );
      const streamed = await app.request(path, streamOf(over));
      expect({ path, status: streamed.status }).toEqual({ path, status: 413 });
    }
    expect(swaps).toEqual([]);
    // What the routes legitimately take passes: a count, nothing, a split of 100,000 topics
    // (~90 bytes a topic with its counts).
    const reserve = await app.request("/internal/split/reserve", {
      method: "POST",
      body: JSON.stringify({ count: 5 }),
    });
    expect(await reserve.json()).toEqual({ first: 5 });
    expect((await app.request("/internal/split/seal", { method: "POST" })).status).toBe(200);
    const topics = Array.from({ length: 100_000 }, (_, index) => ({
      topic: `team${index % 97}/service${index % 1013}/region${index % 7}/topic${index}`,
      messages: 123_456,
      bytes: 98_765_432,
    }));
    const swap = { removed: [1, 2], added: [], topics: [{ id: 3, topics }] };
    const body = JSON.stringify(swap);
    expect(body.length).toBeGreaterThan(8_000_000);
    const commit = await app.request("/internal/split/commit", { method: "POST", body });
    expect(commit.status).toBe(200);
    expect(swaps).toHaveLength(1);
  });
});

describe("planning off the event loop", () => {
  /** A planner whose jobs finish when the test says. */
  function heldPlanner(concurrency: number) {
    const held: { work: PlanWork; finish: () => void }[] = [];
    return {
      held,
      planner: {
        concurrency,
        run: (work: PlanWork) =>
          new Promise<PlanAnswer>((resolve) =>
            held.push({ work, finish: () => resolve(runPlanWork(work)) }),
          ),
      },
    };
  }
  const csv = "topic,bytes,messages\na/b,10,1\na/c,5,1\n";
  const upload = (path: string) => ({ path, init: { method: "POST", body: csv } });

  test("the planner does the work: uploads as CSV, live volumes packed", async () => {
    const { held, planner } = heldPlanner(2);
    const { app } = fakeServer({ more: { planner } });
    const answers = [
      app.request("/api/split/compare", { method: "POST", body: csv }),
      app.request("/api/split/plan?algorithm=adaptive&maxStores=2"),
    ];
    await Bun.sleep(5);
    const jobOf = (kind: string) => held.find((job) => job.work.kind === kind)?.work;
    expect(held.length).toBe(2);
    expect(jobOf("compare")?.input).toEqual({ csv });
    const live = jobOf("plan")?.input as { packed: { topics: string } };
    expect(live.packed.topics.split("\n")).toContain("app/orders/created");
    for (const job of held) job.finish();
    const [compared, planned] = await Promise.all(answers);
    expect(compared.status).toBe(200);
    expect(compared.headers.get("content-type")).toBe("application/json");
    expect((await compared.json()).plans.heuristic.algorithm).toBe("heuristic");
    expect((await planned.json()).algorithm).toBe("adaptive");
  });

  test("at most the planner's concurrency run, a few wait, the rest are 503 with Retry-After", async () => {
    const concurrency = 2;
    const { held, planner } = heldPlanner(concurrency);
    const { app } = fakeServer({ more: { planner } });
    const admitted = concurrency + ADMIN_PLAN_QUEUE_MAX;
    const answers: (Response | Promise<Response>)[] = [];
    for (let index = 0; index < admitted; index++) {
      const { path, init } = upload(
        index % 2 === 0 ? "/api/split/compare" : "/api/split/plan?algorithm=heuristic",
      );
      answers.push(app.request(path, init));
    }
    await Bun.sleep(5);
    expect(held.length).toBe(concurrency);
    for (const path of ["/api/split/compare", "/api/split/plan?algorithm=heuristic"]) {
      const busy = await app.request(path, { method: "POST", body: csv });
      expect(busy.status).toBe(503);
      expect(busy.headers.get("retry-after")).toBe(String(ADMIN_PLAN_RETRY_AFTER_SECONDS));
      expect((await busy.json()).error).toBe(
        `split planning is busy (${concurrency} running, ${ADMIN_PLAN_QUEUE_MAX} waiting); retry in ${ADMIN_PLAN_RETRY_AFTER_SECONDS} s`,
      );
      const live = await app.request(path.replace("?algorithm", "?source=live&algorithm"));
      expect(live.status).toBe(503);
    }
    // Finishing one lets the next waiting one run, never more than the concurrency at once.
    for (let done = 0; done < admitted; done++) {
      const running = held.filter((job) => job.finish !== noop);
      expect(running.length).toBeLessThanOrEqual(concurrency);
      const next = running[0];
      next.finish();
      next.finish = noop;
      await Bun.sleep(1);
    }
    for (const answer of await Promise.all(answers)) expect(answer.status).toBe(200);
    expect(held.length).toBe(admitted);
    // The gate is free again; a failed job frees its place too.
    const failing = fakeServer({
      more: {
        planner: { concurrency: 1, run: async () => Promise.reject(new Error("worker died")) },
      },
    }).app;
    for (let index = 0; index < ADMIN_PLAN_QUEUE_MAX + 3; index++) {
      const answer = await failing.request("/api/split/compare", { method: "POST", body: csv });
      expect(answer.status).toBe(500);
      expect((await answer.json()).error).toBe("internal error: worker died");
    }
  });
});

const noop = () => {};

describe("web UI", () => {
  test("the page and its files are served with their types and a same-origin-only policy", async () => {
    const { app } = fakeServer();
    const page = await app.request("/");
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toStartWith("default-src 'self';");
    const html = await page.text();
    const referenced = [...html.matchAll(/(?:src|href)="ui\/([^"]+)"/g)].map((match) => match[1]);
    expect(referenced.sort()).toEqual(["app.js", "style.css"]);
    for (const name of referenced) {
      const response = await app.request(`/ui/${name}`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe(
        name.endsWith(".css") ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8",
      );
    }
  });

  test("every script parses and imports only files the app serves", () => {
    const transpiler = new Bun.Transpiler({ loader: "js" });
    const reached = new Set(["app.js"]);
    for (const [name, asset] of UI_ASSETS) {
      if (!name.endsWith(".js")) continue;
      transpiler.transformSync(asset.body); // throws on a syntax error
      for (const { path } of transpiler.scanImports(asset.body)) {
        expect(path).toMatch(/^\.\/[a-z_]+\.js$/);
        expect(UI_ASSETS.has(path.slice(2))).toBe(true);
        reached.add(path.slice(2));
      }
    }
    // No file is bundled for nothing.
    expect(
      [...UI_ASSETS.keys()].filter((name) => name.endsWith(".js") && !reached.has(name)),
    ).toEqual([]);
  });

  test("nothing loads from the network: no absolute URLs, no web fonts", async () => {
    const { app } = fakeServer();
    const files = [
      await (await app.request("/")).text(),
      ...[...UI_ASSETS.values()].map((asset) => asset.body),
    ];
    for (const text of files) {
      // The SVG namespace is a name, not a fetch.
      const urls = [...text.matchAll(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}[^\s"'`)]*/gi)]
        .map((match) => match[0])
        .filter((url) => !url.includes("www.w3.org/2000/svg"));
      expect(urls).toEqual([]);
      expect(text).not.toMatch(/@import|@font-face|url\(\s*['"]?http/);
    }
  });
});
