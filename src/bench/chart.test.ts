/**
 * Tests of chart.ts: the ticks cover the data, points land where their values say (log and linear
 * axes), a point a log axis cannot show is left out, data text is escaped, and bars stand on zero
 * with their value as label.
 */
import { expect, test } from "bun:test";
import { barChart, escapeXml, formatTick, lineChart, linearTicks, logTicks } from "./chart.ts";

/** The "x,y" pairs of the polyline of series `name`. */
function polyline(svg: string, name: string): [number, number][] {
  const group = new RegExp(`<g class="series" data-series="${name}"[^>]*>([\\s\\S]*?)</g>`).exec(
    svg,
  );
  if (group === null) throw new Error(`no series ${name}`);
  const points = /<polyline[^>]* points="([^"]+)"/.exec(group[1]);
  if (points === null) return [];
  return points[1].split(" ").map((pair) => pair.split(",").map(Number) as [number, number]);
}

test("ticks: 1-2-5 steps covering a linear range; powers of ten on a log one", () => {
  expect(linearTicks(0, 97)).toEqual([0, 20, 40, 60, 80, 100]);
  expect(linearTicks(0.3, 1.7)).toEqual([0, 0.5, 1, 1.5, 2]);
  expect(linearTicks(5, 5)).toEqual([5]);
  expect(logTicks(0.04, 350)).toEqual([0.01, 0.1, 1, 10, 100, 1000]);
  expect(logTicks(10, 10)).toEqual([10, 100]);
  expect([formatTick(1_250_000), formatTick(45_000), formatTick(0.125), formatTick(0)]).toEqual([
    "1.25M",
    "45k",
    "0.125",
    "0",
  ]);
});

test("a line chart puts its points in order, where their values say, on log axes", () => {
  const svg = lineChart({
    title: "t",
    x: { label: "x", scale: "log" },
    y: { label: "y", scale: "log" },
    series: [
      {
        name: "a",
        points: [
          [100, 1000],
          [1, 10],
          [10, 100],
          [0, 5],
          [Number.NaN, 1],
        ],
      },
      { name: "b", points: [[1, 1000]] },
    ],
  });
  const a = polyline(svg, "a");
  // x = 0 and NaN cannot be drawn on a log axis: left out, not clamped to an edge.
  expect(a.length).toBe(3);
  // Sorted by x; equal steps in log10 are equal steps in pixels on both axes.
  expect(a[0][0]).toBeLessThan(a[1][0]);
  expect(a[1][0] - a[0][0]).toBeCloseTo(a[2][0] - a[1][0], 0);
  expect(a[0][1] - a[1][1]).toBeCloseTo(a[1][1] - a[2][1], 0);
  expect(a[2][1]).toBeLessThan(a[0][1]); // larger y is higher up
  expect(svg).toContain('data-series="a" data-points="3"');
  // A one-point series: a dot, no line.
  expect(polyline(svg, "b")).toEqual([]);
  expect(svg).toMatch(/data-series="b" data-points="1">\n\n<circle/);
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
});

test("a linear y axis starts at zero; text from data is escaped", () => {
  const svg = lineChart({
    title: "<p99> & co",
    x: { label: "x" },
    y: { label: "y" },
    series: [
      {
        name: 'say "hi"',
        points: [
          [1, 50],
          [2, 100],
        ],
      },
    ],
  });
  expect(svg).toContain("<title>&lt;p99&gt; &amp; co</title>");
  expect(svg).toContain('data-series="say &quot;hi&quot;"');
  expect(svg).not.toContain("<p99>");
  // y ticks 0 … 100: the first tick label is 0.
  expect(svg).toMatch(/text-anchor="end">0<\/text>/);
  expect(escapeXml(`a<b>&"c'`)).toBe("a&lt;b&gt;&amp;&quot;c&#39;");
});

test("a bar chart: bars from zero up to their value, labelled; null draws no bar", () => {
  const svg = barChart({
    title: "first message",
    y: { label: "ms", format: (v) => `${v} ms` },
    categories: ["1%", "all"],
    series: [
      { name: "tip", values: [2, 40] },
      { name: "disk", values: [10, null] },
    ],
  });
  const bars = [
    ...svg.matchAll(
      /<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="#\w+"><title>/g,
    ),
  ];
  expect(bars.length).toBe(3);
  const bottoms = bars.map((bar) => Number(bar[1]) + Number(bar[2]));
  expect(new Set(bottoms.map((b) => b.toFixed(0))).size).toBe(1); // all stand on the zero line
  const heights = bars.map((bar) => Number(bar[2]));
  expect(heights[1] / heights[0]).toBeCloseTo(20, 0); // tip: 40 vs 2
  expect(svg).toContain(">40 ms</text>");
  expect(svg).toContain("<title>disk, 1%: 10 ms</title>");
});
