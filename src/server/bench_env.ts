/**
 * The environment `aria bench` runs its scenarios in (src/bench/scenarios.ts's BenchEnv): servers
 * in this process on fresh temporary data directories (or the one at --url), clients, clocks,
 * CPU time, /proc/self/io counters, page-cache eviction with `dd`, and the machine description.
 * This is the bench's edge to the process; src/cli/bench.ts only parses, runs and prints.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import type { BenchEnv, BenchServer, IoCounters } from "../bench/mod.ts";
import type { DialTls } from "../client/mod.ts";
import { type FsyncPolicy, Store } from "../store/mod.ts";
import type { Tip } from "../tip/mod.ts";
import { processLog, runtime } from "../runtime/mod.ts";
import { connect } from "./connect.ts";
import { startServer } from "./server.ts";

/** Where temporary data directories go unless --data-dir says otherwise. */
export function defaultParentDir(): string {
  return tmpdir();
}

/** What the results header says of the machine. */
export interface MachineInfo {
  date: string;
  cpus: number;
  cpuModel: string;
  runtime: string;
  platform: string;
  server: string;
}

/** The machine, runtime and server being measured. */
export function machineInfo(url: string | null): MachineInfo {
  const list = cpus();
  return {
    date: new Date().toISOString(),
    cpus: list.length,
    cpuModel: list[0]?.model ?? "unknown",
    runtime: `${runtime.name} ${runtime.version}`,
    platform: `${process.platform} ${process.arch}`,
    server: url ?? "in-process (127.0.0.1, port 0, temporary data directories)",
  };
}

/** The environment the scenarios run in: servers, clients, clocks, temp dirs, I/O counters. */
export function benchEnv(options: {
  url: string | null;
  /** TLS material for a tls:// `url` (its CA, a client certificate). */
  tls?: DialTls;
  /** The token the clients sign in with (a `url` server's). */
  authToken?: string;
  parentDir: string;
  progress: (text: string) => void;
}): BenchEnv {
  return {
    server: (serverOptions) =>
      options.url !== null
        ? Promise.resolve(externalServer(options.url))
        : inProcessServer(options.parentDir, serverOptions),
    connect: (url) =>
      connect(url, {
        clientName: "aria-bench",
        reconnect: false,
        tls: options.tls,
        authToken: options.authToken,
      }),
    nowMs: () => performance.now(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    progress: options.progress,
    io: readIoCounters,
    cpuMs: () => {
      const usage = process.cpuUsage();
      return (usage.user + usage.system) / 1000;
    },
    openStore: async ({ segmentBytesMax, sortNever = false }) => {
      const dataDir = await mkdtemp(join(options.parentDir, "aria-bench-store-"));
      const never = sortNever
        ? { segmentBytesMax: 2 ** 50, pendingRecordsMax: 2 ** 50, journalRetainedBytesMax: 2 ** 50 }
        : { segmentBytesMax };
      try {
        const { store } = await Store.open(runtime.openDisk(dataDir), {
          fsync: "interval",
          schedule: runtime.scheduleAfter,
          yieldToEvents: runtime.yieldToEvents,
          crc32: runtime.crc32,
          ...never,
        });
        return {
          store,
          close: async () => {
            try {
              await store.close({ sort: false });
            } finally {
              await rm(dataDir, { recursive: true, force: true });
            }
          },
        };
      } catch (error) {
        await rm(dataDir, { recursive: true, force: true });
        throw error;
      }
    },
  };
}

function externalServer(url: string): BenchServer {
  return {
    url,
    fsync: "external",
    tipFirstSeq: () => null,
    recoveries: () => null,
    storeBytes: () => null,
    storeBytesRead: () => null,
    restart: null,
    dropCaches: async () => false,
    stop: async () => {},
  };
}

/** A server in this process on a fresh temporary data directory; stop() removes the directory. */
async function inProcessServer(
  parentDir: string,
  options: {
    fsync: FsyncPolicy;
    tipBytes: number;
    retainBytes?: number;
    tipReadStrategy?: "planned" | "linear";
  },
): Promise<BenchServer> {
  const dataDir = await mkdtemp(join(parentDir, "aria-bench-"));
  const start = async (): Promise<BenchServer> => {
    const running = await startServer({
      host: "127.0.0.1",
      port: 0,
      adminPort: 0,
      dataDir,
      tipBytes: options.tipBytes - (options.tipBytes % 8),
      fsync: options.fsync,
      retainBytes: options.retainBytes,
      // Connections opened and closed are the benchmark's own: only warnings share the progress line.
      log: processLog({ level: "warn", format: "text" }),
    });
    if (options.tipReadStrategy === "linear") forceLinearTipReads(running.tip);
    return {
      url: running.tcpUrl,
      fsync: options.fsync,
      tipFirstSeq: () => (running.tip.ring.count > 0 ? running.tip.ring.firstSeq : null),
      recoveries: () => running.broker.stats().recoveries,
      storeBytes: () => {
        const stats = running.store.stats();
        return { segments: stats.segmentBytes, journals: stats.journalBytes };
      },
      storeBytesRead: () => {
        // Store stats gained `bytesRead` with the subtree stores; older stores lack it.
        const bytesRead = (running.store.stats() as { bytesRead?: number }).bytesRead;
        return typeof bytesRead === "number" ? bytesRead : null;
      },
      restart: async () => {
        const stopping = performance.now();
        await running.stop();
        const starting = performance.now();
        const server = await start();
        return { server, stopMs: starting - stopping, startMs: performance.now() - starting };
      },
      dropCaches: () => dropPageCache(dataDir),
      stop: async () => {
        try {
          await running.stop();
        } finally {
          await rm(dataDir, { recursive: true, force: true });
        }
      },
    };
  };
  try {
    return await start();
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Makes every read of `tip` take the linear pass, whatever its caller asks. The linear pass is a
 * baseline only a benchmark wants (the recovery mix measures what the index saves), so a bench
 * server's tip is forced to it here rather than through a serving option.
 */
export function forceLinearTipReads(tip: Pick<Tip, "read">): void {
  const read = tip.read.bind(tip);
  tip.read = (matcher, fromSeq, readOptions = {}) =>
    read(matcher, fromSeq, { ...readOptions, strategy: "linear" });
}

/**
 * Evicts every file under `dir` from the page cache (posix_fadvise DONTNEED through
 * `dd iflag=nocache count=0`), so the next reads come from the device. Files must be clean
 * (written and synced): dirty pages stay. False when dd is missing or fails.
 */
async function dropPageCache(dir: string): Promise<boolean> {
  let files: string[];
  try {
    files = (await readdir(dir, { recursive: true, withFileTypes: true }))
      .filter((entry) => entry.isFile())
      .map((entry) => join(entry.parentPath, entry.name));
  } catch {
    return false;
  }
  for (const file of files) {
    try {
      if (
        (await runtime.runQuiet([
          "dd",
          `if=${file}`,
          "iflag=nocache",
          "count=0",
          "status=none",
        ])) !== 0
      )
        return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** rchar and read_bytes of /proc/self/io (Linux), or null. */
function readIoCounters(): IoCounters | null {
  let text: string;
  try {
    text = readFileSync("/proc/self/io", "utf8");
  } catch {
    return null;
  }
  const field = (name: string) =>
    Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(text)?.[1] ?? Number.NaN);
  const counters = { readCallBytes: field("rchar"), storageReadBytes: field("read_bytes") };
  return Number.isNaN(counters.readCallBytes) || Number.isNaN(counters.storageReadBytes)
    ? null
    : counters;
}
