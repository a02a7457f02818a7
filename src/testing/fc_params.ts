/**
 * fcParams: the one place property tests take their fast-check settings from. CI runs a fixed
 * seed and a modest number of runs; `FC_SEED` and `FC_RUNS` change both, so a failure printed
 * with its seed replays with `FC_SEED=<seed> bun test <file>` and a long hunt is one variable away.
 */
const SEED_DEFAULT = 0x41524941; // "ARIA"
const RUNS_DEFAULT = 100;

/** fast-check parameters: fixed seed unless FC_SEED is set, runs from FC_RUNS. */
export function fcParams(options: { runs?: number } = {}): {
  seed: number;
  numRuns: number;
  verbose: number;
} {
  const env = typeof process === "undefined" ? {} : process.env;
  const seed = env.FC_SEED === undefined ? SEED_DEFAULT : Number(env.FC_SEED);
  const scale = env.FC_RUNS === undefined ? 1 : Number(env.FC_RUNS) / RUNS_DEFAULT;
  return {
    seed,
    numRuns: Math.max(1, Math.round((options.runs ?? RUNS_DEFAULT) * scale)),
    verbose: 1,
  };
}
