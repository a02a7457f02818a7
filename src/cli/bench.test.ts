import { expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  benchOptions,
  type ChartSeries,
  formatBytes,
  formatSi,
  markdownTable,
  median,
  percentile,
  REPORT_CHARTS,
  Samples,
  SCENARIOS,
  summarize,
} from "../bench/mod.ts";
import { runCli, type CliIo } from "./mod.ts";

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    out: (t: string) => {
      io.stdout += t;
    },
    err: (t: string) => {
      io.stderr += t;
    },
  };
  return io;
}

test("aria bench --quick --scenario all --json: every scenario produces numbers", async () => {
  const io = capture();
  const code = await runCli(["bench", "--quick", "--scenario", "all", "--json"], io);
  if (code !== 0) console.error(io.stderr);
  expect(code).toBe(0);
  const report = JSON.parse(io.stdout) as {
    scenarios: {
      scenario: string;
      rows: Record<string, unknown>[];
      targets: { met: boolean }[];
      series?: ChartSeries[];
    }[];
  };
  expect(report.scenarios.map((s) => s.scenario)).toEqual([...SCENARIOS]);
  const rowsOf = (name: string) => report.scenarios.find((s) => s.scenario === name)!.rows;
  const positive = (rows: Record<string, unknown>[], key: string) => {
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row[key] as number).toBeGreaterThan(0);
  };
  const publish = rowsOf("publish");
  expect(publish.length).toBe(2 * 2 * 3); // publishers × payloads × fsync policies
  positive(publish, "messagesPerSecond");
  const path = rowsOf("publish-path");
  expect(path.length).toBe(10); // nine stages and their sum
  positive(path, "cpuNsPerMessage");
  const fanout = rowsOf("fanout");
  expect(fanout.map((row) => row.subscribers)).toEqual([1, 10, 100]);
  positive(fanout, "deliveredPerSecond");
  const steadiness = rowsOf("cpu-steadiness");
  expect(steadiness.length).toBe(1);
  positive(steadiness, "windows");
  positive(steadiness, "medianShare");
  const latency = rowsOf("latency");
  expect(latency.length).toBe(4);
  positive(latency, "samples");
  positive(latency, "p99Ms");
  for (const name of ["tip-recovery", "disk-recovery"]) {
    const rows = rowsOf(name);
    expect(rows.length).toBe(4);
    positive(rows, "wallMs");
    // Both readers saw the same 1% of the stream: the subtree one only that, the other all of it.
    expect(rows[0].matching).toBe(rows[1].matching);
    expect(rows[0].delivered).toBe(rows[0].matching);
    expect(rows[1].delivered as number).toBeGreaterThan(rows[1].matching as number);
    // The selectivity rows: one topic of the subtree (a quarter of it), ten subtrees (~10x it).
    const subtree = rows[0].delivered as number;
    expect(Math.abs((rows[2].delivered as number) - subtree / 4)).toBeLessThanOrEqual(1);
    expect(Math.abs((rows[3].delivered as number) - 10 * subtree)).toBeLessThanOrEqual(10);
  }
  // Every chart of --report got a series with points from this run.
  const series = report.scenarios.flatMap((s) => s.series ?? []);
  for (const chart of REPORT_CHARTS) {
    const fed = series.filter((s) => s.chart === chart);
    expect(fed.length).toBeGreaterThan(0);
    for (const s of fed) {
      expect(s.points.length).toBeGreaterThan(0);
      for (const point of s.points) expect(point.y).toBeGreaterThan(0);
    }
  }
  // The herd: one whole-stream reader, then 10 clients (quick) that each got exactly their 1%.
  const herd = rowsOf("herd");
  expect(herd.length).toBe(2);
  positive(herd, "perSecond");
  expect(herd[1].delivered).toBe((herd[0].delivered as number) / 10);
  expect(herd[1].slowestMs as number).toBeGreaterThanOrEqual(herd[1].medianMs as number);
  expect(io.stderr).toContain("aria bench: herd: done in");
  // The recovery mix: the indexed and the linear server each delivered, and their CPU was read.
  const mix = rowsOf("recovery-mix");
  expect(mix.map((row) => row.strategy)).toEqual([
    "planned (indexed for 1%)",
    "linear pass (forced)",
  ]);
  // (A 200 ms window may end before a loaded machine completes a recovery: not counted here.)
  positive(mix, "cpuNsPerMessage");
}, 60_000);

