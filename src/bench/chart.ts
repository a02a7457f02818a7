/**
 * chart: draws the charts of `aria bench --report` as inline SVG strings — line charts (linear or
 * log axes; latency CDFs, rates by readers, times by selectivity) and grouped bar charts. Pure:
 * data in, markup out; nothing fetched, no script, so a saved page renders offline.
 *
 * Not here: which figures go on which chart (report.ts). Invariants: every text that came from
 * data is XML-escaped; a point that cannot be drawn (NaN, or <= 0 on a log axis) is left out, not
 * drawn at an edge; every series is one <g data-series="…"> holding its marks.
 */

/** One axis: its label, linear or log scale, and how its tick values print. */
export interface Axis {
  label: string;
  scale?: "linear" | "log";
  format?: (value: number) => string;
}

/** A line chart: series of (x, y) points joined in x order. */
export interface LineChart {
  title: string;
  x: Axis;
  y: Axis;
  series: { name: string; points: readonly (readonly [number, number])[] }[];
}

/** A bar chart: one group of bars per category, one bar per series (null: none). */
export interface BarChart {
  title: string;
  y: Axis;
  categories: readonly string[];
  series: { name: string; values: readonly (number | null)[] }[];
  /** How the label over each bar prints its value (default: as the y ticks). */
  valueFormat?: (value: number) => string;
}

const WIDTH = 720;
/** Height of the chart above its legend (one line per series below it). */
const HEIGHT = 360;
const LEGEND_LINE = 18;
const PLOT_LEFT = 72;
const PLOT_RIGHT = WIDTH - 24;
const PLOT_TOP = 40;
const PLOT_BOTTOM = HEIGHT - 56;
/** Series colours, in order (enough for the report's charts; they repeat past it). */
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"];
/** Series with at most this many points get a dot on each. */
const DOTS_POINTS_MAX = 24;

/** `text` safe inside SVG/HTML text and attribute values. */
export function escapeXml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** A short tick label: 3 significant digits, k/M/G above 10^4. */
export function formatTick(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1e9) return `${trim(value / 1e9)}G`;
  if (magnitude >= 1e6) return `${trim(value / 1e6)}M`;
  if (magnitude >= 1e4) return `${trim(value / 1e3)}k`;
  return trim(value);
}

function trim(value: number): string {
  if (value === 0) return "0";
  return Number(value.toPrecision(3)).toString();
}

/** Tick values of a linear axis covering [low, high]: steps of 1, 2 or 5 times a power of 10. */
export function linearTicks(low: number, high: number, count = 5): number[] {
  if (!(high > low)) return [low];
  const rough = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  const first = Math.floor(low / step + 1e-9);
  const last = Math.ceil(high / step - 1e-9);
  const ticks: number[] = [];
  for (let k = first; k <= last; k++) ticks.push(Number((k * step).toPrecision(12)));
  return ticks;
}

/** Tick values of a log axis covering [low, high] (both > 0): the powers of 10 around them. */
export function logTicks(low: number, high: number): number[] {
  const from = Math.floor(Math.log10(low));
  const to = Math.max(from + 1, Math.ceil(Math.log10(high)));
  const ticks: number[] = [];
  for (let e = from; e <= to; e++) ticks.push(Number((10 ** e).toPrecision(12)));
  return ticks;
}

/** Maps data values onto pixels along one axis. */
interface Scale {
  ticks: number[];
  at(value: number): number;
  drawable(value: number): boolean;
}

function scaleOf(axis: Axis, values: number[], from: number, to: number, zero: boolean): Scale {
  const log = axis.scale === "log";
  const usable = values.filter((v) => Number.isFinite(v) && (!log || v > 0));
  if (log) {
    const ticks =
      usable.length === 0 ? [1, 10] : logTicks(Math.min(...usable), Math.max(...usable));
    const low = Math.log10(ticks[0]);
    const span = Math.log10(ticks[ticks.length - 1]) - low;
    return {
      ticks,
      at: (v) => from + ((Math.log10(v) - low) / span) * (to - from),
      drawable: (v) => Number.isFinite(v) && v > 0,
    };
  }
  let low = usable.length === 0 ? 0 : Math.min(...usable);
  let high = usable.length === 0 ? 1 : Math.max(...usable);
  if (zero) low = Math.min(0, low);
  if (high === low) high = low + 1;
  const ticks = linearTicks(low, high);
  low = Math.min(low, ticks[0]);
  high = Math.max(high, ticks[ticks.length - 1]);
  return {
    ticks,
    at: (v) => from + ((v - low) / (high - low)) * (to - from),
    drawable: (v) => Number.isFinite(v),
  };
}

const px = (value: number) => value.toFixed(1);

function frame(title: string, body: string[], legend: string[]): string {
  const label = escapeXml(title);
  const height = HEIGHT + legend.length * LEGEND_LINE;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" role="img" aria-label="${label}" font-family="sans-serif" font-size="12">`,
    `<title>${label}</title>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${label}</text>`,
    ...body,
    ...legend.map(
      (name, i) =>
        `<g class="legend"><rect x="${PLOT_LEFT}" y="${HEIGHT - 4 + i * LEGEND_LINE}" width="12" height="12" fill="${colour(i)}"/><text x="${PLOT_LEFT + 18}" y="${HEIGHT + 6 + i * LEGEND_LINE}">${escapeXml(name)}</text></g>`,
    ),
    "</svg>",
  ].join("\n");
}

function colour(i: number): string {
  return COLOURS[i % COLOURS.length];
}

