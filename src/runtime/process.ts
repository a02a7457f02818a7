/**
 * process: the program's arguments, standard streams and exit, behind small functions so the CLI
 * stays testable without a process (tests pass their own args and writers).
 */

/** Command-line arguments after the program (and script) name. */
export function processArgs(): string[] {
  return process.argv.slice(2);
}

/** Ends the process with `code`. */
export function processExit(code: number): never {
  process.exit(code);
}

/** Writes text to standard output. */
export function writeStdout(text: string): void {
  process.stdout.write(text);
}

/** Writes text to standard error. */
export function writeStderr(text: string): void {
  process.stderr.write(text);
}
