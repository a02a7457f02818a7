/**
 * deno_tcp: TCP for Aria under Deno — Deno.listen for the server, Deno.connect for the client —
 * with the socket semantics the broker and the client were written against under Bun:
 *
 * - `write(bytes)` is synchronous and returns the bytes taken now. Deno's `conn.write` is a promise,
 *   so each socket keeps an outbound queue of at most SOCKET_QUEUE_BYTES_MAX (standing in for the
 *   kernel's send buffer): a write takes what fits (copied: callers reuse their buffers), a pump
 *   writes the queue out, and when a write was cut short, `drain` is reported once the queue is
 *   down to half. The broker's own send queue and its stall logic stay in charge above it.
 * - bytes arrive through `data(chunk)`, each chunk bytes no later read overwrites (decoders parse
 *   payloads in place and may keep them): reads fill the free tail of a 1 MiB slab and each chunk
 *   is a view of what one read filled; a fresh slab replaces a full one (no copy per read, and one
 *   large allocation per megabyte instead of one per read). `pause()` stops reading, so the peer
 *   sees TCP back-pressure.
 * - `end()` flushes the queue, then half-closes; the connection is released when the peer closes
 *   or after END_LINGER_MS. `close` is reported exactly once, whoever closed.
 *
 *   write() ──▶ [ queue ≤ SOCKET_QUEUE_BYTES_MAX ] ──pump──▶ conn.write ──▶ kernel
 *   data()  ◀── copy ◀── conn.read ◀── kernel            (paused: no read is issued)
 *
 * TLS: Deno.listenTls / Deno.connectTls give a TlsConn with the same read / write / closeWrite, so
 * the same DenoSocket carries it. A dial completes the handshake (chain, expiry, host name) before
 * it resolves, and a failure rejects it in words (tls.ts). Deno's listenTls cannot ask for client
 * certificates: `clientCa` (mutual TLS) is refused under Deno, never ignored.
 */
import type { Connection } from "../broker/ports.ts";
import type { ConnectionEvents, TcpListener } from "./runtime.ts";
import type { ClientSocket, DialHandlers, Dialer } from "../client/mod.ts";
import { handshakeError, tlsAlertError, type TlsServerOptions } from "./tls.ts";

/** Outbound bytes a socket takes before write() returns short (about a loopback send buffer). */
const SOCKET_QUEUE_BYTES_MAX = 1024 * 1024;
/** A short write is followed by `drain` once the queue is down to this: the writer refills it
 * while the rest is still in flight, so a catching-up reader's stream has no gap per round. */
const SOCKET_QUEUE_DRAIN_BYTES = SOCKET_QUEUE_BYTES_MAX / 2;
/** Reads land in slabs of this size, each read in the slab's free tail (see readLoop). */
const READ_SLAB_BYTES = 1024 * 1024;
/** A read asks for at least this much room; a slab with less left is replaced by a fresh one. */
const READ_ROOM_BYTES_MIN = 64 * 1024;
/** Pause after a failed accept (EMFILE would otherwise spin). */
const ACCEPT_RETRY_MS = 10;
/** How long an ended connection waits for the peer to close before it is closed anyway. */
const END_LINGER_MS = 2000;

/** Listens on host:port with Deno.listen and feeds each accepted connection to `events`. */
export function denoListenTcp(
  events: ConnectionEvents,
  options: { host: string; port: number; tls?: TlsServerOptions },
): TcpListener {
  const tls = options.tls;
  if (tls?.clientCa !== undefined)
    throw new Error(
      "mutual TLS (a client CA) is not available under Deno: " +
        "Deno.listenTls cannot ask for client certificates; run Aria on Bun",
    );
  const address = { hostname: options.host, port: options.port, transport: "tcp" } as const;
  const listener: Deno.TcpListener | Deno.TlsListener =
    tls === undefined
      ? Deno.listen(address)
      : Deno.listenTls({ ...address, cert: tls.cert, key: tls.key });
  let stopped = false;
  void (async () => {
    for (;;) {
      let conn: Deno.TcpConn | Deno.TlsConn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (stopped) return;
        // A failed accept (EMFILE, a reset before accept) affects one connection, not the listener.
        if (error instanceof Deno.errors.BadResource) return;
        await new Promise((resolve) => setTimeout(resolve, ACCEPT_RETRY_MS));
        continue;
      }
      let sessionId = 0;
      const socket = new DenoSocket(conn, {
        data: (bytes) => events.receive(sessionId, bytes),
        drain: () => events.writable(sessionId),
        close: () => events.closed(sessionId),
      });
      sessionId = events.open(socket.connection());
      socket.start();
    }
  })();
  return {
    host: listener.addr.hostname,
    port: listener.addr.port,
    stop: () => {
      if (stopped) return;
      stopped = true;
      listener.close();
    },
  };
}

