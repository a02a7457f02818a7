/**
 * Runtime: everything Aria needs from the JavaScript runtime that runs it — TCP in both
 * directions, files, an HTTP server for the admin app, CRC-32, time, workers and the process —
 * as one small interface. Two implementations sit side by side: bun_runtime.ts (Bun's natives:
 * Bun.listen, Bun.connect, Bun.serve, node:fs as Bun implements it) and deno_runtime.ts (Deno's:
 * Deno.listen, Deno.connect, Deno.open, Deno.serve, module workers). current_runtime.ts picks one
 * at start-up; nothing outside src/runtime/ knows which one runs.
 *
 * Not here: what stays portable because both runtimes implement it (the web platform's
 * performance, setTimeout, fetch, Worker messages; node:fs for the LOCK file and node:util's
 * parseArgs), and the pure core's own interfaces (Disk, Clock, Scheduler, Connection), which this
 * file only names.
 */
import type { Clock, ConnectionEvents, Scheduler } from "../broker/ports.ts";
import type { Crc32 } from "../store/crc32.ts";
import type { Disk } from "../store/disk.ts";
import type { ReadTextResult } from "./files.ts";
import type { Dialer } from "../client/mod.ts";
import type { TlsServerOptions } from "./tls.ts";
import type { WebSocketDoor } from "./web_socket_door.ts";

export type { ConnectionEvents };

export type { ReadTextResult } from "./files.ts";
export type { TlsServerOptions } from "./tls.ts";
export type { WebSocketDoor } from "./web_socket_door.ts";

/** A file's bytes, or why it could not be read (a one-line reason). */
export type ReadBytesResult = { ok: true; bytes: Uint8Array } | { ok: false; reason: string };

/** A listening TCP endpoint. */
export interface TcpListener {
  readonly host: string;
  readonly port: number;
  /** Stops accepting; open connections stay until their owner closes them. */
  stop(): void;
}

/** A request handler, as Hono's `app.fetch` is one; `peer.remoteAddress` is the client's IP. */
export type FetchHandler = (request: Request, peer: HttpPeer) => Response | Promise<Response>;

/** Who sent a request (Hono hands it to routes as `c.env`). */
export interface HttpPeer {
  /** The client's IP address, when the runtime says. */
  remoteAddress?: string;
}

/** A running HTTP server. */
export interface HttpServer {
  readonly port: number;
  /** Stops listening and closes its connections. */
  stop(): Promise<void>;
}

/** Standard output's reader went away (EPIPE: `aria sub … | head` after head exits): nothing more can be written. */
export class OutputClosedError extends Error {
  constructor(cause: unknown) {
    super(`standard output was closed: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** The runtime under Aria. */
export interface Runtime {
  /** "bun" or "deno". */
  readonly name: "bun" | "deno";
  /** The runtime's version, e.g. "1.4.5". */
  readonly version: string;

  /**
   * Listens on host:port (port 0 picks a free one), over TLS with `tls` (the runtime's native
   * TLS; check the material first with serverTlsProblem); throws when it cannot bind.
   */
  listenTcp(
    events: ConnectionEvents,
    options: { host: string; port: number; tls?: TlsServerOptions },
  ): TcpListener;
  /** Opens client connections (the client library's default dialer; TLS for a `tls` option). */
  readonly dialTcp: Dialer;
  /**
   * Serves `fetch` over HTTP on host:port, HTTPS with `tls`; throws when it cannot bind. With
   * `webSocket`, requests to its path upgrade to WebSocket connections of its events
   * (web_socket_door.ts on Bun, deno_web_socket.ts on Deno).
   */
  serveHttp(
    fetch: FetchHandler,
    options: {
      host: string;
      port: number;
      tls?: Pick<TlsServerOptions, "cert" | "key">;
      webSocket?: WebSocketDoor;
    },
  ): HttpServer;

  /** The real file system under `root` (relative paths, fsync of files and directories). */
  openDisk(root: string): Disk;
  /** The runtime's fastest CRC-32 (IEEE), equal to src/store/crc32.ts. */
  readonly crc32: Crc32;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  /** A one-shot timer (the store's `interval` fsync policy). */
  scheduleAfter(delayMs: number, run: () => void): void;
  /** A pause for the store's background work when it ran long enough, else undefined (clock.ts). */
  yieldToEvents(): Promise<void> | undefined;
  /**
   * Asks the garbage collector to run soon, without blocking (a no-op where the runtime offers no
   * such hint), or a full collection once the resident set grew by GC_FULL_GROWTH_BYTES
   * (garbage_hint.ts). The server calls it once a second so freed frames and batches are returned
   * steadily instead of piling up between the engine's own collections.
   */
  collectGarbage(): void;
  /** Starts a module worker running the script at `url`. */
  spawnWorker(url: string): Worker;

  /** Command-line arguments after the program (and script) name. */
  args(): string[];
  /** The process's environment variables (a copy). */
  environment(): Record<string, string>;
  /**
   * Ends the process with `code` once everything written to stdout and stderr has reached them
   * (a pipe, a file, a terminal), or once they failed (a pipe whose reader exited).
   */
  exit(code: number): Promise<never>;
  writeStdout(text: string): void;
  writeStderr(text: string): void;
  /** Writes to standard output, waiting while the pipe is full; rejects with OutputClosedError once its reader is gone. */
  writeStdoutAsync(data: string | Uint8Array): Promise<void>;
  /** Standard input as byte chunks as they arrive, never decoded (binary-safe). */
  stdinChunks(): AsyncIterable<Uint8Array>;
  /** Calls `handler` once, on the first SIGINT or SIGTERM. */
  onShutdownSignal(handler: (signal: string) => void): void;
  /** Calls `handler` on every SIGHUP (a reload), which then no longer ends the process. */
  onReloadSignal(handler: () => void): void;
  /** True when standard error is a terminal. */
  stderrIsTerminal(): boolean;
  /** Reads `path` as UTF-8, refusing files over `bytesMax`; the reason when it cannot. */
  readTextFile(path: string, options: { bytesMax: number }): Promise<ReadTextResult>;
  /** Reads `path`'s bytes exactly, refusing files over `bytesMax`; the reason when it cannot. */
  readBytesFile(path: string, options: { bytesMax: number }): Promise<ReadBytesResult>;
  /** Runs a program with its output discarded; resolves to its exit code. */
  runQuiet(argv: string[]): Promise<number>;
}
