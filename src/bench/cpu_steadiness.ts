/**
 * cpu_steadiness: how steadily this machine gives a thread its CPU, at the time scale of a
 * latency target. One thread spins on a fixed piece of integer work and counts how much of it
 * each WINDOW_MS window of wall time held; a window well below the best one is time the thread
 * was runnable but did not run at full speed (another process on its core, or — when nothing
 * else runs — the hypervisor taking the virtual CPU away). A p99 of 2 ms needs fewer than 1% of
 * messages delayed past 2 ms, so a machine that stalls for tens of milliseconds every second or
 * two cannot meet it whatever the server does. Run it with nothing else busy.
 *
 * Pure: the clock comes in as a function; the analysis is a function of the window counts.
 */

/** Wall time of one window (ms). */
export const WINDOW_MS = 10;
/** LCG steps between two clock reads: a few microseconds of work, so the clock costs little. */
const SPIN_STEPS = 2000;
/** A window holding less than this share of the best window's work is "slow". */
export const SLOW_SHARE = 0.5;

/** What the spin saw. */
export interface Steadiness {
  windows: number;
  /** Work of the median and 1st-percentile windows, as shares of the best window's. */
  medianShare: number;
  p1Share: number;
  /** Shares of windows below SLOW_SHARE and below 0.8 of the best. */
  slowShare: number;
  below80Share: number;
  /** Maximal runs of consecutive slow windows, per second of spinning, and the longest (ms). */
  stallsPerSecond: number;
  longestStallMs: number;
}

let sink = 1;

/** Spins for `durationMs` on this thread (blocking it); the work done in each window. */
export function spinWindows(
  nowMs: () => number,
  durationMs: number,
  windowMs = WINDOW_MS,
): Float64Array {
  const work = new Float64Array(Math.max(1, Math.floor(durationMs / windowMs)));
  const start = nowMs();
  let x = sink;
  for (;;) {
    const window = Math.floor((nowMs() - start) / windowMs);
    if (window >= work.length) break;
    for (let i = 0; i < SPIN_STEPS; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
    work[window]++;
  }
  sink = x;
  return work;
}

/** The steadiness of `work` (units of work per window of `windowMs`). */
export function steadiness(work: Float64Array, windowMs = WINDOW_MS): Steadiness {
  const windows = work.length;
  const sorted = Float64Array.from(work).sort();
  const best = windows === 0 ? 0 : sorted[windows - 1];
  const share = (value: number) => (best > 0 ? value / best : 0);
  let slow = 0;
  let below80 = 0;
  let stalls = 0;
  let run = 0;
  let longest = 0;
  for (let i = 0; i < windows; i++) {
    if (work[i] < 0.8 * best) below80++;
    if (work[i] < SLOW_SHARE * best) {
      slow++;
      if (run === 0) stalls++;
      run++;
      if (run > longest) longest = run;
    } else {
      run = 0;
    }
  }
  const seconds = (windows * windowMs) / 1000;
  return {
    windows,
    medianShare: windows === 0 ? 0 : share(sorted[Math.floor(windows / 2)]),
    p1Share: windows === 0 ? 0 : share(sorted[Math.floor(windows / 100)]),
    slowShare: windows === 0 ? 0 : slow / windows,
    below80Share: windows === 0 ? 0 : below80 / windows,
    stallsPerSecond: seconds > 0 ? stalls / seconds : 0,
    longestStallMs: longest * windowMs,
  };
}
