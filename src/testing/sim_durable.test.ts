/**
 * The simulator with a durable consumer riding along (SimulationOptions.durable): through
 * acknowledgements, hang-ups, kills, power losses and retention, each of its subscriptions starts
 * neither past what it received (no gap) nor before its written position (no regression), and it
 * receives every seq that is not gone. More seeds: DURABLE_SEEDS.
 */
import { expect, test } from "bun:test";
import { simulate } from "./simulator.ts";

const SEEDS = Number(process.env.DURABLE_SEEDS ?? 3);
const STEPS = 120;

test(`${SEEDS} seeds × ${STEPS} steps with a durable consumer: every invariant holds`, async () => {
  for (let seed = 1; seed <= SEEDS; seed++) {
    const result = await simulate({ seed, steps: STEPS, durable: true });
    const failure = result.failure;
    expect(
      failure === null
        ? "ok"
        : `seed ${seed} step ${failure.step}: ${failure.invariant}: ${failure.details}`,
    ).toBe("ok");
  }
}, 60_000);

test("a run with a durable consumer replays byte for byte", async () => {
  const first = await simulate({ seed: 5, steps: 80, durable: true });
  const second = await simulate({ seed: 5, steps: 80, durable: true });
  expect(second.traceHash).toBe(first.traceHash);
  expect(first.ok).toBe(true);
});
