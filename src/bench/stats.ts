/**
 * stats: the arithmetic of the scenario benchmarks — percentiles of latency samples, medians of
 * repeated runs, rates. Pure: no clock, no I/O. Samples live in a growable Float64Array (a
 * latency run collects millions of them; an array of boxed numbers would dominate the heap).
 */
import { assert } from "../stdx/assert.ts";

const SAMPLES_CAPACITY_INITIAL = 64 * 1024;

/** A growable buffer of float samples (latencies in µs). */
export class Samples {
  private values: Float64Array;
  /** Samples added so far. */
  count = 0;

  /**
   * `expected`: how many samples the caller will add. A latency run sizes the buffer up front, so
   * no growth (a copy of megabytes) stalls the measuring process in the middle of its run.
   */
  constructor(expected = SAMPLES_CAPACITY_INITIAL) {
    this.values = new Float64Array(Math.max(1, expected));
  }

  /** Adds one sample. */
  add(value: number): void {
    if (this.count === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.count++] = value;
  }

  /** The samples, sorted ascending (a copy; the buffer keeps its order). */
  sorted(): Float64Array {
    return this.values.slice(0, this.count).sort();
  }
}

/** Percentiles of a set of samples; every field is NaN when there are none. */
export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

/** The nearest-rank percentile `q` (0 < q <= 1) of ascending `sorted`; NaN when empty. */
export function percentile(sorted: Float64Array, q: number): number {
  assert(q > 0 && q <= 1, "percentile: q in (0, 1]");
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** Quantiles a CDF is drawn at: 0.1%, every percent, then the tail (99.5 … 99.99%) and the max. */
export const CDF_QUANTILES: readonly number[] = [
  0.001,
  ...Array.from({ length: 99 }, (_, i) => (i + 1) / 100),
  0.995,
  0.999,
  0.9995,
  0.9999,
  1,
];

/** The CDF of ascending `sorted` at `quantiles`: [value, share of samples <= it in %]; [] if empty. */
export function cdfPoints(
  sorted: Float64Array,
  quantiles: readonly number[] = CDF_QUANTILES,
): [number, number][] {
  if (sorted.length === 0) return [];
  return quantiles.map((q) => [percentile(sorted, q), q * 100]);
}

/** Count, mean, p50, p99, p99.9 and max of `samples`. */
export function summarize(samples: Samples): Summary {
  return summarizeSorted(samples.sorted());
}

/** Count, mean, p50, p99, p99.9 and max of ascending `sorted`. */
export function summarizeSorted(sorted: Float64Array): Summary {
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i];
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    p999: percentile(sorted, 0.999),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1],
  };
}

/** The median of `values` (the mean of the two middle ones for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Events per second of `count` events in `elapsedMs`; 0 when no time passed. */
export function perSecond(count: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (count * 1000) / elapsedMs : 0;
}
