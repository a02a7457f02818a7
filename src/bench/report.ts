/**
 * report: the page `aria bench --report DIR` writes (index.html): the charts of the run —
 * throughput by number of readers, latency CDFs, time to first message, recovery time by
 * selectivity — drawn from the series the scenarios returned (ScenarioResult.series), then each
 * scenario's table, notes and the targets, as HTML. Pure: results in, one self-contained HTML
 * string out (inline SVG and CSS, no script, nothing fetched), readable offline.
 *
 * Not here: running scenarios, writing files (src/cli/bench.ts), drawing (chart.ts). A chart no
 * scenario of the run fed is not drawn; the page says which scenarios would feed it.
 */
import { barChart, escapeXml, lineChart } from "./chart.ts";
import type { ChartSeries, ReportChart, ScenarioName, ScenarioResult } from "./scenarios.ts";
import { formatCell, formatMs, formatSi } from "./table.ts";

/** How each report chart is drawn, and which scenarios feed it. */
const CHART_SPECS: Record<
  ReportChart,
  { title: string; from: ScenarioName[]; draw(series: ChartSeries[], title: string): string }
> = {
  "readers-throughput": {
    title: "Throughput by number of readers",
    from: ["fanout", "herd"],
    draw: (series, title) =>
      lineChart({
        title,
        x: { label: "readers (connections)", scale: "log" },
        y: { label: "messages delivered per second (all readers)" },
        series: numeric(series),
      }),
  },
  "latency-cdf": {
    title: "Publish → deliver latency (CDF)",
    from: ["latency"],
    draw: (series, title) =>
      lineChart({
        title,
        x: { label: "latency (ms)", scale: "log" },
        y: { label: "messages delivered within (%)", format: (v) => `${v}%` },
        series: numeric(series),
      }),
  },
  "first-message": {
    title: "Time to first message",
    from: ["tip-recovery", "disk-recovery", "herd"],
    draw: (series, title) => {
      const categories = [...new Set(series.flatMap((s) => s.points.map((p) => String(p.x))))];
      return barChart({
        title,
        // Log: a herd's first message (seconds, behind 99 others) beside one client's (ms).
        y: { label: "subscribe → first message (ms)", scale: "log" },
        valueFormat: formatMs,
        categories,
        series: series.map((s) => ({
          name: s.name,
          values: categories.map((c) => s.points.find((p) => String(p.x) === c)?.y ?? null),
        })),
      });
    },
  },
  "recovery-selectivity": {
    title: "Recovery time by selectivity (from the oldest message)",
    from: ["tip-recovery", "disk-recovery"],
    draw: (series, title) =>
      lineChart({
        title,
        x: { label: "share of the stream the filter selects (%)", scale: "log" },
        y: { label: "replay wall time (ms)", scale: "log" },
        series: numeric(series),
      }),
  },
};

function numeric(series: ChartSeries[]): { name: string; points: [number, number][] }[] {
  return series.map((s) => ({
    name: s.name,
    points: s.points
      .filter((p): p is { x: number; y: number } => typeof p.x === "number")
      .map((p) => [p.x, p.y]),
  }));
}

/** The report's charts as SVG strings, in REPORT_CHARTS order; null for a chart with no data. */
export function reportCharts(
  results: readonly ScenarioResult[],
): { chart: ReportChart; title: string; svg: string | null; from: ScenarioName[] }[] {
  const all = results.flatMap((result) => result.series ?? []);
  return (Object.keys(CHART_SPECS) as ReportChart[]).map((chart) => {
    const spec = CHART_SPECS[chart];
    const series = all.filter((s) => s.chart === chart && s.points.length > 0);
    return {
      chart,
      title: spec.title,
      svg: series.length === 0 ? null : spec.draw(series, spec.title),
      from: spec.from,
    };
  });
}

const STYLE = `
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; }
.machine { color: #555; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.charts figure { margin: 0; border: 1px solid #ddd; padding: 0.5em; }
.missing { color: #777; font-style: italic; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.met-yes { color: #1a7f37; } .met-no { color: #b42318; }
`;

/** The whole page: heading, machine line, charts, then each scenario's table and notes. */
export function reportHtml(input: {
  machineLine: string;
  results: readonly ScenarioResult[];
}): string {
  const charts = reportCharts(input.results).map((chart) =>
    chart.svg === null
      ? `<p class="missing" data-chart="${chart.chart}">${escapeXml(chart.title)}: no data in this run (from ${chart.from.map((s) => `<code>${s}</code>`).join(", ")}).</p>`
      : `<figure data-chart="${chart.chart}">${chart.svg}</figure>`,
  );
  const sections = input.results.map((result) => {
    const header = result.columns.map((c) => `<th>${escapeXml(c.header)}</th>`).join("");
    const body = result.rows
      .map(
        (row) =>
          `<tr>${result.columns
            .map((c) => {
              const numeric = typeof row[c.key] === "number";
              return `<td${numeric ? ' class="number"' : ""}>${escapeXml(formatCell(row[c.key], c))}</td>`;
            })
            .join("")}</tr>`,
      )
      .join("\n");
    const notes =
      result.notes.length === 0
        ? ""
        : `<ul>${result.notes.map((note) => `<li>${escapeXml(note)}</li>`).join("")}</ul>`;
    return `<section data-scenario="${result.scenario}"><h2>${escapeXml(result.title)}</h2>
<table><thead><tr>${header}</tr></thead><tbody>
${body}
</tbody></table>${notes}</section>`;
  });
  const targets = input.results.flatMap((result) => result.targets);
  const targetTable =
    targets.length === 0
      ? ""
      : `<section><h2>Targets</h2><table><thead><tr><th>target</th><th>measured</th><th>met</th></tr></thead><tbody>${targets
          .map(
            (t) =>
              `<tr><td>${escapeXml(t.target)}</td><td>${escapeXml(t.measured)}</td><td class="met-${t.met ? "yes" : "no"}">${t.met ? "yes" : "no"}</td></tr>`,
          )
          .join("")}</tbody></table></section>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>aria bench</title>
<style>${STYLE}</style>
</head>
<body>
<h1>aria bench</h1>
<p class="machine">${escapeXml(input.machineLine)}</p>
<div class="charts">
${charts.join("\n")}
</div>
${sections.join("\n")}
${targetTable}
<p class="machine">Rates print with SI prefixes (${escapeXml(formatSi(1234567))} = 1,234,567). The tables are also in report.md beside this page.</p>
</body>
</html>
`;
}