function axes(x: Axis, y: Axis, xs: Scale | null, ys: Scale): string[] {
  const out: string[] = [];
  const yFormat = y.format ?? formatTick;
  for (const tick of ys.ticks) {
    const at = px(ys.at(tick));
    out.push(
      `<line class="grid" x1="${PLOT_LEFT}" x2="${PLOT_RIGHT}" y1="${at}" y2="${at}" stroke="#ddd"/>`,
      `<text x="${PLOT_LEFT - 6}" y="${at}" dy="4" text-anchor="end">${escapeXml(yFormat(tick))}</text>`,
    );
  }
  if (xs !== null) {
    const xFormat = x.format ?? formatTick;
    for (const tick of xs.ticks) {
      const at = px(xs.at(tick));
      out.push(
        `<line class="grid" x1="${at}" x2="${at}" y1="${PLOT_TOP}" y2="${PLOT_BOTTOM}" stroke="#eee"/>`,
        `<text x="${at}" y="${PLOT_BOTTOM + 16}" text-anchor="middle">${escapeXml(xFormat(tick))}</text>`,
      );
    }
  }
  out.push(
    `<line x1="${PLOT_LEFT}" x2="${PLOT_RIGHT}" y1="${PLOT_BOTTOM}" y2="${PLOT_BOTTOM}" stroke="#333"/>`,
    `<line x1="${PLOT_LEFT}" x2="${PLOT_LEFT}" y1="${PLOT_TOP}" y2="${PLOT_BOTTOM}" stroke="#333"/>`,
    `<text x="${(PLOT_LEFT + PLOT_RIGHT) / 2}" y="${PLOT_BOTTOM + 36}" text-anchor="middle">${escapeXml(x.label)}</text>`,
    `<text transform="translate(16 ${(PLOT_TOP + PLOT_BOTTOM) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(y.label)}</text>`,
  );
  return out;
}

/** A line chart as an SVG element (a string). */
export function lineChart(chart: LineChart): string {
  const xs = scaleOf(
    chart.x,
    chart.series.flatMap((s) => s.points.map((p) => p[0])),
    PLOT_LEFT,
    PLOT_RIGHT,
    false,
  );
  const ys = scaleOf(
    chart.y,
    chart.series.flatMap((s) => s.points.map((p) => p[1])),
    PLOT_BOTTOM,
    PLOT_TOP,
    chart.y.scale !== "log",
  );
  const body = axes(chart.x, chart.y, xs, ys);
  chart.series.forEach((series, i) => {
    const points = series.points
      .filter(([x, y]) => xs.drawable(x) && ys.drawable(y))
      .toSorted((a, b) => a[0] - b[0]);
    const marks = points.map(([x, y]) => `${px(xs.at(x))},${px(ys.at(y))}`);
    const dots =
      points.length > DOTS_POINTS_MAX
        ? []
        : marks.map((mark) => {
            const [cx, cy] = mark.split(",");
            return `<circle cx="${cx}" cy="${cy}" r="3.5" fill="${colour(i)}"/>`;
          });
    body.push(
      `<g class="series" data-series="${escapeXml(series.name)}" data-points="${points.length}">`,
      points.length > 1
        ? `<polyline fill="none" stroke="${colour(i)}" stroke-width="2" points="${marks.join(" ")}"/>`
        : "",
      ...dots,
      "</g>",
    );
  });
  return frame(
    chart.title,
    body,
    chart.series.map((series) => series.name),
  );
}

/** A grouped bar chart as an SVG element (a string); each bar is labelled with its value. */
export function barChart(chart: BarChart): string {
  const values = chart.series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const ys = scaleOf(chart.y, values, PLOT_BOTTOM, PLOT_TOP, chart.y.scale !== "log");
  const body = axes({ label: "" }, chart.y, null, ys);
  const groupWidth = (PLOT_RIGHT - PLOT_LEFT) / Math.max(1, chart.categories.length);
  const barWidth = (groupWidth * 0.8) / Math.max(1, chart.series.length);
  const format = chart.valueFormat ?? chart.y.format ?? formatTick;
  const base = chart.y.scale === "log" ? PLOT_BOTTOM : ys.at(Math.max(0, ys.ticks[0]));
  chart.categories.forEach((category, c) => {
    const centre = PLOT_LEFT + groupWidth * (c + 0.5);
    body.push(
      `<text x="${px(centre)}" y="${PLOT_BOTTOM + 16}" text-anchor="middle">${escapeXml(category)}</text>`,
    );
  });
  chart.series.forEach((series, i) => {
    body.push(`<g class="series" data-series="${escapeXml(series.name)}">`);
    series.values.forEach((value, c) => {
      if (value === null || !ys.drawable(value) || c >= chart.categories.length) return;
      const left = PLOT_LEFT + groupWidth * c + groupWidth * 0.1 + barWidth * i;
      const top = ys.at(value);
      body.push(
        `<rect x="${px(left)}" y="${px(Math.min(top, base))}" width="${px(barWidth * 0.92)}" height="${px(Math.abs(base - top))}" fill="${colour(i)}"><title>${escapeXml(`${series.name}, ${chart.categories[c]}: ${format(value)}`)}</title></rect>`,
        `<text x="${px(left + barWidth * 0.46)}" y="${px(Math.min(top, base) - 4)}" text-anchor="middle" font-size="10">${escapeXml(format(value))}</text>`,
      );
    });
    body.push("</g>");
  });
  return frame(
    chart.title,
    body,
    chart.series.map((series) => series.name),
  );
}
