/**
 * The garbage hint becomes a full collection once the resident set grew by the growth bytes
 * from its low since the last one, or once many connections closed since then; otherwise a hint.
 */
import { expect, test } from "bun:test";
import { garbageHint } from "./garbage_hint.ts";

function fake() {
  const state = { rss: 500, closed: 0, calls: [] as string[] };
  const hint = garbageHint(
    {
      rssBytes: () => state.rss,
      connectionsClosed: () => state.closed,
      collect: (full) => {
        state.calls.push(full ? "full" : "hint");
        // A full collection gives back most of what was freed.
        if (full) state.rss = 520;
      },
    },
    { growthBytes: 100, closedConnections: 10 },
  );
  return { state, hint };
}

test("a full collection once the resident set grew by the growth from its low, then the low is what it left", () => {
  const { state, hint } = fake();
  hint();
  state.rss = 450; // the low moves down
  hint();
  state.rss = 549;
  hint(); // 99 over the low: a hint
  state.rss = 550;
  hint(); // 100 over: full, and the low is 520 from here
  state.rss = 600;
  hint();
  state.rss = 620;
  hint();
  expect(state.calls).toEqual(["hint", "hint", "hint", "full", "hint", "full"]);
});

test("a full collection once many connections closed since the last, though the resident set did not grow", () => {
  const { state, hint } = fake();
  hint();
  state.closed = 9;
  hint();
  state.closed = 10; // what they held is garbage now
  hint();
  state.closed = 19;
  hint();
  expect(state.calls).toEqual(["hint", "hint", "full", "hint"]);
});
