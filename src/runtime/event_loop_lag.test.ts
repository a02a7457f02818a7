import { expect, test } from "bun:test";
import { watchEventLoopLag } from "./event_loop_lag.ts";

test("a pause of the event loop shows as the timer's lateness, and is logged above the threshold", async () => {
  const lines: string[] = [];
  const lag = watchEventLoopLag({ intervalMs: 5, logAboveMs: 60, log: (line) => lines.push(line) });
  try {
    await Bun.sleep(30);
    expect(lag.maxSeconds()).toBeLessThan(0.06);
    const until = performance.now() + 120;
    while (performance.now() < until) {
      // a handler that holds the event loop
    }
    await Bun.sleep(30);
    expect(lag.maxSeconds()).toBeGreaterThanOrEqual(0.1);
    expect(lines.length).toBe(1);
    expect(lines[0]).toMatch(/^aria: event loop paused 1\d\d\.\d ms at \d+\n$/);
  } finally {
    lag.stop();
  }
});
