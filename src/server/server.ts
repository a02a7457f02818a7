/**
 * startServer: assembles a running Aria server from its parts — opens (and recovers) the data
 * directory, refills the tip from the newest persisted messages, builds the broker, listens for
 * the protocol over TCP and serves the admin app over HTTP, and runs the timers (segment aging,
 * retention). stop() is the graceful shutdown: stop accepting, commit and acknowledge, close
 * clients with SHUTTING_DOWN, sort and close the store. Sockets, files, the HTTP server and the
 * clock come from the Runtime (src/runtime/), so the same assembly runs under Bun and Deno.
 */
import { mkdir } from "node:fs/promises";
import { createAdminApp, hostPolicyOf, hostRefusal, type LastSplit } from "../admin/mod.ts";
import { FailureThrottle, type Users } from "../auth/mod.ts";
import { Broker } from "../broker/broker.ts";
import {
  ADMIN_HOST_DEFAULT,
  ARIA_VERSION,
  MAINTENANCE_INTERVAL_MS,
  METRICS_LAGS_MAX,
  RECORD_HEADER_BYTES,
} from "../constants.ts";
import {
  Store,
  StoreError,
  type FsyncPolicy,
  type RecoveryReport,
  type SplitSummary,
  type StoreOptions,
} from "../store/mod.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/mod.ts";
import { TopicTable } from "../topic/topic_table.ts";
import {
  acquireLock,
  buildCommit,
  ConsumerFile,
  type HeldLock,
  nodeIdOf,
  type HttpServer,
  runtime,
  serverTlsProblem,
  type TcpListener,
  type TlsServerOptions,
  processLog,
  processStats,
  watchEventLoopLag,
} from "../runtime/mod.ts";
import type { Log } from "../stdx/log.ts";
import { addSplitRoutes } from "../admin/split_routes.ts";
import { addConsumerRoutes } from "../admin/consumer_routes.ts";
import { storeHost } from "../split/in_process.ts";
import { MqttDoor, mqttTopicMapping } from "../mqtt/mod.ts";
import { AriaClient, type DialTls } from "../client/mod.ts";
import { type AckMode, Follower, type LogMessage, type ReplicaError } from "../replica/mod.ts";
import { adminPlanner } from "./split_pool.ts";
import { adminCredentialOf, readUsersFile, reloadUsers, usersOf } from "./users_source.ts";

/** Options of `aria serve`. */
export interface ServerOptions {
  host: string;
  port: number;
  adminPort: number;
  dataDir: string;
  tipBytes: number;
  fsync: FsyncPolicy;
  retainAgeUs?: number;
  retainBytes?: number;
  authToken?: string;
  /** Users with tokens or certificate subjects and topic permissions (src/auth/); see reloadUsers. */
  usersFile?: string;
  /** Serve MQTT 3.1.1 / 5.0 on this port too (0 picks one; absent: no MQTT), over TLS with `tls`. */
  mqttPort?: number;
  /** MQTT 5 subscribers get user property `aria-seq` on each PUBLISH (default true). */
  mqttAriaSeq?: boolean;
  /** Serve the TCP protocol over TLS with this certificate and key (PEM); `clientCa`: mutual TLS. */
  tls?: TlsServerOptions;
  /** Serve the admin app over HTTPS with this certificate and key (PEM). */
  adminTls?: Pick<TlsServerOptions, "cert" | "key">;
  /** Address of the admin HTTP app (default 127.0.0.1: reachable from this machine only). */
  adminHost?: string;
  /** When set, the admin app requires `Authorization: Bearer <adminToken>` (all but /healthz and the UI shell). */
  adminToken?: string;
  /** Where the server logs (default: text lines at info and above on stderr). */
  log?: Log;
  /** Host names the admin app answers as beyond loopback and its own address; `*`: any. */
  adminAllowedHosts?: readonly string[];
  /** The store's budgets, for embedders and tests (the CLI keeps the defaults of src/constants.ts). */
  storeLimits?: Pick<
    StoreOptions,
    "journalBytesMax" | "journalRetainedBytesMax" | "pendingRecordsMax" | "segmentBytesMax"
  >;
  /** Run as a replica of the leader at `url` (tcp:// or tls://; src/replica/, docs/cluster.md). */
  follow?: FollowOptions;
  /** This node's name (a replica's at its leader); default: one made once and kept in the data dir. */
  nodeId?: string;
  /** When a PUBLISH is acknowledged: leader (default), quorum or all (docs/cluster.md). */
  acks?: AckMode;
  /** A replica not caught up within the last this long leaves the ISR (µs). */
  isrMaxLagUs?: number;
  /** The replicas `--acks quorum` counts, seen or not (absent: those seen since start). */
  replicasExpected?: number;
}

