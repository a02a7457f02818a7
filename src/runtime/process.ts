/**
 * process: the program's arguments, standard streams and exit over the node `process` object, as
 * Bun provides it (bun_runtime.ts; deno_runtime.ts has Deno's and shares `linesOf`). The CLI reaches
 * them through the Runtime, so it stays testable without a process (tests pass their own writers).
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

/** Writes text to standard output, waiting when the pipe is full (large outputs stay bounded). */
export async function writeStdoutAsync(text: string | Uint8Array): Promise<void> {
  if (!process.stdout.write(text)) await new Promise<void>((resolve) => process.stdout.once("drain", () => resolve()));
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

/** Calls `handler` once on the first SIGINT or SIGTERM. */
export function onShutdownSignal(handler: (signal: string) => void): void {
  let called = false;
  const once = (signal: string) => {
    if (called) return;
    called = true;
    handler(signal);
  };
  process.on("SIGINT", () => once("SIGINT"));
  process.on("SIGTERM", () => once("SIGTERM"));
}
