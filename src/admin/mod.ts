/** admin: the admin HTTP app (Hono) and its web UI, built from injected dependencies. */
export { createAdminApp } from "./app.ts";
export type { AdminCredential } from "./auth.ts";
export { allowedHostProblem, hostPolicyOf, hostRefusal } from "./host_origin.ts";
export {
  runPlanWork,
  type PlanAnswer,
  type PlanWork,
  type Planner,
} from "./plan_work.ts";
export {
  VOLUME_SOURCES,
  type AdminClock,
  type AdminDependencies,
  type HistogramView,
  type LastSplit,
  type ServerStats,
  type SplitStatus,
  type VolumeSource,
} from "./ports.ts";
export { OTHER_PARTITION_LABEL } from "./metrics.ts";
