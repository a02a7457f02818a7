/**
 * `aria bench --report DIR` in a real browser: the compiled binary runs a quick bench of
 * scenarios that feed the four charts (fanout, latency, tip-recovery), then headless Debian
 * chromium (playwright-core) opens DIR/index.html from the file system and sees each chart drawn
 * — an SVG with a visible size and its series' lines or bars — with no request beyond the file
 * itself and no page error.
 */
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { launchChromium } from "./fixtures/browser_chromium.ts";
import { cleanupAll, makeTempDir, runAria } from "./fixtures/e2e_server.ts";

let browser: Browser | undefined;

afterAll(async () => {
  await browser?.close();
  await cleanupAll();
});

test("the report page shows its four charts offline", async () => {
  const dir = join(makeTempDir("aria-bench-report-"), "report");
  const run = await runAria(
    [
      "bench",
      "--quick",
      "--scenario",
      "fanout,latency,tip-recovery",
      "--fsync",
      "interval",
      "--report",
      dir,
    ],
    { timeoutMs: 90_000 },
  );
  expect(run.exitCode, run.stderr).toBe(0);
  browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  page.on("pageerror", (error) => errors.push(error.message));
  const url = `file://${dir}/index.html`;
  await page.goto(url);
  const charts = await page.locator("figure[data-chart] svg").evaluateAll((svgs) =>
    svgs.map((svg) => {
      const box = svg.getBoundingClientRect();
      return {
        chart: svg.parentElement?.getAttribute("data-chart"),
        width: box.width,
        height: box.height,
        series: svg.querySelectorAll("g.series").length,
        marks: svg.querySelectorAll("g.series polyline, g.series rect, g.series circle").length,
      };
    }),
  );
  expect(charts.map((chart) => chart.chart)).toEqual([
    "readers-throughput",
    "latency-cdf",
    "first-message",
    "recovery-selectivity",
  ]);
  for (const chart of charts) {
    expect(chart.width).toBeGreaterThan(300);
    expect(chart.height).toBeGreaterThan(200);
    expect(chart.series).toBeGreaterThan(0);
    expect(chart.marks).toBeGreaterThanOrEqual(chart.series);
  }
  // The CDFs: one line per (fsync, rate) of the quick latency run, 2 rates at fsync interval.
  expect(charts[1].series).toBe(2);
  expect(await page.locator("section[data-scenario] table").count()).toBe(3);
  expect(requests).toEqual([url]);
  expect(errors).toEqual([]);
}, 120_000);
