/**
 * The garbage hint becomes a full collection once the resident set grew by the growth bytes
 * from its low since the last one, or once many connections closed since then, and again 1 and 4
 * calls after (follow-ups); otherwise a hint.
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
  hint(); // its first follow-up
  state.rss = 600;
  hint();
  state.rss = 620;
  hint(); // the growth rule again, before the second follow-up
  expect(state.calls).toEqual(["hint", "hint", "hint", "full", "full", "hint", "full"]);
});

test("a full collection once many connections closed since the last, though the resident set did not grow", () => {
  const { state, hint } = fake();
  hint();
  state.closed = 9;
  hint();
  state.closed = 10; // what they held is garbage now
  hint();
  state.closed = 19;
  hint(); // the first follow-up
  hint();
  expect(state.calls).toEqual(["hint", "hint", "full", "full", "hint"]);
});

test("a full collection the rules start is followed by two more, 1 and 4 calls after, not by a chain", () => {
  const { state, hint } = fake();
  state.closed = 10;
  hint(); // the closes rule
  // What the burst freed stays resident for seconds: the follow-ups return it.
  state.rss = 590;
  for (let call = 0; call < 8; call++) hint();
  expect(state.calls).toEqual([
    "full",
    "full",
    "hint",
    "hint",
    "full",
    "hint",
    "hint",
    "hint",
    "hint",
  ]);
});
