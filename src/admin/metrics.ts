/**
 * What GET /metrics exposes, as Prometheus text: publish counters (total and per partition),
 * connections, subscriptions by state, the tip (bytes, oldest seq, block pool), recoveries with
 * duration histograms, disk bytes by kind, and the last split. Pure: it formats a snapshot.
 *
 * Bounded cardinality: only the `partitionsMax` partitions with the most bytes get their own
 * `partition` label; the rest are summed under OTHER_PARTITION_LABEL, a value no partition can
 * have (topics never contain `*`), so a real partition named "other" is never confused with it.
 */
import { METRICS_LABEL_CHARS_MAX, METRICS_LAGS_MAX } from "../constants.ts";
import { partitionOf } from "../topic/mod.ts";
import type { VolumeRow } from "../split/mod.ts";
import type { HistogramView, ServerStats, SplitStatus } from "./ports.ts";
import { PrometheusText } from "./prometheus.ts";
import type { ReplicaInfo } from "../replica/tracker.ts";

/** The `partition` label of the partitions beyond the top ones. */
export const OTHER_PARTITION_LABEL = "*other*";

/** Everything one scrape reads. */
export interface MetricsSnapshot {
  stats: ServerStats;
  /** Live per-topic volumes (since start). */
  volumes: readonly VolumeRow[];
  recoverySeconds: { tip: HistogramView; disk: HistogramView };
  split: SplitStatus;
  /** Partitions with their own label. */
  partitionsMax: number;
}

/** The subscription states of the metrics, from the broker's phases. */
const SUBSCRIPTION_STATES = [
  ["live", "live"],
  ["tip_recovery", "tip"],
  ["disk_recovery", "disk"],
  ["stalled", "stalled"],
  ["resolving", "resolving"],
] as const;

