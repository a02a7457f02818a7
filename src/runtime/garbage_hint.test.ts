/**
 * The garbage hint becomes a full collection once the resident set grew by the growth bytes
 * from its low since the last one, and only then.
 */
import { expect, test } from "bun:test";
import { garbageHint } from "./garbage_hint.ts";

test("a full collection once the resident set grew by the growth from its low, then the low is what it left", () => {
  let rss = 500;
  const calls: string[] = [];
  const hint = garbageHint(
    () => rss,
    (full) => {
      calls.push(full ? "full" : "hint");
      // A full collection gives back most of what was freed.
      if (full) rss = 520;
    },
    100,
  );
  hint();
  rss = 450; // the low moves down
  hint();
  rss = 549;
  hint(); // 99 over the low: a hint
  rss = 550;
  hint(); // 100 over: full, and the low is 520 from here
  rss = 600;
  hint();
  rss = 620;
  hint();
  expect(calls).toEqual(["hint", "hint", "hint", "full", "hint", "full"]);
});
