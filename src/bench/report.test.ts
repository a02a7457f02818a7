/**
 * Tests of report.ts: each chart draws the series the scenarios fed it (and only those), a chart
 * nobody fed says which scenarios would, the tables print as the markdown ones do, and the page
 * holds no script and loads nothing from elsewhere.
 */
import { expect, test } from "bun:test";
import { reportCharts, reportHtml } from "./report.ts";
import type { ScenarioResult } from "./scenarios.ts";
import { formatSi } from "./table.ts";

const RESULTS: ScenarioResult[] = [
  {
    scenario: "fanout",
    title: "Fan-out <live>",
    columns: [
      { key: "subscribers", header: "subscribers" },
      { key: "rate", header: "msg/s", format: formatSi },
    ],
    rows: [
      { subscribers: 1, rate: 150_000 },
      { subscribers: 100, rate: 2_500_000 },
    ],
    notes: ["a & b"],
    targets: [{ target: "fast", measured: "2.5 M", met: true }],
    series: [
      {
        chart: "readers-throughput",
        name: "fan-out",
        points: [
          { x: 1, y: 150_000 },
          { x: 100, y: 2_500_000 },
        ],
      },
    ],
    elapsedMs: 1,
  },
  {
    scenario: "tip-recovery",
    title: "Tip recovery",
    columns: [{ key: "reader", header: "reader" }],
    rows: [{ reader: "x" }],
    notes: [],
    targets: [{ target: "10x", measured: "3x", met: false }],
    series: [
      {
        chart: "first-message",
        name: "tip",
        points: [
          { x: "1% subtree", y: 2.5 },
          { x: "**", y: 1.2 },
        ],
      },
      { chart: "first-message", name: "disk", points: [{ x: "1% subtree", y: 9 }] },
      { chart: "latency-cdf", name: "empty", points: [] },
    ],
    elapsedMs: 1,
  },
];

test("each chart draws what was fed to it; an unfed one is null", () => {
  const charts = reportCharts(RESULTS);
  expect(charts.map((chart) => chart.chart)).toEqual([
    "readers-throughput",
    "latency-cdf",
    "first-message",
    "recovery-selectivity",
  ]);
  const [readers, latency, first, selectivity] = charts;
  expect(readers.svg).toContain('data-series="fan-out" data-points="2"');
  // A series without points feeds nothing.
  expect(latency.svg).toBeNull();
  expect(selectivity.svg).toBeNull();
  expect(selectivity.from).toEqual(["tip-recovery", "disk-recovery"]);
  // Bars: categories in order of first appearance; "disk" has no "**" bar.
  expect(first.svg!.match(/<rect [^>]*><title>/g)!.length).toBe(3);
  expect(first.svg).toContain("<title>disk, 1% subtree: 9.00</title>");
  expect(first.svg!.indexOf(">1% subtree</text>")).toBeLessThan(first.svg!.indexOf(">**</text>"));
});

test("the page: charts, then each table as the markdown prints it, targets; nothing external", () => {
  const html = reportHtml({ machineLine: "today · 2 × cpu", results: RESULTS });
  expect(html.startsWith("<!doctype html>")).toBe(true);
  expect(html).toContain('<figure data-chart="readers-throughput"><svg');
  expect(html).toContain(
    '<p class="missing" data-chart="latency-cdf">Publish → deliver latency (CDF): no data in this run (from <code>latency</code>).</p>',
  );
  expect(html).toContain("<h2>Fan-out &lt;live&gt;</h2>");
  expect(html).toContain('<td class="number">2.50 M</td>');
  expect(html).toContain("<li>a &amp; b</li>");
  expect(html).toContain('<td class="met-no">no</td>');
  expect(html).not.toContain("<script");
  expect(html.replaceAll("http://www.w3.org/2000/svg", "")).not.toMatch(/https?:|src=|href=/);
});
