/**
 * bench: scenario benchmarks of a running server (`aria bench`): the runners, which drive clients
 * through an injected BenchEnv, and the pure helpers they report with (percentiles, tables).
 */
export {
  type BenchEnv,
  type BenchOptions,
  type BenchOverrides,
  type BenchServer,
  benchOptions,
  type IoCounters,
  runScenario,
  type ScenarioName,
  type ScenarioResult,
  SCENARIOS,
  type TargetCheck,
} from "./scenarios.ts";
export {
  PATH_BATCH,
  type PathEnv,
  publishPathBreakdown,
  type StoreFactory,
} from "./publish_path.ts";
export { median, percentile, perSecond, Samples, summarize, type Summary } from "./stats.ts";
export {
  type Column,
  formatBytes,
  formatMBps,
  formatMs,
  formatNumber,
  formatRatio,
  formatSi,
  markdownTable,
  type Row,
} from "./table.ts";
