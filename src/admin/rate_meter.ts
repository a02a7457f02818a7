/**
 * RateMeter: publish rates from samples of two monotonic counters (messages, bytes), taken when
 * someone asks (a poll of /api/stats or a scrape of /metrics). The rate is measured over the
 * samples of the last `windowUs`, so several pollers see the same smooth figure instead of
 * resetting each other's baseline. Pure: times come in as arguments.
 *
 * Invariants: samples are in time order; at most `samplesMax` are kept (a sample is added only
 * when the newest is at least windowUs / (samplesMax - 1) old), so memory is bounded whatever the
 * poll rate and the kept samples still span the window.
 */
import { assert } from "../stdx/assert.ts";

/** A rate, or null while fewer than two samples span a positive time. */
export interface Rates {
  messagesPerSecond: number | null;
  bytesPerSecond: number | null;
  /** The time the rates are measured over. */
  windowSeconds: number;
}

/** Rates of two counters over a sliding window of samples. */
export class RateMeter {
  private readonly timesUs: Float64Array;
  private readonly messages: Float64Array;
  private readonly bytes: Float64Array;
  /** Index of the oldest kept sample and how many are kept (a ring of samplesMax). */
  private oldest = 0;
  private count = 0;

  constructor(
    private readonly windowUs: number,
    private readonly samplesMax: number,
  ) {
    assert(windowUs > 0 && samplesMax >= 2, "RateMeter: a window and room for two samples");
    this.timesUs = new Float64Array(samplesMax);
    this.messages = new Float64Array(samplesMax);
    this.bytes = new Float64Array(samplesMax);
  }

  /** Records the counters at `nowUs` and returns the rates over the window ending now. */
  sample(nowUs: number, messages: number, bytes: number): Rates {
    // Drop samples that left the window, keeping one at or before its start as the baseline.
    while (
      this.count > 1 &&
      this.timesUs[(this.oldest + 1) % this.samplesMax] <= nowUs - this.windowUs
    )
      this.drop();
    const newest = (this.oldest + this.count - 1) % this.samplesMax;
    // samplesMax samples this far apart span the whole window.
    const spacingUs = this.windowUs / (this.samplesMax - 1);
    if (this.count === 0 || nowUs - this.timesUs[newest] >= spacingUs) {
      if (this.count === this.samplesMax) this.drop();
      const at = (this.oldest + this.count) % this.samplesMax;
      this.timesUs[at] = nowUs;
      this.messages[at] = messages;
      this.bytes[at] = bytes;
      this.count++;
    }
    const base = this.oldest;
    const elapsedUs = nowUs - this.timesUs[base];
    if (elapsedUs <= 0) return { messagesPerSecond: null, bytesPerSecond: null, windowSeconds: 0 };
    const seconds = elapsedUs / 1e6;
    return {
      messagesPerSecond: Math.max(0, (messages - this.messages[base]) / seconds),
      bytesPerSecond: Math.max(0, (bytes - this.bytes[base]) / seconds),
      windowSeconds: seconds,
    };
  }

  private drop(): void {
    this.oldest = (this.oldest + 1) % this.samplesMax;
    this.count--;
  }
}
