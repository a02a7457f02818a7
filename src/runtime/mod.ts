/**
 * runtime: the adapters between Aria and the JavaScript runtime that runs it (Bun or Deno) —
 * sockets, files, the HTTP server, CRC-32, clocks, workers, the process — behind the Runtime
 * interface, plus the data directory's LOCK file and the build's commit. The only folder that
 * touches Bun.*, Deno.* and node:* for I/O; it assembles nothing (src/server/ builds the server,
 * the split's owner and pool and the bench environment from these adapters).
 *
 * Not exported: each runtime's own classes (BunDisk, nativeCrc32, …), which benchmarks and tests
 * that need the Bun side by name import from their files.
 */
export { runtime } from "./current_runtime.ts";
export {
  OutputClosedError,
  type ConnectionEvents,
  type FetchHandler,
  type HttpServer,
  type ReadBytesResult,
  type ReadTextResult,
  type Runtime,
  type TcpListener,
  type TlsServerOptions,
} from "./runtime.ts";
export { serverTlsProblem } from "./tls.ts";
export {
  acquireLock,
  readLock,
  type HeldLock,
  type LockInfo,
} from "./data_dir_lock.ts";
export { NODE_ID_PATTERN, nodeIdOf } from "./node_id.ts";
export { buildCommit } from "./build_info.ts";
export {
  CONSUMERS_FILE,
  ConsumerFile,
  type ConsumersRepair,
  repairConsumersFile,
} from "./consumer_file.ts";
export { type EventLoopLag, watchEventLoopLag } from "./event_loop_lag.ts";
export { processLog } from "./process_log.ts";
export { type ProcessStats, processStats } from "./process_stats.ts";
export { hashToken, newToken, tokenDigest, tokenHashProblem, verifyToken } from "./token_kdf.ts";
export { type FileLock, lockBeside, writeTextFileAtomic } from "./text_file_write.ts";
