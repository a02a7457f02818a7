/**
 * `aria bench`: scenario benchmarks of a running server — publish throughput, fan-out, latency,
 * tip recovery, initial recovery from disk (src/bench/scenarios.ts). By default it starts each
 * server in this process on 127.0.0.1 with a fresh temporary data directory, removed afterwards;
 * with --url it benchmarks a server that is already running. A progress line goes to stderr
 * (rewritten in place on a terminal, one line per scenario otherwise), the results to stdout as
 * markdown tables, or as JSON with --json.
 *
 * The scenarios get the process (temp directories, /proc/self/io, `dd` to evict files from the
 * page cache, clocks, servers) as a BenchEnv built by src/server/bench_env.ts; this file parses
 * the command, runs the scenarios and prints.
 */
import {
  benchOptions,
  type BenchOverrides,
  markdownTable,
  reportHtml,
  runScenario,
  type ScenarioName,
  type ScenarioResult,
  SCENARIOS,
} from "../bench/mod.ts";
import { benchEnv, defaultParentDir, type MachineInfo, machineInfo } from "../server/mod.ts";
import { runtime, writeTextFileAtomic } from "../runtime/mod.ts";
import type { FsyncPolicy } from "../store/mod.ts";
import {
  authTokenOf,
  CLIENT_AUTH_FLAGS,
  clientAuthUsage,
  clientUrlOf,
  parseCommand,
  parseCount,
  parseDuration,
  parseSize,
  stringFlag,
  UsageError,
} from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { progressLine } from "./progress.ts";
import { CLIENT_TLS_FLAGS, clientTlsOf, clientTlsUsage } from "./tls_files.ts";

/** Usage of `aria bench`. */
export const BENCH_USAGE = `Usage: aria bench [options]

Runs scenario benchmarks against an Aria server: by default servers it starts in this process
on 127.0.0.1 (a fresh temporary data directory each, removed afterwards), or --url's.

Scenarios (in this order for all):
  publish        acknowledged msg/s: 1 and 8 publishers, 64 B and 1 KiB, each fsync policy
  publish-path   CPU per published message by stage (client, decode, tip, broker, store)
  fanout         delivered msg/s to 1, 10 and 100 live subscribers of **
  cpu-steadiness how steadily this machine runs a spinning thread, per 10 ms (stalls)
  latency        publish->deliver p50/p99/p99.9 at fixed rates, 10 subscribers
  tip-recovery   1% subtree replayed from the tip vs a full-stream reader filtering it
  disk-recovery  1% subtree replayed from disk after a restart, page cache dropped
  herd           --readers clients at once, each replaying its own 1% subtree from disk
  recovery-mix   CPU per delivered message, 10% of --readers recovering a 1% subtree from the
                 tip again and again, the rest live: indexed tip reads vs the linear pass

Options:
  --scenario NAME|all    a scenario, a comma-separated list, or all (default all)
  --duration DURATION    measured time of each throughput or latency run (default 3s)
  --messages N           messages of the disk-recovery and herd stream (default 2000000)
  --readers N            clients of the herd and recovery-mix scenarios (default 100)
  --repeat N             runs of each measured cell; tables show medians (default 3)
  --window N             publishes a throughput publisher keeps unacknowledged (default 32768)
  --batch N              messages per publishBatch call of that publisher (default 8192)
  --tip-bytes SIZE       tip of the tip-recovery server, filled to 90% (default 256MiB)
  --publishers LIST      publisher counts of publish, comma-separated (default 1,8)
  --payload LIST         payload bytes of publish, comma-separated (default 64,1024)
  --fsync LIST           fsync policies of publish and latency, comma-separated
                         (default always,interval,never for publish; interval,always for latency)
  --quick                small sizes and short runs: a smoke test in seconds
  --json                 print the results as JSON instead of markdown tables
  --report DIR           also write DIR/index.html (charts and tables, one self-contained
                         page), DIR/report.md (the tables) and DIR/results.json
  --url URL              benchmark this running server (its own fsync policy and tip size:
                         pass its --tip-bytes; disk-recovery needs a tip much smaller than
                         --messages of 256 B); tls://HOST:PORT for TLS (default: ARIA_URL)
${clientAuthUsage(25)}${clientTlsUsage(25)}  --data-dir DIR         parent of the temporary data directories (default: the OS temp dir)
  -h, --help             show this help
`;

