/**
 * Ports of the admin app: everything it reads from a running server, as small interfaces the
 * runtime binds to the real broker, tip and store (src/server/server.ts) and tests bind to fakes.
 * The app never reaches past these: no sockets, files or clocks of its own.
 */
import type { BrokerStats, SubscriptionLag } from "../broker/broker.ts";
import type { AdminCredential } from "./auth.ts";
import type { SplitAlgorithm, VolumeRow } from "../split/mod.ts";
import type { Histogram } from "../stdx/histogram.ts";
import type { StoreStats } from "../store/mod.ts";
import type { TipStats } from "../tip/tip.ts";
import type { TopicStats } from "../topic/mod.ts";
import type { ReplicaInfo } from "../replica/tracker.ts";
import type { Planner } from "./plan_work.ts";

/** The counters of the server's parts, read together. */
export interface ServerStats {
  broker: BrokerStats;
  tip: TipStats;
  store: StoreStats;
  /** The largest event-loop pause of the last 30–60 s (absent where nothing measures it). */
  eventLoop?: { lagMaxSeconds: number };
  /** Topics interned, the limit, and new topics refused at it (absent in older fakes). */
  topics?: TopicStats;
  /** The server process's resources (absent in fakes). */
  process?: ProcessView;
  /** What this server is: version, commit, runtime (absent in fakes). */
  build?: BuildView;
  /** The subscriptions furthest behind, largest first (absent in fakes). */
  lags?: readonly SubscriptionLag[];
  /** The replicas following this server (docs/cluster.md; absent in fakes). */
  replicas?: readonly ReplicaInfo[];
}

/** The server process's resources, as the runtime reads them (null: this system cannot tell). */
export interface ProcessView {
  residentBytes: number;
  cpuUserSeconds: number;
  cpuSystemSeconds: number;
  openFiles: number | null;
  openFilesMax: number | null;
  startTimeSeconds: number;
}

/** The build a server runs. */
export interface BuildView {
  version: string;
  commit: string;
  /** "bun 1.4.5", "deno 2.9.6". */
  runtime: string;
}

/**
 * Where topic volumes are measured (messages and payload bytes per topic). `live`: published
 * since the server started (the broker's counters, gone at a restart). `persisted`: held in the
 * data directory — its journal, segments and split stores, kept per file in the manifest, so the
 * same after a restart, and less what retention removed (`/api/topics` shows it by default).
 */
export type VolumeSource = "live" | "persisted";

/** Every VolumeSource, in the order the API lists them. */
export const VOLUME_SOURCES: readonly VolumeSource[] = ["live", "persisted"];

/**
 * The last split, as the data directory records it (the manifest's SPLIT record after its SWAP):
 * the same after a restart, and after an offline split. Fields a split by an earlier build did not
 * record are null; its stores still say how many it wrote and their bytes.
 */
export interface LastSplit {
  /** When it switched, µs since the epoch. */
  finishedUs: number | null;
  durationSeconds: number | null;
  algorithm: SplitAlgorithm | null;
  /** Its generation (the first file id it reserved: its stores carry it). */
  generation: number;
  /** Stores it wrote and their bytes. */
  storesWritten: number;
  storeBytes: number;
  /** Its plan's store count (all partitions), wasted bytes and worst ratio (topic reads). */
  plan: { stores: number; wastedBytesTotal: number; worstRatio: number } | null;
}

/** What the split subsystem has put on disk. */
export interface SplitStatus {
  /** Bytes of the subtree stores on disk (0 until split runs). */
  storeBytes: number;
  /** The last split, or null when none has switched on this data directory. */
  last: LastSplit | null;
}

/** Reads the time (µs since the epoch), for rates. Structurally the broker's Clock. */
export interface AdminClock {
  nowUs(): number;
}

/** A histogram as the metrics read it (src/stdx/histogram.ts). */
export type HistogramView = Pick<Histogram, "bounds" | "cumulative" | "sum" | "count">;

/** What the admin app reads from a running server. */
export interface AdminDependencies {
  /** The broker's, tip's and store's counters. */
  stats(): ServerStats;
  /** Per-topic volumes from `source`, or null when this server cannot measure that source. */
  volumes(source: VolumeSource): readonly VolumeRow[] | null;
  /** Durations from SUBSCRIBED to CAUGHT_UP by where recovery started, in seconds. */
  recoverySeconds(): { tip: HistogramView; disk: HistogramView };
  /** The split subsystem's state. */
  split(): SplitStatus;
  clock: AdminClock;
  /** When set, every route but /healthz and the static UI shell requires `Authorization: Bearer <token>`. */
  token?: AdminCredential;
  /**
   * Hears a wrong bearer token from `address` (counted and logged by the server) and resolves
   * when the 401 may go out: the delay of failed sign-ins per address (absent: at once).
   */
  bearerRefused?: (address: string) => Promise<void>;
  /**
   * The address the app listens on (its own name is answered; `0.0.0.0`/`::`: any IP literal).
   * Default: a loopback listener, which answers loopback names only (host_origin.ts).
   */
  listenHost?: string;
  /** More Host names the app answers as (`--admin-allowed-hosts`); `*` allows any. */
  allowedHosts?: readonly string[];
  /** Runs split planning off the event loop (the server's worker pool); absent: inline. */
  planner?: Planner;
  /** Extra routes the runtime adds behind the token check (the split's switch: split_routes.ts). */
  routes?: (app: import("hono").Hono) => void;
}
