/**
 * The real clock and scheduler the broker and store are handed (the only place that reads time).
 */
import type { Clock, Scheduler } from "../broker/ports.ts";

/** Wall-clock µs since the epoch, from the high-resolution timer anchored at process start. */
export const systemClock: Clock = {
  nowUs: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
};

/** Runs tasks after the current event, once pending I/O callbacks had their turn. */
export const systemScheduler: Scheduler = {
  soon: (task) => {
    setImmediate(task);
  },
};

/** A one-shot timer, as the store's `interval` fsync policy takes it. */
export function scheduleAfter(delayMs: number, run: () => void): void {
  setTimeout(run, delayMs);
}

/** Resolves after pending I/O callbacks had their turn. */
export function yieldToEvents(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