/** Renders the exposition document. */
export function renderMetrics(snapshot: MetricsSnapshot): string {
  const { broker, tip, store } = snapshot.stats;
  const out = new PrometheusText();
  out.single(
    "aria_published_messages_total",
    "counter",
    "Messages published (sequenced) since start.",
    broker.messagesPublished,
  );
  out.single(
    "aria_published_bytes_total",
    "counter",
    "Payload bytes published since start.",
    broker.bytesPublished,
  );
  out.single(
    "aria_delivered_messages_total",
    "counter",
    "Messages delivered to subscribers since start.",
    broker.messagesDelivered,
  );
  out.single(
    "aria_delivered_shared_messages_total",
    "counter",
    "Of those, delivered live through DATA frames encoded once for subscriptions with equal filters.",
    broker.messagesDeliveredShared,
  );
  out.single(
    "aria_publisher_pauses_total",
    "counter",
    "Times a publishing connection stopped being read because the store's sorter was behind (back-pressure).",
    broker.publishersPaused,
  );
  out.single("aria_next_seq", "gauge", "The seq the next published message gets.", broker.nextSeq);
  out.single(
    "aria_visible_seq",
    "gauge",
    "Seqs below this are durable and visible to subscribers.",
    broker.visibleSeq,
  );
  writePartitions(out, snapshot.volumes, snapshot.partitionsMax);

  out.single("aria_connections", "gauge", "Open protocol connections.", broker.connections);
  if (broker.authFailures !== undefined)
    out.single(
      "aria_auth_failures_total",
      "counter",
      "Failed sign-ins (HELLO with a missing or wrong token or certificate) since start.",
      broker.authFailures,
    );
  const topics = snapshot.stats.topics;
  if (topics !== undefined) {
    out.single("aria_topics", "gauge", "Topics the server has interned.", topics.known);
    out.single(
      "aria_topics_max",
      "gauge",
      "Topics it may intern; at it new topics are refused.",
      topics.max,
    );
    out.single(
      "aria_topics_refused_total",
      "counter",
      "New topics refused since start (a PUBLISH naming one is refused whole): the server held aria_topics_max topics.",
      topics.refused,
    );
  }
  writeProcess(out, snapshot.stats);
  if (snapshot.stats.eventLoop !== undefined)
    out.single(
      "aria_event_loop_lag_max_seconds",
      "gauge",
      "The longest the event loop was kept from running a timer in the last 30-60 s: a pause every client felt.",
      snapshot.stats.eventLoop.lagMaxSeconds,
    );
  out.family(
    "aria_subscriptions",
    "gauge",
    "Subscriptions by state: live, catching up from the tip or disk, stalled by a full send queue, resolving.",
  );
  for (const [state, phase] of SUBSCRIPTION_STATES)
    out.sample("aria_subscriptions", broker.subscriptionsByPhase[phase], { state });

  out.single("aria_tip_used_bytes", "gauge", "Bytes of the tip ring in use.", tip.bytesUsed);
  out.single(
    "aria_tip_capacity_bytes",
    "gauge",
    "Capacity of the tip ring in bytes.",
    tip.capacityBytes,
  );
  out.single("aria_tip_records", "gauge", "Messages held in the tip.", tip.records);
  if (tip.records > 0)
    out.single(
      "aria_tip_oldest_seq",
      "gauge",
      "Seq of the oldest message in the tip (absent while the tip is empty).",
      tip.firstSeq,
    );
  out.single(
    "aria_tip_pool_blocks_used",
    "gauge",
    "Index blocks of the tip's block pool in use.",
    tip.poolBlocksUsed,
  );
  out.single(
    "aria_tip_pool_blocks_free",
    "gauge",
    "Index blocks of the tip's block pool free.",
    tip.poolBlocksFree,
  );
  out.single(
    "aria_tip_pool_evictions_total",
    "counter",
    "Tip records evicted early to free index blocks.",
    tip.evictionsForPool,
  );

  out.family(
    "aria_recoveries_total",
    "counter",
    "Subscriptions that caught up by recovering from the tip or disk.",
  );
  out.sample("aria_recoveries_total", broker.recoveries.tip, { kind: "tip" });
  out.sample("aria_recoveries_total", broker.recoveries.disk, { kind: "disk" });
  out.family(
    "aria_recovery_duration_seconds",
    "histogram",
    "Time from SUBSCRIBED to CAUGHT_UP, by where recovery started.",
  );
  writeHistogram(out, "aria_recovery_duration_seconds", snapshot.recoverySeconds.tip, "tip");
  writeHistogram(out, "aria_recovery_duration_seconds", snapshot.recoverySeconds.disk, "disk");

  out.family("aria_disk_bytes", "gauge", "Bytes on disk by kind of file.");
  out.sample("aria_disk_bytes", store.segmentBytes, { kind: "segments" });
  out.sample("aria_disk_bytes", snapshot.split.storeBytes, { kind: "stores" });
  out.sample("aria_disk_bytes", store.journalBytes, { kind: "journal" });
  out.sample("aria_disk_bytes", store.spareJournalBytes, { kind: "journal_spare" });
  out.sample("aria_disk_bytes", store.manifestBytes, { kind: "manifest" });
  out.single("aria_store_segments", "gauge", "Closed segments in force.", store.segments);
  out.single("aria_store_subtree_stores", "gauge", "Subtree stores in force.", store.stores);
  out.single(
    "aria_store_writable",
    "gauge",
    "1 while the store can write its journal; 0 while it cannot (see /healthz for why).",
    typeof store.unwritable === "string" ? 0 : 1,
  );

  const last = snapshot.split.last;
  if (last === null) {
    out.comment("aria_split_last_*: absent, no split has switched on this data directory");
  } else {
    // From the data directory (the manifest's SPLIT record): a split before this build recorded
    // only its stores, so its time, duration and plan are absent.
    if (last.finishedUs !== null)
      out.single(
        "aria_split_last_time_seconds",
        "gauge",
        "When the last split switched, seconds since the epoch.",
        last.finishedUs / 1e6,
      );
    if (last.durationSeconds !== null)
      out.single(
        "aria_split_last_duration_seconds",
        "gauge",
        "How long the last split ran.",
        last.durationSeconds,
      );
    out.single(
      "aria_split_last_written_stores",
      "gauge",
      "Stores the last split wrote.",
      last.storesWritten,
    );
    out.single(
      "aria_split_last_written_bytes",
      "gauge",
      "Bytes of the stores the last split wrote.",
      last.storeBytes,
    );
    if (last.plan !== null) {
      out.single(
        "aria_split_last_stores",
        "gauge",
        "Stores of the last split's plan.",
        last.plan.stores,
      );
      out.single(
        "aria_split_last_wasted_bytes",
        "gauge",
        "Bytes read and thrown away reading each topic once, under the last split's plan.",
        last.plan.wastedBytesTotal,
      );
      out.single(
        "aria_split_last_worst_ratio",
        "gauge",
        "Worst bytes read per byte wanted of one topic, under the last split's plan.",
        last.plan.worstRatio,
      );
    }
  }
  return out.text();
}

