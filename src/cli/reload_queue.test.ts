import { expect, test } from "bun:test";
import { ReloadQueue } from "./serve.ts";

test("reloads: none before start (one asked earlier runs then), one at a time, asks while one runs fold into one more", async () => {
  const queue = new ReloadQueue();
  const runs: string[] = [];
  let finish = () => {};
  queue.ask();
  queue.ask();
  expect(runs).toEqual([]);
  queue.start(
    () =>
      new Promise<void>((resolve) => {
        runs.push("run");
        finish = resolve;
      }),
  );
  expect(runs).toEqual(["run"]);
  for (let i = 0; i < 30; i++) queue.ask();
  expect(runs).toEqual(["run"]);
  finish();
  await Bun.sleep(1);
  expect(runs).toEqual(["run", "run"]);
  finish();
  await Bun.sleep(1);
  expect(runs).toEqual(["run", "run"]);
  // A reload that throws does not stop later ones.
  const failing = new ReloadQueue();
  let calls = 0;
  failing.start(async () => {
    calls++;
    throw new Error("broken");
  });
  failing.ask();
  await Bun.sleep(1);
  failing.ask();
  await Bun.sleep(1);
  expect(calls).toBe(2);
});
