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
  type ChartSeries,
  type IoCounters,
  REPORT_CHARTS,
  type ReportChart,
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
export {
  type Axis,
  type BarChart,
  barChart,
  escapeXml,
  type LineChart,
  lineChart,
} from "./chart.ts";
export { reportCharts, reportHtml } from "./report.ts";
