/**
 * dialer: the client's port to the network — how AriaClient opens a connection and what the
 * connection reports back. The client declares it; the runtime implements it (Bun.connect in
 * src/runtime/tcp_dialer.ts, Deno.connect in src/runtime/deno_tcp.ts) and tests implement it in
 * memory. Only the methods the client calls.
 *
 * Invariants: `close` is reported at most once per connection; a failed connect rejects the
 * Dialer's promise and reports nothing else. With `tls`, the promise resolves only once the
 * server's certificate was verified (chain, expiry, host name); a failed verification rejects it
 * (never a plain-TCP connection instead).
 */

/** What a dialled connection reports back. */
export interface DialHandlers {
  data(bytes: Uint8Array): void;
  drain(): void;
  close(error?: Error): void;
}

/** A connected client socket. */
export interface ClientSocket {
  /** Writes what the kernel takes now; returns the bytes taken. */
  write(bytes: Uint8Array): number;
  end(): void;
  /** Stops reading, so the server sees TCP back-pressure. */
  pause(): void;
  resume(): void;
}

/** TLS for a dialled connection: PEM text, never file names (the client reads no files). */
export interface DialTls {
  /** The CAs the server's certificate must chain to; absent: the system's CAs. */
  ca?: string;
  /** A client certificate and its key, for servers that require one (mutual TLS). */
  cert?: string;
  key?: string;
}

/** How to dial: `tls` set means TLS over TCP (a `tls://` URL), absent means plain TCP. */
export interface DialOptions {
  tls?: DialTls;
}

/** Opens a connection to host:port. */
export type Dialer = (
  host: string,
  port: number,
  handlers: DialHandlers,
  options?: DialOptions,
) => Promise<ClientSocket>;