/** The Deno implementation of Dialer: a failed connect rejects and reports nothing else. */
export const denoDialTcp: Dialer = async (host, port, handlers, options) => {
  const tls = options?.tls;
  let conn: Deno.TcpConn | Deno.TlsConn;
  if (tls === undefined) {
    conn = await Deno.connect({ hostname: host, port, transport: "tcp" });
  } else {
    conn = await Deno.connectTls({
      hostname: host,
      port,
      caCerts: tls.ca === undefined ? undefined : [tls.ca],
      cert: tls.cert,
      key: tls.key,
    });
    try {
      await conn.handshake();
    } catch (error) {
      conn.close();
      throw handshakeError(host, port, error);
    }
  }
  const socket = new DenoSocket(conn, {
    ...handlers,
    close: (error) => handlers.close(error && tls !== undefined ? tlsAlertError(error) : error),
  });
  socket.start();
  return socket.clientSocket();
};

/** One TCP connection with Bun-like synchronous writes (see the file comment). */
class DenoSocket {
  private queue: Uint8Array[] = [];
  private queuedBytes = 0;
  private pumping = false;
  private drainWanted = false;
  private ending = false;
  private closed = false;
  private paused = false;
  private resumeReading: (() => void) | null = null;

  constructor(
    private readonly conn: Deno.TcpConn | Deno.TlsConn,
    private readonly handlers: DialHandlers,
  ) {
    try {
      if ("setNoDelay" in conn) conn.setNoDelay(true);
    } catch {
      // not fatal: only latency
    }
  }

  /** Starts the read loop. */
  start(): void {
    void this.readLoop();
  }

  connection(): Connection {
    return {
      write: (bytes) => this.write(bytes),
      close: () => this.end(),
      pause: () => this.pause(),
      resume: () => this.resume(),
      remoteAddress: this.conn.remoteAddr.hostname,
    };
  }

  clientSocket(): ClientSocket {
    return {
      write: (bytes) => this.write(bytes),
      end: () => this.end(),
      pause: () => this.pause(),
      resume: () => this.resume(),
    };
  }

  private pause(): void {
    this.paused = true;
  }

  private resume(): void {
    this.paused = false;
    const resume = this.resumeReading;
    this.resumeReading = null;
    resume?.();
  }

  private write(bytes: Uint8Array): number {
    if (this.closed || this.ending) return 0;
    const taken = Math.min(bytes.length, SOCKET_QUEUE_BYTES_MAX - this.queuedBytes);
    if (taken < bytes.length) this.drainWanted = true;
    if (taken <= 0) return 0;
    this.queue.push(bytes.slice(0, taken));
    this.queuedBytes += taken;
    if (!this.pumping) void this.pump();
    return taken;
  }

  private end(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    if (!this.pumping) void this.pump();
  }

  /** Writes the queue out; then reports drain, or finishes an end(). */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const chunk =
          this.queue.length === 1 ? this.queue[0] : concat(this.queue, this.queuedBytes);
        this.queue = [];
        let offset = 0;
        while (offset < chunk.length) {
          const written = await this.conn.write(chunk.subarray(offset));
          offset += written;
          this.queuedBytes -= written;
          if (
            this.drainWanted &&
            this.queuedBytes <= SOCKET_QUEUE_DRAIN_BYTES &&
            !this.closed &&
            !this.ending
          ) {
            this.drainWanted = false;
            this.handlers.drain(); // may write: that only appends to the queue this loop drains
          }
        }
      }
    } catch (error) {
      this.finish(error as Error);
      return;
    } finally {
      this.pumping = false;
    }
    if (this.closed) return;
    if (this.ending) {
      await this.halfClose();
      return;
    }
    if (this.drainWanted) {
      this.drainWanted = false;
      this.handlers.drain();
    }
  }

  /** After end(): FIN to the peer, then wait (bounded) for its close on the read side. */
  private async halfClose(): Promise<void> {
    try {
      await this.conn.closeWrite();
    } catch {
      this.finish();
      return;
    }
    const timer = setTimeout(() => this.finish(), END_LINGER_MS);
    Deno.unrefTimer(timer);
  }

  private async readLoop(): Promise<void> {
    let slab = new Uint8Array(READ_SLAB_BYTES);
    let used = 0;
    try {
      for (;;) {
        if (this.paused && !this.ending)
          await new Promise<void>((resolve) => (this.resumeReading = resolve));
        if (this.closed) return;
        if (slab.length - used < READ_ROOM_BYTES_MIN) {
          slab = new Uint8Array(READ_SLAB_BYTES);
          used = 0;
        }
        const count = await this.conn.read(slab.subarray(used));
        if (count === null) break;
        const chunk = slab.subarray(used, used + count);
        used += count;
        // After end(), what the peer still sends is read only to see its close.
        if (!this.ending && !this.closed) this.handlers.data(chunk);
      }
      this.finish();
    } catch (error) {
      this.finish(this.ending ? undefined : (error as Error));
    }
  }

  /** Releases the connection and reports close, once. */
  private finish(error?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.queuedBytes = 0;
    try {
      this.conn.close();
    } catch {
      // already closed
    }
    const resume = this.resumeReading;
    this.resumeReading = null;
    resume?.();
    this.handlers.close(error);
  }
}

function concat(chunks: Uint8Array[], bytes: number): Uint8Array {
  const joined = new Uint8Array(bytes);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}
