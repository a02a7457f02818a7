/**
 * `aria split`: the offline split of closed segments into subtree stores, one subcommand each.
 * `plan` (which topics share a store, from a volume table), `stats` (measure a volume table from a
 * data directory) and the rewrite itself (`aria split [--data-dir DIR] ...`, no subcommand:
 * split_run.ts). Each prints its own usage on --help and on a usage error (exit 2).
 * Planning is pure (src/split); this file reads the file, formats and prints.
 */
import { SPLIT_VOLUMES_FILE_BYTES_MAX } from "../constants.ts";
import { formatBytes } from "../stdx/format_bytes.ts";
import { runtime } from "../runtime/mod.ts";
import {
  parseVolumeTable,
  planJson,
  planSplit,
  SPLIT_ALGORITHMS,
  type PlanReport,
  type SplitAlgorithm,
  type VolumeTable,
} from "../split/mod.ts";
import { parseCommand, parseCount, stringFlag, UsageError } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CliIo } from "./cli_io.ts";
import {
  SPLIT_RUN_USAGE,
  SPLIT_STATS_USAGE,
  splitRunCommand,
  splitStatsCommand,
} from "./split_run.ts";

/** Usage of `aria split`. */
export const SPLIT_USAGE = `Usage: aria split [--data-dir DIR] [--algorithm adaptive|heuristic] [--max-stores N] [--workers N] [--dry-run]
       aria split <subcommand> [options]

Splits persisted topic partitions into subtree stores. Without a subcommand: rewrites the closed
segments of the data directory into the stores of a plan (safe while 'aria serve' runs on it).

Subcommands:
  plan       plan which topics share a store, from a volume table (CSV)
  stats      measure the volume table of a data directory's closed segments and stores

Run 'aria split <subcommand> --help' for its options.
`;

/** Usage of `aria split plan`. */
export const SPLIT_PLAN_USAGE = `Usage: aria split plan --volumes FILE.csv --algorithm heuristic|adaptive [--max-stores N] [--json]

Reads a volume table (CSV with the header topic,bytes,messages) and prints which topics share a
store and how many bytes a reader of one topic or one subtree reads and throws away.

Options:
  --volumes FILE.csv       the volume table
  --algorithm NAME         heuristic: one store per first three segments (the old rule)
                           adaptive: cut the topic tree by volume, under a budget of stores
  --max-stores N           adaptive's budget (default: the heuristic's store count). A store never
                           mixes partitions: a budget below the partition count is raised to it,
                           with a note on stderr and "budgetRaisedTo" in the JSON
  --json                   print one JSON document instead of a summary
  -h, --help               show this help
`;

interface Subcommand {
  summary: string;
  usage: string;
  run(args: string[], io: CliIo): Promise<number>;
}

const SPLIT_SUBCOMMANDS: Record<string, Subcommand> = {
  plan: { summary: "plan which topics share a store", usage: SPLIT_PLAN_USAGE, run: planCommand },
  stats: {
    summary: "measure the volume table of a data directory",
    usage: SPLIT_STATS_USAGE,
    run: splitStatsCommand,
  },
};

const SPLIT_RUN: Subcommand = {
  summary: "rewrite closed segments into subtree stores",
  usage: SPLIT_RUN_USAGE,
  run: splitRunCommand,
};

/** Runs `aria split`. */
export async function splitCommand(args: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = args;
  if (name === "--help" || name === "-h" || name === "help") {
    io.out(SPLIT_USAGE);
    return EXIT_OK;
  }
  const flagForm = name === undefined || name.startsWith("-");
  const subcommand = flagForm ? SPLIT_RUN : SPLIT_SUBCOMMANDS[name];
  if (subcommand === undefined) throw new UsageError(`unknown subcommand '${name}'`);
  try {
    return await subcommand.run(flagForm ? args : rest, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`aria split${flagForm ? "" : ` ${name}`}: ${error.message}\n\n${subcommand.usage}`);
    return EXIT_USAGE;
  }
}

