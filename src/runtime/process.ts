/**
 * process: the program's arguments, standard streams and exit over the node `process` object, as
 * Bun provides it (bun_runtime.ts; deno_runtime.ts has Deno's). The CLI reaches them through the
 * Runtime, so it stays testable without a process (tests pass their own writers).
 *
 * Invariant: the process ends only after what it wrote to stdout and stderr reached them. Bun
 * keeps what a pipe did not take at once in the stream's own buffer, and `process.exit` drops
 * that buffer: `aria split plan --json | wc -c` counted 64 or 128 KiB of an 8.9 MB plan.
 */
import { OutputClosedError } from "./runtime.ts";

/** Command-line arguments after the program (and script) name. */
export function processArgs(): string[] {
  return process.argv.slice(2);
}

/**
 * Ends the process with `code` once standard output and standard error have drained (or failed:
 * a pipe whose reader is gone takes nothing more, and that is no reason to wait).
 */
export async function processExit(code: number): Promise<never> {
  await Promise.all([drained(process.stdout), drained(process.stderr)]);
  process.exit(code);
}

/**
 * Resolves once everything written to `stream` was handed to the system, or the stream failed.
 * Ending the stream is the one wait Bun honours: `writableLength` reads 0 and an empty write's
 * callback comes at once while its buffer still holds megabytes; the "finish" of `end()` comes
 * after them. A stream already closed or failed has nothing more to deliver.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  // A failed stream (EPIPE: `aria sub … | head` after head exited) neither finishes nor fails again.
  if (stream.destroyed || stream.writableFinished || stream.errored !== null)
    return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => resolve();
    stream.once("finish", done);
    stream.once("close", done);
    // Also keeps the runtime from printing an EPIPE met here as an unhandled stream error.
    stream.once("error", done);
    stream.end();
  });
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

/** Standard input as it arrives: byte chunks (Buffers), never decoded. */
export function stdinChunks(): AsyncIterable<Uint8Array> {
  return process.stdin as AsyncIterable<Uint8Array>;
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

/**
 * Calls `handler` on every SIGHUP (`systemctl reload`, `kill -HUP`), which would otherwise end the
 * process: the server reloads what it can without dropping connections.
 */
export function onReloadSignal(handler: () => void): void {
  process.on("SIGHUP", handler);
}
