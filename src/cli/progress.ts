/**
 * progress: one status line on standard error, rewritten in place while a long command runs, and
 * only on a terminal (`\r` and erase-line would litter a pipe or a log file). Lines are cut to
 * `PROGRESS_COLUMNS` so a rewrite never wraps onto a second row, which `\r` cannot reach back to.
 */
import type { CliIo } from "./cli_io.ts";

/** The widest progress line: narrower than the 80 columns of the smallest usual terminal. */
const PROGRESS_COLUMNS = 79;

/** A progress line for `io`: `update` rewrites it (terminals only), `clear` removes it before other output. */
export interface ProgressLine {
  update(text: string): void;
  clear(): void;
}

/** The progress line of a command whose lines start with `prefix` (e.g. "aria simulate: "). */
export function progressLine(io: CliIo, prefix: string): ProgressLine {
  const terminal = io.errIsTerminal?.() === true;
  let shown = false;
  return {
    update(text) {
      if (!terminal) return;
      io.err(`\r\x1b[K${`${prefix}${text}`.slice(0, PROGRESS_COLUMNS)}`);
      shown = true;
    },
    clear() {
      if (shown) io.err("\r\x1b[K");
      shown = false;
    },
  };
}
