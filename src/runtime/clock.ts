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

/** Background work runs at most this long before it lets pending I/O callbacks have their turn. */
const YIELD_AFTER_MS = 0.5;
let lastYieldMs = performance.now();

/**
 * A pause for background work, asked for every few dozen items: a promise that resolves after
 * pending I/O callbacks had their turn once YIELD_AFTER_MS passed since the last pause (of any
 * caller), else undefined (go on). Time-based, so a slice of cold, not yet compiled code is as
 * short as a slice of hot code.
 */
export function yieldToEvents(): Promise<void> | undefined {
  if (performance.now() - lastYieldMs < YIELD_AFTER_MS) return undefined;
  return new Promise((resolve) =>
    setImmediate(() => {
      lastYieldMs = performance.now();
      resolve();
    }),
  );
}
