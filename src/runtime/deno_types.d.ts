/**
 * The few Deno APIs Aria calls (deno_runtime.ts, deno_disk.ts, deno_tcp.ts, the bun:test shim),
 * declared for `tsc`, which checks the project against Bun's types. They follow Deno 2's own
 * declarations (lib.deno.ns.d.ts), reduced to the members used. Under Deno the real ones apply:
 * Deno runs Aria with --no-check (see deno.json), so this file never meets them.
 */
declare namespace Deno {
  const version: { deno: string; v8: string; typescript: string };
  const args: readonly string[];
  const env: { toObject(): Record<string, string> };
  function exit(code?: number): never;

  interface NetAddr {
    transport: "tcp" | "udp";
    hostname: string;
    port: number;
  }
  interface TcpConn {
    readonly remoteAddr: NetAddr;
    read(into: Uint8Array): Promise<number | null>;
    write(bytes: Uint8Array): Promise<number>;
    closeWrite(): Promise<void>;
    close(): void;
    setNoDelay(noDelay?: boolean): void;
  }
  interface TcpListener {
    readonly addr: NetAddr;
    accept(): Promise<TcpConn>;
    close(): void;
  }
  function listen(options: { hostname?: string; port: number; transport?: "tcp" }): TcpListener;
  function connect(options: {
    hostname?: string;
    port: number;
    transport?: "tcp";
  }): Promise<TcpConn>;
  interface TlsConn {
    readonly remoteAddr: NetAddr;
    read(into: Uint8Array): Promise<number | null>;
    write(bytes: Uint8Array): Promise<number>;
    closeWrite(): Promise<void>;
    close(): void;
    handshake(): Promise<{ alpnProtocol: string | null }>;
  }
  interface TlsListener {
    readonly addr: NetAddr;
    accept(): Promise<TlsConn>;
    close(): void;
  }
  function listenTls(options: {
    hostname?: string;
    port: number;
    transport?: "tcp";
    cert: string;
    key: string;
  }): TlsListener;
  function connectTls(options: {
    hostname?: string;
    port: number;
    caCerts?: string[];
    cert?: string;
    key?: string;
  }): Promise<TlsConn>;

  interface HttpServer {
    readonly addr: NetAddr;
    readonly finished: Promise<void>;
    shutdown(): Promise<void>;
  }
  function serve(
    options: {
      hostname?: string;
      port?: number;
      onListen?: (addr: NetAddr) => void;
      cert?: string;
      key?: string;
    },
    handler: (request: Request, info: { remoteAddr: NetAddr }) => Response | Promise<Response>,
  ): HttpServer;

  function upgradeWebSocket(
    request: Request,
    options?: { protocol?: string },
  ): { socket: WebSocket; response: Response };

  enum SeekMode {
    Start = 0,
    Current = 1,
    End = 2,
  }
  interface FileInfo {
    isFile: boolean;
    isDirectory: boolean;
    size: number;
  }
  interface FsFile {
    read(into: Uint8Array): Promise<number | null>;
    write(bytes: Uint8Array): Promise<number>;
    seekSync(offset: number, whence: SeekMode): number;
    stat(): Promise<FileInfo>;
    sync(): Promise<void>;
    syncData(): Promise<void>;
    truncate(length?: number): Promise<void>;
    close(): void;
  }
  interface OpenOptions {
    read?: boolean;
    write?: boolean;
    create?: boolean;
    truncate?: boolean;
    createNew?: boolean;
    mode?: number;
  }
  function open(path: string, options?: OpenOptions): Promise<FsFile>;
  function readDir(
    path: string,
  ): AsyncIterable<{ name: string; isFile: boolean; isDirectory: boolean }>;
  function mkdir(path: string, options?: { recursive?: boolean }): Promise<void>;
  function remove(path: string, options?: { recursive?: boolean }): Promise<void>;
  function rename(from: string, to: string): Promise<void>;
  function stat(path: string): Promise<FileInfo>;
  function readTextFile(path: string): Promise<string>;
  function readFile(path: string): Promise<Uint8Array>;

  namespace errors {
    class NotFound extends Error {}
    class BadResource extends Error {}
    class BrokenPipe extends Error {}
  }

  const stdin: { readonly readable: ReadableStream<Uint8Array> & AsyncIterable<Uint8Array> };
  const stdout: {
    write(bytes: Uint8Array): Promise<number>;
    writeSync(bytes: Uint8Array): number;
    isTerminal(): boolean;
  };
  const stderr: {
    write(bytes: Uint8Array): Promise<number>;
    writeSync(bytes: Uint8Array): number;
    isTerminal(): boolean;
  };
  function addSignalListener(signal: "SIGINT" | "SIGTERM" | "SIGHUP", handler: () => void): void;
  function unrefTimer(id: ReturnType<typeof setTimeout>): void;

  class Command {
    constructor(
      program: string,
      options?: {
        args?: string[];
        stdin?: "null" | "inherit" | "piped";
        stdout?: "null" | "inherit" | "piped";
        stderr?: "null" | "inherit" | "piped";
      },
    );
    output(): Promise<{ code: number; success: boolean }>;
  }

  function test(name: string, fn: () => void | Promise<void>): void;
  function test(options: {
    name: string;
    fn: () => void | Promise<void>;
    ignore?: boolean;
    sanitizeOps?: boolean;
    sanitizeResources?: boolean;
  }): void;
}