/** How a replica reaches its leader: the URL, and the client's credential and TLS material. */
export interface FollowOptions {
  url: string;
  authToken?: string;
  tls?: DialTls;
  /** First reconnect delay (ms; doubles up to 2 s). Tests shorten it. */
  backoffMs?: number;
}

/** A running server. */
export interface RunningServer {
  tcpUrl: string;
  adminUrl: string;
  /** `mqtt://HOST:PORT` (`mqtts://` with TLS) when serving MQTT (ServerOptions.mqttPort). */
  mqttUrl?: string;
  broker: Broker;
  store: Store;
  tip: Tip;
  recovery: RecoveryReport;
  /** Reads the users file again (SIGHUP): applied to open connections, or kept on an error. */
  reloadUsers(): Promise<{ ok: boolean; message: string }>;
  /** A replica's follower (ServerOptions.follow), else null. */
  follower: Follower | null;
  /** Resolves when the server cannot go on (a replica's fatal condition); never otherwise. */
  failed: Promise<FatalError>;
  stop(): Promise<void>;
}

/** A start-up failure the operator can fix with a flag; `exitCode` is the process's. */
export class FatalError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** Exit codes of fatal start-up conditions. */
export const FATAL_EXIT = {
  dataDir: 3,
  port: 4,
  corrupt: 5,
  tls: 6,
  users: 7,
  /** A replica whose leader no longer holds its next seq (retention removed it). */
  replicaBehindRetention: 8,
  /** A replica whose log is ahead of its leader's or differs from it. */
  replicaDiverged: 9,
} as const;

/** The exit code of a store error at start-up: damage found, or anything else about the directory. */
function storeExit(error: unknown): number {
  return (error as { code?: string }).code === "ARIA_ERR_STORE_CORRUPT"
    ? FATAL_EXIT.corrupt
    : FATAL_EXIT.dataDir;
}

/** The command that repairs damage found at start-up (exit 5), as a line to print after it. */
function repairHint(error: unknown, dataDir: string): string {
  if (storeExit(error) !== FATAL_EXIT.corrupt) return "";
  const quoted = /^[\w./-]+$/.test(dataDir) ? dataDir : `'${dataDir.replaceAll("'", "'\\''")}'`;
  return `\nRepair it with: aria repair --data-dir ${quoted}`;
}

