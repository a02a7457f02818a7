import { expect, test } from "bun:test";
import { type CliIo, runCli } from "./mod.ts";

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    out: (t: string) => {
      io.stdout += t;
    },
    err: (t: string) => {
      io.stderr += t;
    },
  };
  return io;
}

test("aria simulate: exit 0 when every invariant held, with a summary line", async () => {
  const io = capture();
  expect(
    await runCli(["simulate", "--seed", "3", "--seeds", "2", "--steps", "80", "--verbose"], io),
  ).toBe(0);
  const lines = io.stdout.trim().split("\n");
  expect(lines.length).toBe(3);
  expect(lines[0]).toMatch(/^seed 3: ok fsync=\w+ messages=\d+ .* trace=[0-9a-f]{16}$/);
  expect(lines[2]).toMatch(
    /^simulate: 2 seeds \(3\.\.4\) × 80 steps, \d+ messages: every invariant held/,
  );
  expect(io.stderr).toBe("");
});

for (const bug of ["drop-one", "reorder", "lose-acked", "stalled-unbounded"]) {
  test(`aria simulate --inject-bug ${bug}: the checker catches it, exit 1 with seed, step and replay`, async () => {
    const io = capture();
    expect(await runCli(["simulate", "--seeds", "5", "--inject-bug", bug], io)).toBe(1);
    const [violation, replay] = io.stderr.trim().split("\n");
    expect(violation).toMatch(/^invariant [a-z-]+ violated at step \d+ \(seed \d+\): /);
    const [, step, seed] = /at step (\d+) \(seed (\d+)\)/.exec(violation)!;
    expect(replay).toBe(`replay: aria simulate --seed ${seed} --steps ${step} --inject-bug ${bug}`);
    // The replay command fails the same way.
    const again = capture();
    expect(await runCli(replay.slice("replay: aria ".length).split(" "), again)).toBe(1);
    expect(again.stderr.split("\n")[0]).toBe(violation);
  }, 60_000);
}

test("aria simulate: bad arguments are usage errors (exit 2)", async () => {
  const io = capture();
  expect(await runCli(["simulate", "--inject-bug", "nope"], io)).toBe(2);
  expect(io.stderr.split("\n")[0]).toBe(
    `aria simulate: --inject-bug: "nope" is not one of drop-one, reorder, lose-acked, stalled-unbounded`,
  );
  expect(await runCli(["simulate", "--steps", "x"], capture())).toBe(2);
});

test("aria simulate on a terminal: a progress line on stderr, rewritten in place and cleared before the summary", async () => {
  const out = Object.assign(capture(), { errIsTerminal: () => true });
  expect(await runCli(["simulate", "--seed", "3", "--seeds", "2", "--steps", "60"], out)).toBe(0);
  const updates = out.stderr
    .split("\r\x1b[K")
    .filter((part) => part !== "")
    .map((update) => update.replace(/, \d+\.\d s$/, ", T s"));
  expect(updates).toEqual([
    "aria simulate: seed 3 (1/2), step 25/60, T s",
    "aria simulate: seed 3 (1/2), step 50/60, T s",
    "aria simulate: seed 3 (1/2), step 60/60, T s",
    "aria simulate: seed 4 (2/2), step 25/60, T s",
    "aria simulate: seed 4 (2/2), step 50/60, T s",
    "aria simulate: seed 4 (2/2), step 60/60, T s",
  ]);
  expect(out.stderr.endsWith("\r\x1b[K")).toBe(true);
  expect(out.stdout).toMatch(/^simulate: 2 seeds \(3\.\.4\) × 60 steps/);
  // Not a terminal: nothing on stderr.
  const plain = capture();
  expect(await runCli(["simulate", "--seed", "3", "--steps", "60"], plain)).toBe(0);
  expect(plain.stderr).toBe("");
});
