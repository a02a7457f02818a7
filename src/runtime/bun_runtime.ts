/**
 * bunRuntime: the Runtime over Bun's natives — Bun.listen / Bun.connect (tcp_listener.ts,
 * tcp_dialer.ts; their `tls` option for TLS), Bun.serve for the admin app (HTTPS with its `tls`),
 * node:fs as Bun implements it (bun_disk.ts, files.ts), Bun.hash.crc32, Bun.spawn, and the node
 * `process` object (process.ts). Built only when Bun runs Aria (current_runtime.ts): every `Bun.`
 * reference sits inside `bunRuntime()` or a function it hands out, so importing this module under
 * Deno evaluates none of them.
 */
import { BunDisk } from "./bun_disk.ts";
import { scheduleAfter, systemClock, systemScheduler, yieldToEvents } from "./clock.ts";
import { nativeCrc32 } from "./crc32.ts";
import { readBytesFile, readTextFile } from "./files.ts";
import { garbageHint } from "./garbage_hint.ts";
import {
  onShutdownSignal,
  onReloadSignal,
  processArgs,
  processExit,
  stdinChunks,
  writeStderr,
  writeStdout,
  writeStdoutAsync,
} from "./process.ts";
import type { Runtime } from "./runtime.ts";
import { dialTcp } from "./tcp_dialer.ts";
import { connectionsClosed, listenTcp } from "./tcp_listener.ts";
import { upgradeWebSocket, type WebSocketData, webSocketHandler } from "./web_socket_door.ts";

/** Aria's runtime layer under Bun; call only under Bun (it reads `Bun` at once). */
export const bunRuntime = (): Runtime => ({
  name: "bun",
  version: Bun.version,
  listenTcp,
  dialTcp,
  serveHttp: (fetch, options) => {
    const door = options.webSocket;
    const tls =
      options.tls === undefined ? undefined : { cert: options.tls.cert, key: options.tls.key };
    const server =
      door === undefined
        ? Bun.serve({
            hostname: options.host,
            port: options.port,
            fetch: (request, server) =>
              fetch(request, { remoteAddress: server.requestIP(request)?.address }),
            tls,
          })
        : Bun.serve<WebSocketData>({
            hostname: options.host,
            port: options.port,
            fetch: (request, server) => {
              const upgraded = upgradeWebSocket(door, request, server);
              if (upgraded !== null) return upgraded;
              return fetch(request, { remoteAddress: server.requestIP(request)?.address });
            },
            websocket: webSocketHandler(door),
            tls,
          });
    return {
      port: server.port ?? options.port,
      stop: async () => {
        server.stop(true);
      },
    };
  },
  openDisk: (root) => new BunDisk(root),
  crc32: nativeCrc32,
  clock: systemClock,
  scheduler: systemScheduler,
  scheduleAfter,
  yieldToEvents,
  collectGarbage: garbageHint({
    rssBytes: () => process.memoryUsage.rss(),
    connectionsClosed,
    collect: (full) => Bun.gc(full),
  }),
  spawnWorker: (url) => new Worker(url),
  args: processArgs,
  environment: () => ({ ...process.env }) as Record<string, string>,
  exit: processExit,
  writeStdout,
  writeStderr,
  writeStdoutAsync,
  stdinChunks,
  onShutdownSignal,
  onReloadSignal,
  stderrIsTerminal: () => process.stderr.isTTY === true,
  readTextFile,
  readBytesFile,
  runQuiet: async (argv) => {
    const child = Bun.spawn(argv, { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
    return await child.exited;
  },
});