/** Starts a server; throws FatalError when the data directory or a port is unusable. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  checkTls(options);
  const log = options.log ?? processLog({ level: "info", format: "text" });
  let users: Users | undefined;
  if (options.usersFile !== undefined) {
    const read = await readUsersFile(options.usersFile);
    if (!read.ok)
      throw new FatalError(
        `Cannot read the users file: ${read.error}; fix it, or choose another with --users`,
        FATAL_EXIT.users,
      );
    users = usersOf(read.users);
  }
  try {
    await mkdir(options.dataDir, { recursive: true });
  } catch (error) {
    throw new FatalError(
      `Cannot create data directory "${options.dataDir}": ${(error as Error).message}; choose another with --data-dir`,
      FATAL_EXIT.dataDir,
    );
  }
  // One owner per data directory; `aria split` finds this server through the lock's admin URL.
  const locked = await acquireLock(options.dataDir, {
    command: "serve",
    adminUrl: null,
    adminToken: options.adminToken,
  }).catch((error: Error) => {
    throw new FatalError(
      `Cannot lock data directory "${options.dataDir}": ${error.message}; choose another with --data-dir`,
      FATAL_EXIT.dataDir,
    );
  });
  if (!locked.ok) {
    throw new FatalError(
      `Cannot open data directory "${options.dataDir}": it is in use by pid ${locked.holder.pid} (aria ${locked.holder.command}); stop it or choose another --data-dir`,
      FATAL_EXIT.dataDir,
    );
  }
  const lock: HeldLock = locked.lock;
  if (locked.replaced !== undefined)
    log.warn("took over the data directory from a process that is gone", {
      from: locked.replaced,
      dataDir: options.dataDir,
    });
  let opened: Awaited<ReturnType<typeof Store.open>>;
  try {
    opened = await Store.open(runtime.openDisk(options.dataDir), {
      ...options.storeLimits,
      fsync: options.fsync,
      schedule: runtime.scheduleAfter,
      yieldToEvents: runtime.yieldToEvents,
      crc32: runtime.crc32,
    });
  } catch (error) {
    await lock.release();
    throw new FatalError(
      `Cannot open data directory "${options.dataDir}": ${(error as Error).message}${repairHint(error, options.dataDir)}`,
      storeExit(error),
    );
  }
  const { store, recovery } = opened;
  // Durable consumers' positions: a file of their own beside the store's (consumer_file.ts).
  let consumerFile: ConsumerFile;
  try {
    consumerFile = await ConsumerFile.open(options.dataDir, {
      fsync: options.fsync,
      crc32: runtime.crc32,
      onError: (error) =>
        log.error("cannot write the durable consumers' positions", { reason: error.message }),
      onTornTail: (cut) =>
        log.warn("cut the durable consumers' file after its last whole record", {
          ...cut,
          consumer: cut.consumer ?? "(name unreadable)",
        }),
    });
  } catch (error) {
    await store.close({ sort: false }).catch(() => {});
    await lock.release();
    throw new FatalError(
      `Cannot open data directory "${options.dataDir}": ${(error as Error).message}${repairHint(error, options.dataDir)}`,
      storeExit(error),
    );
  }
  // Once each way: the store stops writing (a full disk it retries, or a failure) and resumes.
  store.onWritableChanged = (reason) =>
    reason === null
      ? log.info("the store writes again")
      : log.error("the store cannot write: publishes are refused while it cannot", {
          reason: reason.message,
        });
  const topics = new TopicTable();
  const tip = new Tip(topics, { capacityBytes: options.tipBytes });
  // Refill the tip so tip recovery works right after a restart.
  let newest: Awaited<ReturnType<Store["readNewest"]>>;
  try {
    newest = await store.readNewest(options.tipBytes, {
      // A ring record: header, payload, and properties with their u16 length (tip/ring.ts).
      bytesOf: (m) => {
        const properties = m.properties === undefined ? 0 : m.properties.length + 2;
        return RECORD_HEADER_BYTES + ((m.payload.length + properties + 7) & ~7);
      },
    });
  } catch (error) {
    // Damage in the newest records (reported with file and offset), or the disk failing: a clear
    // start-up error, the store closed and the lock released (not a stack trace holding both).
    await store.close({ sort: false }).catch(() => {});
    await lock.release();
    throw new FatalError(
      `Cannot read the newest messages of "${options.dataDir}" into the tip: ${(error as Error).message}${repairHint(error, options.dataDir)}`,
      storeExit(error),
    );
  }
  for (const message of newest) {
    const { payload, properties } = message;
    const topicId = topics.internValid(message.topic);
    const propertiesBytes = properties?.length ?? 0;
    tip.append(
      topicId,
      message.seq,
      message.timeUs,
      payload,
      0,
      payload.length,
      properties,
      0,
      propertiesBytes,
    );
  }
  // Failed sign-ins per source address, of the protocol and the admin app alike.
  const throttle = new FailureThrottle();
  // A replica's node id (kept in DATA_DIR/node-id when not given): it refuses to follow itself.
  const nodeId =
    options.follow === undefined
      ? options.nodeId
      : (options.nodeId ?? (await nodeIdOf(options.dataDir)));
  const broker = new Broker({
    topics,
    tip,
    store,
    consumerStore: consumerFile,
    nodeId,
    acks: options.acks,
    isrMaxLagUs: options.isrMaxLagUs,
    replicasExpected: options.replicasExpected,
    clock: runtime.clock,
    scheduler: runtime.scheduler,
    authToken: options.authToken,
    signIn: {
      users,
      throttle,
      scheduleAfter: runtime.scheduleAfter,
    },
    log,
  });
  if (options.follow !== undefined) broker.follow(options.follow.url);
  let tcp: TcpListener;
  let admin: HttpServer;
  try {
    tcp = runtime.listenTcp(broker, { host: options.host, port: options.port, tls: options.tls });
  } catch (error) {
    await store.close({ sort: false });
    await lock.release();
    throw new FatalError(
      `Cannot listen on ${options.host}:${options.port}: ${(error as Error).message}; choose another with --port`,
      FATAL_EXIT.port,
    );
  }
  // MQTT: each connection is bridged onto the broker as a native session (src/mqtt/).
  const door =
    options.mqttPort === undefined
      ? null
      : new MqttDoor({
          broker,
          clock: runtime.clock,
          scheduler: runtime.scheduler,
          mapping: mqttTopicMapping,
          // Persistent sessions keep their positions as durable consumers (docs/mqtt.md).
          consumers: {
            list: () => broker.consumerList(),
            remove: (name) => broker.removeConsumer(name),
          },
          // Their state (flights, wills, expiry) rides the consumers' file and its batches.
          sessions: consumerFile,
          retained: {
            newest: (entries) => broker.newestOf(Filter.of(...entries)),
            read: (entries) => broker.latestMessagesOf(entries),
          },
          ariaSeq: options.mqttAriaSeq ?? true,
          log,
        });
  let mqtt: TcpListener | null = null;
  if (door !== null) {
    try {
      mqtt = runtime.listenTcp(door, {
        host: options.host,
        port: options.mqttPort as number,
        tls: options.tls,
      });
    } catch (error) {
      tcp.stop();
      await store.close({ sort: false });
      await lock.release();
      throw new FatalError(
        `Cannot listen on ${options.host}:${options.mqttPort}: ${(error as Error).message}; choose another with --mqtt-port`,
        FATAL_EXIT.port,
      );
    }
  }
  const lag = watchEventLoopLag({ log: runtime.writeStderr });
  const adminHost = options.adminHost ?? ADMIN_HOST_DEFAULT;
  // Split planning for the admin app, on worker threads started at the first plan.
  const planner = adminPlanner();
  const app = createAdminApp({
    stats: () => ({
      broker: broker.stats(),
      tip: tip.stats(),
      store: store.stats(),
      eventLoop: { lagMaxSeconds: lag.maxSeconds() },
      topics: topics.stats(),
      process: processStats(),
      build: {
        version: ARIA_VERSION,
        commit: buildCommit(),
        runtime: `${runtime.name} ${runtime.version}`,
      },
      lags: broker.largestLags(METRICS_LAGS_MAX),
      replicas: broker.replicas.list(),
    }),
    // Live: published since start (the broker's). Persisted: held in the data directory (the store's).
    volumes: (source) =>
      source === "live"
        ? broker.topicVolumes()
        : store
            .topicVolumes()
            .map((row) => ({ topic: row.topic, bytes: row.payloadBytes, messages: row.messages })),
    recoverySeconds: () => broker.recoverySeconds,
    // From the data directory: the same after a restart or an offline split.
    split: () => ({ storeBytes: store.stats().storeBytes, last: lastSplitOf(store.lastSplit()) }),
    // `aria split` against this running server: it performs the switch (src/admin/split_routes.ts).
    routes: (app) => {
      addSplitRoutes(app, storeHost(store), (swap) =>
        log.info("split switched: reads use the new layout", {
          filesRemoved: swap.removed.length,
          storesAdded: swap.added.length,
        }),
      );
      addConsumerRoutes(app, broker);
    },
    clock: runtime.clock,
    // With users, a user with the admin role (or the admin token, for `aria split`).
    token:
      users === undefined
        ? options.adminToken
        : adminCredentialOf(users, options.adminToken, (reason, address) => {
            broker.countAuthFailure();
            log.warn("admin app refused a bearer token", { address, reason });
          }),
    // A wrong bearer token waits like a failed sign-in; with users the check above counted and
    // logged it with its reason, without them it is counted and logged here.
    bearerRefused: async (address) => {
      const delayUs = throttle.failed(address, runtime.clock.nowUs());
      if (users === undefined) {
        broker.countAuthFailure();
        log.warn("admin app refused a bearer token", {
          address,
          reason: "wrong admin token",
          errorAfterMs: Math.round(delayUs / 1000),
        });
      }
      if (delayUs > 0)
        await new Promise<void>((resolve) => runtime.scheduleAfter(delayUs / 1000, resolve));
    },
    listenHost: adminHost,
    allowedHosts: options.adminAllowedHosts,
    planner,
  });
  try {
    // MQTT over WebSocket at /mqtt of the admin port (subprotocol mqtt), under the admin app's
    // Host rule (a page that rebinds its DNS name to this machine is refused).
    const hostPolicy = hostPolicyOf({
      listenHost: adminHost,
      allowedHosts: options.adminAllowedHosts,
    });
    admin = runtime.serveHttp(app.fetch, {
      host: adminHost,
      port: options.adminPort,
      tls: options.adminTls,
      webSocket:
        door === null
          ? undefined
          : {
              path: "/mqtt",
              protocol: "mqtt",
              events: door,
              refusal: (request) => hostRefusal(request.headers.get("host"), hostPolicy),
            },
    });
  } catch (error) {
    tcp.stop();
    mqtt?.stop();
    planner.close();
    await store.close({ sort: false });
    await lock.release();
    throw new FatalError(
      `Cannot listen on ${adminHost}:${options.adminPort}: ${(error as Error).message}; choose another with --admin-port or --admin-host`,
      FATAL_EXIT.port,
    );
  }
  // Closed files of an earlier build have no per-topic counts: measured once, in the background.
  if (store.uncountedFiles > 0) {
    void store.countFiles().catch((error: unknown) => {
      if (error instanceof StoreError && error.code === "ARIA_ERR_STORE_CLOSED") return;
      log.error("counting the topics of closed files failed", {
        reason: error instanceof Error ? error.message : String(error),
      });
    });
  }
  const adminScheme = options.adminTls === undefined ? "http" : "https";
  await lock.update({
    adminUrl: `${adminScheme}://${hostForUrl(adminHost === "0.0.0.0" ? "127.0.0.1" : adminHost)}:${admin.port}`,
  });
  // A replica follows its leader once it serves (its subscribers may connect before it caught up).
  let fail: (error: FatalError) => void = () => {};
  const failed = new Promise<FatalError>((resolve) => {
    fail = resolve;
  });
  const follower =
    options.follow === undefined
      ? null
      : startFollower(
          options.follow,
          nodeId as string,
          broker,
          await lastMessageOf(store),
          log,
          fail,
        );
  let maintaining = false;
  const timer = setInterval(() => {
    const nowUs = runtime.clock.nowUs();
    runtime.collectGarbage();
    store.maintain(nowUs);
    broker.expire(nowUs);
    door?.expire(nowUs);
    if (maintaining || (options.retainAgeUs === undefined && options.retainBytes === undefined))
      return;
    maintaining = true;
    store
      .retain({ ageUs: options.retainAgeUs, bytes: options.retainBytes }, nowUs)
      .catch((error: unknown) => {
        // Never an unhandled rejection (the runtime would end the process). A failed manifest
        // append has stopped the store (publishes fail from then on); a closed or failed store
        // refuses retention, which says nothing new.
        if (error instanceof StoreError && error.code === "ARIA_ERR_STORE_CLOSED") return;
        log.error("retention failed", {
          reason: error instanceof Error ? error.message : String(error),
        });
      })
      .finally(() => {
        maintaining = false;
      });
  }, MAINTENANCE_INTERVAL_MS);
  let stopping: Promise<void> | null = null;
  return {
    tcpUrl: `${options.tls === undefined ? "tcp" : "tls"}://${hostForUrl(options.host)}:${tcp.port}`,
    adminUrl: `${adminScheme}://${hostForUrl(adminHost)}:${admin.port}`,
    mqttUrl:
      mqtt === null
        ? undefined
        : `${options.tls === undefined ? "mqtt" : "mqtts"}://${hostForUrl(options.host)}:${mqtt.port}`,
    broker,
    store,
    tip,
    recovery,
    reloadUsers: async () => {
      if (users === undefined || options.usersFile === undefined)
        return { ok: true, message: "no users file to reload (--users)" };
      const reloaded = await reloadUsers(options.usersFile, users);
      if (reloaded.ok) broker.usersReplaced();
      return reloaded;
    },
    follower,
    failed,
    stop: () =>
      (stopping ??= (async () => {
        await follower?.stop();
        clearInterval(timer);
        lag.stop();
        tcp.stop();
        mqtt?.stop();
        // A store that cannot write (a full disk) fails now: what waits for a commit is
        // refused, and the shutdown does not wait for free space.
        store.stopRetrying();
        await broker.shutdown();
        await admin.stop();
        planner.close();
        await consumerFile.close();
        await store.close();
        await lock.release();
      })()),
  };
}

/** Starts following the leader (src/replica/); a fatal condition ends the server through `fail`. */
function startFollower(
  follow: FollowOptions,
  nodeId: string,
  broker: Broker,
  last: LogMessage | null,
  log: Log,
  fail: (error: FatalError) => void,
): Follower {
  const follower = new Follower({
    leaderUrl: follow.url,
    nodeId,
    broker,
    last,
    log,
    connect: (url) =>
      AriaClient.connect(url, runtime.dialTcp, {
        clientName: "aria-replica",
        authToken: follow.authToken,
        tls: follow.tls,
        reconnect: false,
      }),
    sleep: (ms) => new Promise((resolve) => runtime.scheduleAfter(ms, resolve)),
    backoffMs: follow.backoffMs,
    onFatal: (error: ReplicaError) =>
      fail(
        new FatalError(
          error.message,
          error.kind === "leader_lacks_next_seq"
            ? FATAL_EXIT.replicaBehindRetention
            : FATAL_EXIT.replicaDiverged,
        ),
      ),
  });
  follower.start();
  return follower;
}