test("aria bench --report DIR writes a self-contained page with the run's charts", async () => {
  const root = await mkdtemp(join(tmpdir(), "aria-bench-report-"));
  const dir = join(root, "new", "dir");
  try {
    const io = capture();
    const code = await runCli(
      ["bench", "--quick", "--scenario", "latency,tip-recovery", "--report", dir],
      io,
    );
    if (code !== 0) console.error(io.stderr);
    expect(code).toBe(0);
    expect(io.stderr).toContain(`report written to ${dir}/index.html`);
    const html = await readFile(join(dir, "index.html"), "utf8");
    const markdown = await readFile(join(dir, "report.md"), "utf8");
    expect(markdown).toBe(io.stdout);
    expect(JSON.parse(await readFile(join(dir, "results.json"), "utf8")).scenarios.length).toBe(2);
    // Drawn: the latency CDFs, first message and selectivity; not fed by these scenarios: readers.
    for (const chart of ["latency-cdf", "first-message", "recovery-selectivity"])
      expect(html).toContain(`<figure data-chart="${chart}"><svg`);
    expect(html).toContain('<p class="missing" data-chart="readers-throughput">');
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(html).toContain("<h2>Tip recovery over TCP");
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}, 60_000);

test("aria bench --report: a directory it cannot create fails the command", async () => {
  const io = capture();
  const code = await runCli(
    ["bench", "--quick", "--scenario", "cpu-steadiness", "--report", "/proc/aria-report"],
    io,
  );
  expect(code).toBe(1);
  expect(io.stderr).toContain("--report /proc/aria-report:");
});

test("aria bench: wrong arguments are usage errors", async () => {
  const io = capture();
  expect(await runCli(["bench", "--scenario", "nope"], io)).toBe(2);
  expect(io.stderr.split("\n")[0]).toMatchInlineSnapshot(
    `"aria bench: --scenario: "nope" is not one of publish, publish-path, fanout, cpu-steadiness, latency, tip-recovery, disk-recovery, herd, recovery-mix, all"`,
  );
  const help = capture();
  expect(await runCli(["bench", "--help"], help)).toBe(0);
  expect(help.stdout).toContain("Usage: aria bench");
});

test("bench stats and tables", () => {
  const samples = new Samples();
  for (let i = 1000; i >= 1; i--) samples.add(i);
  expect(summarize(samples)).toMatchInlineSnapshot(`
    {
      "count": 1000,
      "max": 1000,
      "mean": 500.5,
      "p50": 500,
      "p99": 990,
      "p999": 999,
    }
  `);
  expect(percentile(new Float64Array([]), 0.5)).toBeNaN();
  expect(median([3, 1, 2])).toBe(2);
  expect(median([4, 1, 2, 3])).toBe(2.5);
  expect([
    formatSi(1_234_567),
    formatSi(45_600),
    formatSi(999),
    formatBytes(256 * 1024 * 1024),
  ]).toEqual(["1.23 M", "46 k", "999", "256 MiB"]);
  expect(
    markdownTable(
      [
        { key: "name", header: "name" },
        { key: "rate", header: "msg/s", format: formatSi },
      ],
      [
        { name: "a", rate: 1e6 },
        { name: "bb", rate: null },
      ],
    ),
  ).toMatchInlineSnapshot(`
      "| name |  msg/s |
      | ---- | -----: |
      | a    | 1.00 M |
      | bb   |      - |
      "
    `);
  expect(benchOptions({ quick: true }).durationMs).toBeLessThan(benchOptions().durationMs);
});
