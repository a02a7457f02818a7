import { expect, test } from "bun:test";
import { forEachConcurrently } from "./concurrently.ts";

test("forEachConcurrently runs every index once, at most `limit` at a time", async () => {
  let running = 0;
  let most = 0;
  const seen: number[] = [];
  await forEachConcurrently(25, 4, async (i) => {
    running++;
    most = Math.max(most, running);
    await new Promise((resolve) => setTimeout(resolve, i % 3));
    seen.push(i);
    running--;
  });
  expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i));
  expect(most).toBe(4);
});

test("forEachConcurrently throws the first failure only after every started task settled", async () => {
  let settled = 0;
  const run = forEachConcurrently(6, 3, async (i) => {
    await new Promise((resolve) => setTimeout(resolve, i === 0 ? 1 : 5));
    settled++;
    if (i === 0) throw new Error("task 0 failed");
  });
  await expect(run).rejects.toThrow("task 0 failed");
  // The failed worker stops; the other two run the rest: every task ran and settled.
  expect(settled).toBe(6);
});
