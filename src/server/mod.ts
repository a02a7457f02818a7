/**
 * server: the application assembled from the runtime's adapters — what `aria serve`, `aria split`
 * and `aria bench` run. It builds the broker, tip, store and admin app over the Runtime's sockets,
 * files and clock (server.ts), finds or becomes the owner of a data directory for a split
 * (split_owner.ts, split_host.ts) and runs its tasks on worker threads (split_pool.ts, whose
 * worker entry is split_worker.ts), sets up the bench's environment (bench_env.ts), and binds the
 * client to the real TCP dialer (connect.ts).
 *
 * An edge like src/cli/: it may import src/runtime/ and every core folder; no core folder imports
 * it. It adapts no runtime API itself (that is src/runtime/'s job), beyond the portable web and
 * node:* calls its files name in their headers.
 */
export { benchEnv, defaultParentDir, type MachineInfo, machineInfo } from "./bench_env.ts";
export { connect } from "./connect.ts";
export {
  FATAL_EXIT,
  FatalError,
  type FollowOptions,
  type RunningServer,
  type ServerOptions,
  startServer,
} from "./server.ts";
export { remoteHost } from "./split_host.ts";
export {
  defaultWorkers,
  nowMs,
  openSplitOwner,
  type SplitOwner,
  stderrIsTerminal,
} from "./split_owner.ts";
export { adminPlanner, planRunner, workerRunner } from "./split_pool.ts";
