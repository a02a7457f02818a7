/**
 * `aria simulate`: runs the deterministic simulator (src/testing/simulator.ts) over a range of
 * seeds and exits 0 when every invariant held, 1 with the failing seed, step, invariant and a
 * replay command otherwise. `--inject-bug` plants a known bug at the edge of the simulated world
 * (the network drops or swaps a DATA message, the disk loses an acknowledged write, the broker
 * forgets a subscriber's send-queue limit) so anyone can
 * watch the checker catch it: with it, the command must fail.
 */
import { runtime } from "../runtime/mod.ts";
import { INJECT_BUGS, type InjectBug, replayCommand, simulate } from "../testing/simulator.ts";
import { parseCommand, parseCount, UsageError } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { progressLine } from "./progress.ts";

/** Usage of `aria simulate`. */
export const SIMULATE_USAGE = `Usage: aria simulate [--seed N] [--steps M] [--seeds K] [--inject-bug NAME] [--damage] [--verbose]

Runs the real broker, tip and store under a simulated clock, network and disk with injected
faults (crashes, torn writes, failing fsyncs, full disk, slow, stalled and vanishing clients,
floods of new topics, retention), checking
every invariant after every step. Exits 0 when all held; 1 with the seed, step and invariant
that broke, and the command that replays it. On a terminal, a progress line on stderr shows the
seed and step it is at.

Options:
  --seed N           first seed (default 1; alone, runs just that seed)
  --seeds K          seeds to run: N, N+1, ... (default 1 with --seed, else ${"20"})
  --steps M          steps per seed (default 300)
  --inject-bug NAME  plant a known bug: ${INJECT_BUGS.join(", ")} (the run must then fail)
  --damage           also damage files at rest between a crash and the restart (bit flips, cuts,
                     deleted journals, packs, segments, subtree stores, MANIFEST); a store that
                     refuses is repaired, and only the seqs the repair reports lost may be missing
  --verbose          one line per seed
  -h, --help         show this help
`;

const STEPS_DEFAULT = 300;
/** Steps between progress updates: a few a second at the simulator's speed, not one per step. */
const PROGRESS_STEPS = 25;
const SEEDS_DEFAULT = 20;

/** Runs `aria simulate`. */
export async function simulateCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    seed: { type: "string" },
    seeds: { type: "string" },
    steps: { type: "string" },
    "inject-bug": { type: "string" },
    damage: { type: "boolean" },
    verbose: { type: "boolean", short: "v" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SIMULATE_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const firstSeed = typeof values.seed === "string" ? parseCount(values.seed, "--seed") : 1;
  const seeds =
    typeof values.seeds === "string"
      ? parseCount(values.seeds, "--seeds")
      : typeof values.seed === "string"
        ? 1
        : SEEDS_DEFAULT;
  const steps =
    typeof values.steps === "string" ? parseCount(values.steps, "--steps") : STEPS_DEFAULT;
  if (seeds < 1) throw new UsageError("--seeds: run at least one seed");
  const bugText = values["inject-bug"];
  let injectBug: InjectBug | null = null;
  if (typeof bugText === "string") {
    if (!(INJECT_BUGS as readonly string[]).includes(bugText))
      throw new UsageError(`--inject-bug: "${bugText}" is not one of ${INJECT_BUGS.join(", ")}`);
    injectBug = bugText as InjectBug;
  }
  const verbose = values.verbose === true;
  const damage = values.damage === true;
  const started = runtime.clock.nowUs();
  const progress = progressLine(io, "aria simulate: ");
  let messages = 0;
  for (let seed = firstSeed; seed < firstSeed + seeds; seed++) {
    const seedIndex = seed - firstSeed + 1;
    const showStep = (step: number) => {
      if (step % PROGRESS_STEPS === 0 || step === steps) {
        progress.update(
          `seed ${seed} (${seedIndex}/${seeds}), step ${step}/${steps}, ${((runtime.clock.nowUs() - started) / 1e6).toFixed(1)} s`,
        );
      }
    };
    const result = await simulate({ seed, steps, injectBug, damage, onStep: showStep });
    progress.clear();
    messages += result.summary.messages;
    if (verbose) {
      const s = result.summary;
      io.out(
        `seed ${seed}: ${result.ok ? "ok" : "FAILED"} fsync=${s.fsync} messages=${s.messages} acked=${s.acked} delivered=${s.delivered} ` +
          `crashes=${s.crashes} disconnects=${s.disconnects} storage-failures=${s.storageFailures} failed-publishes=${s.failedPublishes} disk-ops=${s.diskOps}${damage ? ` damaged=${s.damaged} repairs=${s.repairs} seqs-lost=${s.seqsLost}` : ""} trace=${result.traceHash}\n`,
      );
    }
    const failure = result.failure;
    if (failure !== null) {
      io.err(
        `invariant ${failure.invariant} violated at step ${failure.step} (seed ${seed}): ${failure.details}\n`,
      );
      io.err(`replay: ${replayCommand(seed, failure.step, injectBug, damage)}\n`);
      return EXIT_FAILURE;
    }
  }
  const seconds = ((runtime.clock.nowUs() - started) / 1e6).toFixed(1);
  io.out(
    `simulate: ${seeds} seed${seeds === 1 ? "" : "s"} (${firstSeed}..${firstSeed + seeds - 1}) × ${steps} steps, ${messages} messages: every invariant held (${seconds} s)\n`,
  );
  return EXIT_OK;
}
