/**
 * process: the program's arguments, standard streams and exit over the node `process` object, as
 * Bun provides it (bun_runtime.ts; deno_runtime.ts has Deno's and shares `linesOf`). The CLI reaches
 * them through the Runtime, so it stays testable without a process (tests pass their own writers).
 */
import { OutputClosedError } from "./runtime.ts";

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

/** The error standard output reported (EPIPE once its reader is gone), or null. */
let stdoutFailure: unknown = null;
let stdoutWatched = false;

/**
 * Writes text to standard output, waiting when the pipe is full (large outputs stay bounded).
 * Rejects with OutputClosedError once standard output failed: a write to a pipe whose reader
 * exited fails with EPIPE, after which no "drain" ever comes (waiting for one hung for ever).
 */
export async function writeStdoutAsync(text: string | Uint8Array): Promise<void> {
  if (!stdoutWatched) {
    stdoutWatched = true;
    // Also keeps the runtime from printing the EPIPE as an unhandled stream error.
    process.stdout.on("error", (error) => {
      stdoutFailure ??= error;
    });
  }
  if (stdoutFailure !== null) throw new OutputClosedError(stdoutFailure);
  if (process.stdout.write(text)) return;
  await new Promise<void>((resolve, reject) => {
    const settle = (error?: unknown) => {
      process.stdout.off("drain", settle);
      process.stdout.off("error", settle);
      if (error === undefined) resolve();
      else reject(new OutputClosedError(error));
    };
    process.stdout.on("drain", settle);
    process.stdout.on("error", settle);
  });
}

/** The lines of standard input, without their line endings. */
export function stdinLines(): AsyncGenerator<string> {
  return linesOf(process.stdin as AsyncIterable<Uint8Array>);
}

/** The UTF-8 lines of a byte stream, without their line endings (a last line may lack one). */
export async function* linesOf(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of chunks) {
    rest += decoder.decode(chunk, { stream: true });
    let newline = rest.indexOf("\n");
    while (newline >= 0) {
      yield rest.slice(0, newline).replace(/\r$/, "");
      rest = rest.slice(newline + 1);
      newline = rest.indexOf("\n");
    }
  }
  rest += decoder.decode();
  if (rest.length > 0) yield rest;
}

/**
 * Calls `handler` once on the first SIGINT or SIGTERM. A second one ends the process at once
 * (exit 128 + the signal's number), as a SIGKILL would, which the store survives: an operator
 * whose clean stop hangs (a long sort at close) need not reach for kill -9.
 */
export function onShutdownSignal(handler: (signal: string) => void): void {
  let called = false;
  const once = (signal: string) => {
    if (called) {
      process.stderr.write(`aria: ${signal} again: stopping now, without a clean close\n`);
      process.exit(signal === "SIGINT" ? 130 : 143);
    }
    called = true;
    handler(signal);
  };
  process.on("SIGINT", () => once("SIGINT"));
  process.on("SIGTERM", () => once("SIGTERM"));
}