async function planCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    volumes: { type: "string" },
    algorithm: { type: "string" },
    "max-stores": { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SPLIT_PLAN_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const path = stringFlag(values, "volumes", "");
  if (path === "") throw new UsageError("--volumes FILE.csv is required");
  const algorithm = stringFlag(values, "algorithm", "");
  if (!SPLIT_ALGORITHMS.includes(algorithm as SplitAlgorithm)) {
    throw new UsageError(
      algorithm === ""
        ? "--algorithm is required (heuristic or adaptive)"
        : `--algorithm: "${algorithm}" is not heuristic or adaptive`,
    );
  }
  const maxStoresText = stringFlag(values, "max-stores", "");
  if (maxStoresText !== "" && algorithm !== "adaptive")
    throw new UsageError("--max-stores applies to --algorithm adaptive only");
  const maxStores = maxStoresText === "" ? undefined : parseCount(maxStoresText, "--max-stores");
  if (maxStores !== undefined && !Number.isSafeInteger(maxStores))
    throw new UsageError(`--max-stores: ${maxStoresText} is too large`);

  const read = await runtime.readTextFile(path, { bytesMax: SPLIT_VOLUMES_FILE_BYTES_MAX });
  if (!read.ok) {
    io.err(`aria split plan: ${read.reason}\n`);
    return EXIT_FAILURE;
  }
  const parsed = parseVolumeTable(read.text);
  if (!parsed.ok) {
    io.err(`aria split plan: ${path}: ${parsed.reason}\n`);
    return EXIT_FAILURE;
  }
  const report = planSplit(parsed.table, { algorithm: algorithm as SplitAlgorithm, maxStores });
  if (report.plan.budgetRaisedTo !== null) {
    io.err(
      `aria split plan: --max-stores ${maxStores} is below the table's ${report.partitions} partitions ` +
        `(a store never mixes partitions): planned for ${report.plan.budgetRaisedTo} stores\n`,
    );
  }
  io.out(
    values.json === true
      ? `${JSON.stringify(planJson(parsed.table, report))}\n`
      : planSummary(parsed.table, report, maxStores),
  );
  return EXIT_OK;
}

/** The readable summary `aria split plan` prints without --json. */
export function planSummary(table: VolumeTable, report: PlanReport, maxStores?: number): string {
  const { plan, metrics } = report;
  const budget =
    plan.budget === null
      ? ""
      : `, budget ${plan.budget} stores${plan.budgetRaisedTo !== null ? ` (raised from ${maxStores})` : maxStores === undefined ? " (the heuristic's store count)" : ""}`;
  const subtrees = metrics.subtrees;
  const lines = [
    `algorithm      ${plan.algorithm}${budget}`,
    `table          ${table.topics.length} topics in ${report.partitions} partitions, ${formatBytes(table.bytesTotal)}`,
    `stores         ${metrics.stores}`,
    `topic reads    wasted ${formatBytes(metrics.wastedBytesTotal)} in total; most ${formatBytes(metrics.worstWaste.wastedBytes)} ` +
      `reading ${metrics.worstWaste.topic}; worst ratio ${metrics.worstRatio.ratio.toFixed(2)}x reading ${metrics.worstRatio.topic}`,
    `subtree reads  wasted ${formatBytes(subtrees.wastedBytesTotal)} over ${subtrees.count} subtrees; most ${formatBytes(subtrees.worstWaste.wastedBytes)} ` +
      `reading ${subtrees.worstWaste.subtree}; worst ratio ${subtrees.worstRatio.ratio.toFixed(2)}x reading ${subtrees.worstRatio.subtree}`,
    "",
  ];
  const idWidth = Math.max(5, ...plan.subtrees.map((store) => store.id.length));
  const partitionWidth = Math.max(9, ...plan.subtrees.map((store) => store.partition.length));
  lines.push(
    `${"store".padEnd(idWidth)}  ${"partition".padEnd(partitionWidth)}  ${"topics".padStart(7)}  ${"bytes".padStart(9)}  first topic`,
  );
  for (const store of plan.subtrees) {
    lines.push(
      `${store.id.padEnd(idWidth)}  ${store.partition.padEnd(partitionWidth)}  ${String(store.topics.length).padStart(7)}  ` +
        `${formatBytes(store.bytes).padStart(9)}  ${table.topics[store.topics[0]]}`,
    );
  }
  return `${lines.join("\n")}\n`;
}