/** Per-partition counters: the top `partitionsMax` by bytes, the rest summed as OTHER_PARTITION_LABEL. */
/** The process metrics every Prometheus client library exports, under their usual names, and the build. */
function writeProcess(out: PrometheusText, stats: ServerStats): void {
  const process = stats.process;
  if (process !== undefined) {
    out.single(
      "process_resident_memory_bytes",
      "gauge",
      "Resident memory of the server process.",
      process.residentBytes,
    );
    out.single(
      "process_cpu_seconds_total",
      "counter",
      "CPU time of the server process, user and system.",
      process.cpuUserSeconds + process.cpuSystemSeconds,
    );
    if (process.openFiles !== null)
      out.single(
        "process_open_fds",
        "gauge",
        "Open file descriptors: files and sockets.",
        process.openFiles,
      );
    if (process.openFilesMax !== null)
      out.single(
        "process_max_fds",
        "gauge",
        "The limit on open file descriptors (soft).",
        process.openFilesMax,
      );
    out.single(
      "process_start_time_seconds",
      "gauge",
      "When the server process started, seconds since the epoch.",
      process.startTimeSeconds,
    );
  }
  if (stats.lags !== undefined && stats.lags.length > 0) {
    out.family(
      "aria_subscription_lag_seqs",
      "gauge",
      `Seqs between a subscription's position and the visible end, for the ${METRICS_LAGS_MAX} furthest behind (session and subscription ids, filter, phase).`,
    );
    for (const lag of stats.lags)
      out.sample("aria_subscription_lag_seqs", lag.seqsBehind, {
        session: String(lag.session),
        subscription: String(lag.subscription),
        filter: labelCut(lag.filter),
        phase: lag.phase,
      });
  }
  if (stats.replicas !== undefined && stats.replicas.length > 0) writeReplicas(out, stats.replicas);
  if (stats.build !== undefined) {
    out.family("aria_build_info", "gauge", "The build this server runs (always 1).");
    out.sample("aria_build_info", 1, { ...stats.build });
  }
}

/** Each replica's durable seq, lag and state (docs/cluster.md), labelled by its node id. */
function writeReplicas(out: PrometheusText, replicas: readonly ReplicaInfo[]): void {
  const families = [
    ["aria_replica_durable_seq", "The last seq the replica reported durable in its store."],
    ["aria_replica_lag_messages", "Messages durable on this server beyond the replica's."],
    [
      "aria_replica_lag_ms",
      "This server's newest durable publish time minus the replica's durable message's (ms).",
    ],
    ["aria_replica_connected", "1 while the replica follows (its subscription is open), else 0."],
    ["aria_replica_in_sync", "1 while the replica is in the in-sync set (ISR), else 0."],
  ] as const;
  for (const [name, help] of families) {
    out.family(name, "gauge", help);
    for (const replica of replicas) {
      const value =
        name === "aria_replica_durable_seq"
          ? replica.durableSeq
          : name === "aria_replica_lag_messages"
            ? replica.lagMessages
            : name === "aria_replica_lag_ms"
              ? replica.lagMs
              : name === "aria_replica_connected"
                ? Number(replica.connected)
                : Number(replica.inSync);
      if (value !== null) out.sample(name, value, { replica: labelCut(replica.id) });
    }
  }
}

/** A label value cut to METRICS_LABEL_CHARS_MAX characters (a filter may hold 256 entries). */
function labelCut(text: string): string {
  return text.length <= METRICS_LABEL_CHARS_MAX
    ? text
    : `${text.slice(0, METRICS_LABEL_CHARS_MAX - 1)}…`;
}

function writePartitions(
  out: PrometheusText,
  volumes: readonly VolumeRow[],
  partitionsMax: number,
): void {
  const byPartition = new Map<string, { messages: number; bytes: number }>();
  for (const row of volumes) {
    const partition = partitionOf(row.topic);
    const sums = byPartition.get(partition);
    if (sums === undefined)
      byPartition.set(partition, { messages: row.messages, bytes: row.bytes });
    else {
      sums.messages += row.messages;
      sums.bytes += row.bytes;
    }
  }
  const ranked = [...byPartition].sort((a, b) => b[1].bytes - a[1].bytes || (a[0] < b[0] ? -1 : 1));
  const top = ranked.slice(0, partitionsMax);
  const other = { messages: 0, bytes: 0 };
  for (const [, sums] of ranked.slice(partitionsMax)) {
    other.messages += sums.messages;
    other.bytes += sums.bytes;
  }
  out.single(
    "aria_partitions_published",
    "gauge",
    "Partitions with messages published since start.",
    byPartition.size,
  );
  for (const [name, key, help] of [
    [
      "aria_partition_published_messages_total",
      "messages",
      'Messages published since start, by partition (the largest by bytes; the rest as partition="*other*").',
    ],
    [
      "aria_partition_published_bytes_total",
      "bytes",
      'Payload bytes published since start, by partition (the largest by bytes; the rest as partition="*other*").',
    ],
  ] as const) {
    out.family(name, "counter", help);
    for (const [partition, sums] of top) out.sample(name, sums[key], { partition });
    if (ranked.length > partitionsMax)
      out.sample(name, other[key], { partition: OTHER_PARTITION_LABEL });
  }
}

function writeHistogram(
  out: PrometheusText,
  name: string,
  histogram: HistogramView,
  kind: string,
): void {
  const cumulative = histogram.cumulative();
  for (let i = 0; i < cumulative.length; i++) {
    out.sample(`${name}_bucket`, cumulative[i], {
      kind,
      le: i < histogram.bounds.length ? String(histogram.bounds[i]) : "+Inf",
    });
  }
  out.sample(`${name}_sum`, histogram.sum, { kind });
  out.sample(`${name}_count`, histogram.count, { kind });
}