/** Runs `aria bench`. */
export async function benchCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    scenario: { type: "string" },
    duration: { type: "string" },
    messages: { type: "string" },
    readers: { type: "string" },
    repeat: { type: "string" },
    window: { type: "string" },
    batch: { type: "string" },
    "tip-bytes": { type: "string" },
    fsync: { type: "string" },
    publishers: { type: "string" },
    payload: { type: "string" },
    quick: { type: "boolean" },
    json: { type: "boolean" },
    report: { type: "string" },
    url: { type: "string" },
    "data-dir": { type: "string" },
    ...CLIENT_AUTH_FLAGS,
    ...CLIENT_TLS_FLAGS,
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(BENCH_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const scenarios = parseScenarios(stringFlag(values, "scenario", "all"));
  const overrides: BenchOverrides = { quick: values.quick === true };
  if (typeof values.duration === "string")
    overrides.durationMs = positive(parseDuration(values.duration, "--duration"), "--duration");
  if (typeof values.messages === "string")
    overrides.messages = positive(parseCount(values.messages, "--messages"), "--messages");
  if (typeof values.readers === "string")
    overrides.readers = positive(parseCount(values.readers, "--readers"), "--readers");
  if (typeof values.repeat === "string")
    overrides.repeat = positive(parseCount(values.repeat, "--repeat"), "--repeat");
  if (typeof values.window === "string")
    overrides.window = positive(parseCount(values.window, "--window"), "--window");
  if (typeof values.batch === "string")
    overrides.batch = positive(parseCount(values.batch, "--batch"), "--batch");
  if (typeof values["tip-bytes"] === "string")
    overrides.tipBytes = positive(parseSize(values["tip-bytes"], "--tip-bytes"), "--tip-bytes");
  if (typeof values.fsync === "string") overrides.fsync = parseFsyncList(values.fsync);
  if (typeof values.publishers === "string")
    overrides.publishers = parseCountList(values.publishers, "--publishers");
  if (typeof values.payload === "string")
    overrides.payloadBytes = parseCountList(values.payload, "--payload");
  const environment = io.env?.() ?? {};
  const url = clientUrlOf(values, environment, null);
  // The in-process servers ask no token: a flag for them is a mistake, the variable is not.
  if (url === null && typeof values["auth-token"] === "string")
    throw new UsageError("--auth-token is for a server of --url (or ARIA_URL)");
  const authToken = url === null ? undefined : authTokenOf(values, environment);
  const tls = await clientTlsOf(values, url ?? "the in-process server", io);
  if (!tls.ok) {
    io.err(`aria bench: ${tls.message}\n`);
    return EXIT_FAILURE;
  }
  const options = benchOptions(overrides);
  const progress = benchProgress(io);
  const env = benchEnv({
    url,
    tls: tls.tls,
    authToken,
    parentDir: stringFlag(values, "data-dir", defaultParentDir()),
    progress: progress.update,
  });
  const results: ScenarioResult[] = [];
  const machine = machineInfo(url);
  try {
    for (const name of scenarios) {
      const result = await runScenario(name, env, options);
      results.push(result);
      progress.done(`${name}: done in ${(result.elapsedMs / 1000).toFixed(1)} s`);
    }
  } catch (error) {
    progress.done("");
    io.err(`aria bench: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  progress.done("");
  const json = `${JSON.stringify({ machine, options, scenarios: results }, null, 2)}\n`;
  const markdown = renderMarkdown(machine, results);
  io.out(values.json === true ? json : markdown);
  if (typeof values.report === "string") {
    const written = await writeReport(values.report, {
      "index.html": reportHtml({ machineLine: machineLine(machine), results }),
      "report.md": markdown,
      "results.json": json,
    });
    if (!written.ok) {
      io.err(`aria bench: --report ${values.report}: ${written.reason}\n`);
      return EXIT_FAILURE;
    }
    io.err(`aria bench: report written to ${values.report}/index.html\n`);
  }
  return EXIT_OK;
}

/** Writes `files` into `dir` (created when missing), each replaced whole. */
async function writeReport(
  dir: string,
  files: Record<string, string>,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  try {
    await runtime.openDisk(dir).mkdir(".");
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
  for (const [name, text] of Object.entries(files)) {
    const written = await writeTextFileAtomic(`${dir}/${name}`, text, { mode: 0o644 });
    if (!written.ok) return written;
  }
  return { ok: true };
}

function parseScenarios(text: string): ScenarioName[] {
  if (text === "all") return [...SCENARIOS];
  const names = text.split(",").map((name) => name.trim());
  for (const name of names) {
    if (!(SCENARIOS as readonly string[]).includes(name))
      throw new UsageError(`--scenario: "${name}" is not one of ${SCENARIOS.join(", ")}, all`);
  }
  return names as ScenarioName[];
}

const FSYNC_POLICIES: readonly FsyncPolicy[] = ["always", "interval", "never"];

function parseFsyncList(text: string): FsyncPolicy[] {
  const policies = text.split(",").map((policy) => policy.trim());
  for (const policy of policies) {
    if (!(FSYNC_POLICIES as readonly string[]).includes(policy))
      throw new UsageError(`--fsync: "${policy}" is not one of ${FSYNC_POLICIES.join(", ")}`);
  }
  return policies as FsyncPolicy[];
}

function parseCountList(text: string, flag: string): number[] {
  return text.split(",").map((part) => positive(parseCount(part.trim(), flag), flag));
}

function positive(value: number, flag: string): number {
  if (!(value > 0)) throw new UsageError(`${flag}: must be more than 0`);
  return value;
}

// ---- Output ------------------------------------------------------------------------------------

/** The line that says when, on what and against which server the run was. */
function machineLine(machine: MachineInfo): string {
  return `${machine.date} · ${machine.cpus} × ${machine.cpuModel} · ${machine.runtime} · ${machine.platform} · server: ${machine.server}`;
}

/** The results as markdown: one section per scenario, then the targets. */
function renderMarkdown(machine: MachineInfo, results: ScenarioResult[]): string {
  const parts = [`# aria bench\n\n${machineLine(machine)}\n`];
  for (const result of results) {
    parts.push(`## ${result.title}\n\n${markdownTable(result.columns, result.rows)}`);
    if (result.notes.length > 0)
      parts.push(`${result.notes.map((note) => `- ${note}`).join("\n")}\n`);
  }
  const targets = results.flatMap((result) => result.targets);
  if (targets.length > 0) {
    const rows = targets.map((t) => ({ target: t.target, measured: t.measured, met: t.met }));
    parts.push(
      `## Targets\n\n${markdownTable(
        [
          { key: "target", header: "target" },
          { key: "measured", header: "measured" },
          { key: "met", header: "met" },
        ],
        rows,
      )}`,
    );
  }
  return parts.join("\n");
}

/** The progress line (rewritten in place on a terminal), and `done` lines printed everywhere. */
function benchProgress(io: CliIo): { update(text: string): void; done(text: string): void } {
  const line = progressLine(io, "aria bench: ");
  return {
    update: (text) => line.update(text),
    done(text) {
      line.clear();
      if (text !== "") io.err(`aria bench: ${text}\n`);
    },
  };
}
