/**
 * CliIo: where a subcommand writes. Subcommands take it instead of touching process streams, so
 * tests run them in-process and read what they printed.
 */
import { runtime } from "../runtime/mod.ts";

/** Output streams of a command. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** True when `err` goes to a terminal, where a progress line may be rewritten in place (absent: not a terminal). */
  errIsTerminal?(): boolean;
  /** The environment the command reads ARIA_* settings from (absent: none; tests pass their own). */
  env?(): Record<string, string | undefined>;
}

/** The process's own stdout and stderr. */
export const processIo: CliIo = {
  out: (text) => runtime.writeStdout(text),
  err: (text) => runtime.writeStderr(text),
  errIsTerminal: () => runtime.stderrIsTerminal(),
  env: () => runtime.environment(),
};

/** Exit codes every subcommand shares. */
export const EXIT_OK = 0;
/** Failure at run time (server unreachable, a file unreadable, a check failed). */
export const EXIT_FAILURE = 1;
/** Wrong arguments: usage printed on stderr. */
export const EXIT_USAGE = 2;
