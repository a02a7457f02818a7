/**
 * denoRuntime: the Runtime over Deno's natives — Deno.listen / Deno.connect and their TLS forms
 * (deno_tcp.ts), Deno.open with fdatasync / fsync (deno_disk.ts), Deno.serve for the admin app
 * (HTTPS with cert and key; its WebSocket door through Deno.upgradeWebSocket, deno_web_socket.ts),
 * module workers, Deno.args / Deno.exit / Deno.stdout / Deno.stdin / Deno.addSignalListener for
 * the process. Built only when Deno runs Aria (current_runtime.ts);
 * importing this module under Bun evaluates no `Deno.` reference. CRC-32 is node:zlib's crc32,
 * which Deno implements natively (Deno has no Bun.hash); the clock and the scheduler are the web
 * platform's, shared with Bun (clock.ts).
 */
import { crc32 as zlibCrc32 } from "node:zlib";
import type { Crc32 } from "../store/crc32.ts";
import { scheduleAfter, systemClock, systemScheduler, yieldToEvents } from "./clock.ts";
import { DenoDisk } from "./deno_disk.ts";
import { denoDialTcp, denoListenTcp } from "./deno_tcp.ts";
import { denoUpgradeWebSocket } from "./deno_web_socket.ts";
import { readBytesFile, readTextFile } from "./files.ts";
import { type HttpServer, OutputClosedError, type Runtime } from "./runtime.ts";

const encoder = new TextEncoder();

/** Aria's runtime layer under Deno; call only under Deno (it reads `Deno` at once). */
export const denoRuntime = (): Runtime => ({
  name: "deno",
  version: Deno.version.deno,
  listenTcp: denoListenTcp,
  dialTcp: denoDialTcp,
  serveHttp: (fetch, options): HttpServer => {
    // onListen replaces Deno's "Listening on …" line: `aria serve` owns its stdout.
    const server = Deno.serve(
      {
        hostname: options.host,
        port: options.port,
        onListen: () => {},
        ...(options.tls === undefined ? {} : { cert: options.tls.cert, key: options.tls.key }),
      },
      (request, info) => {
        const remoteAddress = info.remoteAddr.hostname;
        const door = options.webSocket;
        const upgraded =
          door === undefined ? null : denoUpgradeWebSocket(door, request, remoteAddress);
        return upgraded ?? fetch(request, { remoteAddress });
      },
    );
    return {
      port: server.addr.port,
      stop: () => server.shutdown(),
    };
  },
  openDisk: (root) => new DenoDisk(root),
  crc32: ((bytes, seed = 0) => zlibCrc32(bytes, seed) >>> 0) as Crc32,
  clock: systemClock,
  scheduler: systemScheduler,
  scheduleAfter,
  yieldToEvents,
  // Deno offers no collection hint without --v8-flags=--expose-gc.
  collectGarbage: () => {},
  spawnWorker: (url) => new Worker(url, { type: "module" }),
  args: () => [...Deno.args],
  environment: () => Deno.env.toObject(),
  // Every write below is whole when it returns (writeSync in a loop; writeStdoutAsync is awaited),
  // so nothing is buffered to drain before the exit.
  exit: async (code) => Deno.exit(code),
  writeStdout: (text) => writeAllSync(Deno.stdout, encoder.encode(text)),
  writeStderr: (text) => writeAllSync(Deno.stderr, encoder.encode(text)),
  writeStdoutAsync: async (data) => {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    let done = 0;
    try {
      while (done < bytes.length) done += await Deno.stdout.write(bytes.subarray(done));
    } catch (error) {
      if (error instanceof Deno.errors.BrokenPipe) throw new OutputClosedError(error);
      throw error;
    }
  },
  stdinChunks: () => Deno.stdin.readable,
  onShutdownSignal: (handler) => {
    let called = false;
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        if (called) return;
        called = true;
        handler(signal);
      });
    }
  },
  onReloadSignal: (handler) => Deno.addSignalListener("SIGHUP", handler),
  stderrIsTerminal: () => Deno.stderr.isTerminal(),
  readTextFile: (path, options) => readTextFile(path, options, denoStat),
  readBytesFile: (path, options) => readBytesFile(path, options, denoStat),
  runQuiet: async (argv) => {
    const [program, ...args] = argv;
    const { code } = await new Deno.Command(program, {
      args,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
    return code;
  },
});

function writeAllSync(stream: { writeSync(bytes: Uint8Array): number }, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.length) done += stream.writeSync(bytes.subarray(done));
}

/** A path's kind and size, as readWholeFile asks them (Deno's stat). */
async function denoStat(path: string): Promise<{ isDirectory: boolean; size: number }> {
  const stat = await Deno.stat(path);
  return { isDirectory: stat.isDirectory, size: stat.size };
}
