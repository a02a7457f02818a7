/**
 * Event-loop lag: how long the event loop was kept from running a timer, measured as the
 * lateness of a short repeating timer. Any pause the server causes (a long loop, a huge copy,
 * a collection of a large heap) delays every client by as much, so this is the pause as the
 * server's clients feel it.
 *
 * It keeps the largest lateness of two rotating windows, so `maxSeconds()` covers the last one
 * to two windows without being reset by whoever reads it (/metrics and /api/stats both read).
 * With `logAboveMs`, every lateness above it is written to stderr with its wall-clock time
 * (`ARIA_DEBUG_EVENT_LOOP_LAG_MS`: a benchmark attributes pauses to its phases by time).
 *
 * Not here: what caused a pause. Runtime only: it reads the clock and sets a timer.
 */

/** Watches the event loop's lateness; stop() clears its timer. */
export interface EventLoopLag {
  /** The largest lateness (s) seen in the last one to two windows. */
  maxSeconds(): number;
  stop(): void;
}

/** Options of watchEventLoopLag. */
export interface EventLoopLagOptions {
  /** Timer period (ms): a pause shorter than this may go unseen. */
  intervalMs?: number;
  /** Length of one window (ms). */
  windowMs?: number;
  /** Writes each lateness above this many ms to `log` (default: ARIA_DEBUG_EVENT_LOOP_LAG_MS). */
  logAboveMs?: number;
  log?: (line: string) => void;
}

/** Starts a repeating timer that measures its own lateness. */
export function watchEventLoopLag(options: EventLoopLagOptions = {}): EventLoopLag {
  const intervalMs = options.intervalMs ?? 10;
  const windowMs = options.windowMs ?? 30_000;
  const logAboveMs = options.logAboveMs ?? debugLogAboveMs();
  let windowStartMs = performance.now();
  let currentMaxMs = 0;
  let previousMaxMs = 0;
  let expectedMs = performance.now() + intervalMs;
  const timer = setInterval(() => {
    const nowMs = performance.now();
    const lateMs = Math.max(0, nowMs - expectedMs);
    expectedMs = nowMs + intervalMs;
    if (nowMs - windowStartMs >= windowMs) {
      previousMaxMs = currentMaxMs;
      currentMaxMs = 0;
      windowStartMs = nowMs;
    }
    currentMaxMs = Math.max(currentMaxMs, lateMs);
    if (logAboveMs !== undefined && lateMs > logAboveMs)
      options.log?.(
        `aria: event loop paused ${lateMs.toFixed(1)} ms at ${Math.round(performance.timeOrigin + nowMs)}\n`,
      );
  }, intervalMs);
  // A watcher must not keep the process alive on its own.
  (timer as { unref?: () => void }).unref?.();
  return {
    maxSeconds: () => Math.max(currentMaxMs, previousMaxMs) / 1000,
    stop: () => clearInterval(timer),
  };
}

/** ARIA_DEBUG_EVENT_LOOP_LAG_MS as a number of ms, or undefined when unset. */
function debugLogAboveMs(): number | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process
    ?.env;
  const text = env?.ARIA_DEBUG_EVENT_LOOP_LAG_MS;
  if (text === undefined || text === "") return undefined;
  const ms = Number(text);
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}