/** The newest message of the store, whole (a replica compares it with its leader's), or null. */
async function lastMessageOf(store: Store): Promise<LogMessage | null> {
  if (store.nextSeq <= 1) return null;
  const seq = store.nextSeq - 1;
  const batch = await store.read(Filter.of("**"), { seq }).nextBatch();
  const message = batch[0];
  if (message === undefined || message.seq !== seq) return null;
  return {
    seq,
    timeUs: message.timeUs,
    topic: message.topic,
    payload: message.payload.slice(),
    properties: message.properties?.slice() ?? new Uint8Array(0),
  };
}

/**
 * Refuses TLS material that cannot serve (a key of another certificate, an expired certificate,
 * text that is not PEM) before anything opens, naming the flags to change.
 */
function checkTls(options: ServerOptions): void {
  if (options.tls?.clientCa !== undefined && runtime.name === "deno")
    throw new FatalError(
      "Cannot serve mutual TLS under Deno: Deno.listenTls cannot ask for client certificates; run the Bun build or leave out --tls-client-ca",
      FATAL_EXIT.tls,
    );
  const nowMs = runtime.clock.nowUs() / 1000;
  const checks = [
    { tls: options.tls, flags: "--tls-cert and --tls-key" },
    { tls: options.adminTls, flags: "the admin app's certificate and key (--admin-tls-*)" },
  ];
  for (const { tls, flags } of checks) {
    const problem = tls === undefined ? null : serverTlsProblem(tls, nowMs);
    if (problem !== null)
      throw new FatalError(
        `Cannot serve TLS: ${problem}; check ${problem.startsWith("the client CA") ? "--tls-client-ca" : flags}`,
        FATAL_EXIT.tls,
      );
  }
}

/** The store's record of the last split, as the admin app reports it. */
function lastSplitOf(split: SplitSummary | null): LastSplit | null {
  if (split === null) return null;
  const { durationUs, ...rest } = split;
  return { ...rest, durationSeconds: durationUs === null ? null : durationUs / 1e6 };
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
