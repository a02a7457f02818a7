/**
 * Histogram: counts of observations in fixed, increasing bucket bounds (Prometheus style:
 * bucket i counts observations <= bounds[i]; the last, implicit bucket is +Inf), plus their sum
 * and count. Typed arrays, no allocation per observation.
 */
import { assert } from "./assert.ts";

/** A fixed-bucket histogram. */
export class Histogram {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++)
      assert(bounds[i] > bounds[i - 1], "Histogram: bounds increase");
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Records one observation. */
  observe(value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }

  /** Cumulative counts per bound (the Prometheus `le` series), ending with +Inf. */
  cumulative(): number[] {
    const out: number[] = [];
    let total = 0;
    for (let i = 0; i < this.counts.length; i++) out.push((total += this.counts[i]));
    return out;
  }
}
