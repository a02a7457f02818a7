/**
 * dialer: the client's port to the network — how AriaClient opens a connection and what the
 * connection reports back. The client declares it; the runtime implements it (Bun.connect in
 * src/runtime/tcp_dialer.ts, Deno.connect in src/runtime/deno_tcp.ts) and tests implement it in
 * memory. Only the methods the client calls.
 *
 * Invariants: `close` is reported at most once per connection; a failed connect rejects the
 * Dialer's promise and reports nothing else.
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

/** Opens a connection to host:port. */
export type Dialer = (host: string, port: number, handlers: DialHandlers) => Promise<ClientSocket>;
