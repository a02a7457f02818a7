/** RateMeter against hand-computed rates: the window, bounded samples, a clock that stands still or steps back. */
import { expect, test } from "bun:test";
import { RateMeter } from "./rate_meter.ts";

test("rates over the samples of the last window, whatever the poll rate", () => {
  const meter = new RateMeter(4_000_000, 8);
  expect(meter.sample(0, 0, 0)).toEqual({
    messagesPerSecond: null,
    bytesPerSecond: null,
    windowSeconds: 0,
  });
  // Polled every 100 ms at 10 msg/s: a sample is kept every 600 ms (4 s / 7, rounded up to a poll).
  let messages = 0;
  let rates = meter.sample(0, 0, 0);
  for (let step = 1; step <= 100; step++) {
    messages += 1;
    rates = meter.sample(step * 100_000, messages, messages * 10);
  }
  expect(rates.messagesPerSecond).toBeCloseTo(10, 9);
  expect(rates.bytesPerSecond).toBeCloseTo(100, 9);
  expect(rates.windowSeconds).toBeGreaterThanOrEqual(4);
  expect(rates.windowSeconds).toBeLessThanOrEqual(4.8);
  // The publisher stops while the poller goes on: once a window has passed the rate is 0.
  for (let step = 101; step <= 130; step++)
    rates = meter.sample(step * 100_000, messages, messages * 10);
  expect(rates.messagesPerSecond).toBeGreaterThan(0);
  for (let step = 131; step <= 160; step++)
    rates = meter.sample(step * 100_000, messages, messages * 10);
  expect(rates.messagesPerSecond).toBe(0);
});

test("a clock that stands still or steps back gives no rate instead of a wrong one", () => {
  const meter = new RateMeter(1_000_000, 4);
  meter.sample(5_000_000, 10, 100);
  expect(meter.sample(5_000_000, 20, 200).messagesPerSecond).toBeNull();
  expect(meter.sample(4_000_000, 30, 300).messagesPerSecond).toBeNull();
});
