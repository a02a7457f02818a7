/**
 * cli: the `aria` command line. Dispatches the first argument to a subcommand; each subcommand
 * parses its own flags (node:util parseArgs), prints usage on --help, and answers wrong arguments
 * with a usage message on stderr and exit code 2.
 */
import { ARIA_VERSION } from "../constants.ts";
import { buildCommit, runtime } from "../runtime/mod.ts";
import { UsageError } from "./args.ts";
import { BENCH_USAGE, benchCommand } from "./bench.ts";
import { EXIT_OK, EXIT_USAGE, processIo, type CliIo } from "./cli_io.ts";
import { CONSUMERS_USAGE, consumersCommand } from "./consumers.ts";
import { PUB_USAGE, pubCommand } from "./pub.ts";
import { REPAIR_USAGE, repairCommand } from "./repair.ts";
import { SERVE_USAGE, serveCommand } from "./serve.ts";
import { SIMULATE_USAGE, simulateCommand } from "./simulate.ts";
import { SPLIT_USAGE, splitCommand } from "./split.ts";
import { SUB_USAGE, subCommand } from "./sub.ts";
import { USERS_USAGE, usersCommand } from "./users.ts";

export { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CliIo } from "./cli_io.ts";

export { ARIA_VERSION };

/** The line `aria version` and `aria --version` print: the version, the commit and the runtime. */
export function versionLine(): string {
  return `aria ${ARIA_VERSION} (commit ${buildCommit()}, ${runtime.name} ${runtime.version})\n`;
}

interface Command {
  summary: string;
  usage?: string;
  run(args: string[], io: CliIo): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  serve: {
    summary: "run the server (TCP protocol + admin HTTP app)",
    usage: SERVE_USAGE,
    run: serveCommand,
  },
  pub: { summary: "publish messages", usage: PUB_USAGE, run: pubCommand },
  sub: { summary: "subscribe and print messages", usage: SUB_USAGE, run: subCommand },
  simulate: {
    summary: "run the deterministic simulator with fault injection",
    usage: SIMULATE_USAGE,
    run: simulateCommand,
  },
  bench: {
    summary: "run scenario benchmarks against a server",
    usage: BENCH_USAGE,
    run: benchCommand,
  },
  split: {
    summary: "split persisted partitions into subtree stores (plan, stats, rewrite)",
    usage: SPLIT_USAGE,
    run: splitCommand,
  },
  repair: {
    summary: "salvage a damaged data directory (moves damaged bytes aside, reports lost seqs)",
    usage: REPAIR_USAGE,
    run: repairCommand,
  },
  consumers: {
    summary: "list and remove the durable consumers of a running server",
    usage: CONSUMERS_USAGE,
    run: consumersCommand,
  },
  users: {
    summary: "add, list and remove the users of --users FILE (tokens, topic permissions)",
    usage: USERS_USAGE,
    run: usersCommand,
  },
  version: {
    summary: "print the version, the commit it was built from and the runtime",
    run: async (_args, io) => {
      io.out(versionLine());
      return EXIT_OK;
    },
  },
};

/** The top-level usage text. */
export function usage(): string {
  const lines = Object.entries(COMMANDS).map(
    ([name, command]) => `  ${name.padEnd(10)} ${command.summary}`,
  );
  return `Usage: aria <command> [options]\n\nCommands:\n${lines.join("\n")}\n\nRun 'aria <command> --help' for a command's options; 'aria --version' prints the version.\n`;
}

/** Runs the command line `args` (without the program name); resolves to the exit code. */
export async function runCli(args: string[], io: CliIo = processIo): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    (name === undefined ? io.err : io.out)(usage());
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (name === "--version" || name === "-V") return await COMMANDS.version!.run(rest, io);
  const command = COMMANDS[name];
  if (command === undefined) {
    io.err(`aria: unknown command '${name}'\n\n${usage()}`);
    return EXIT_USAGE;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`aria ${name}: ${error.message}\n\n${command.usage ?? usage()}`);
    return EXIT_USAGE;
  }
}
