/**
 * node_dialer: the client's Dialer port (src/client/dialer.ts) on Node.js — node:net for tcp://,
 * node:tls for tls:// — so the pure client runs under Node ≥ 20 (the npm package
 * packages/client). The server never runs on it; Bun and Deno keep their own dialers
 * (tcp_dialer.ts, deno_tcp.ts).
 *
 * The socket semantics the client was written against, on a runtime whose sockets buffer:
 *
 * - `write(bytes)` returns the bytes taken now. Node's socket.write takes everything and queues
 *   what the kernel does not take, so a write is taken (copied: the client reuses its buffer)
 *   only while the socket's queue is under its high-water mark (`writableNeedDrain` false), and
 *   returns 0 otherwise; `drain` is reported on Node's 'drain', when that queue has emptied. What
 *   Node holds beyond the kernel is thus at most the high-water mark plus one write, and the
 *   client's own queue (its back-pressure) holds the rest.
 * - `pause()` stops the 'data' events; Node stops reading once its small readable buffer is full,
 *   so the server sees TCP back-pressure. Node gives each read a fresh buffer: a chunk handed to
 *   `data` is never overwritten.
 * - `end()` half-closes after what was written is flushed; the connection is released when the
 *   peer closes or after END_LINGER_MS. `close` is reported exactly once, whoever closed.
 * - A failed connect rejects the promise and reports nothing else. With `tls`, the promise
 *   resolves only on 'secureConnect', after node:tls verified the chain (against `ca`, else Node's
 *   CAs: its bundled ones and NODE_EXTRA_CA_CERTS), the expiry and the host name (an IP address
 *   against the certificate's IP SANs); a failure rejects it in words (tls.ts), never a plain
 *   connection instead.
 */
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { ClientSocket, DialTls, Dialer } from "../client/mod.ts";
import { handshakeError, reportClose } from "./tls.ts";

/** After end(), the connection is destroyed if the peer has not closed it by then. */
const END_LINGER_MS = 2000;

/** The Node.js implementation of Dialer. */
export const dialNode: Dialer = (host, port, handlers, options) =>
  new Promise<ClientSocket>((resolve, reject) => {
    const tls = options?.tls;
    const socket =
      tls === undefined ? netConnect({ host, port }) : tlsConnect(tlsOptions(host, port, tls));
    /** TCP connected: a failure from here on is the handshake's (with tls). */
    let tcpConnected = false;
    /** The promise resolved: failures from here on are closes. */
    let open = false;
    let closed = false;
    let answered = false;
    let failure: Error | undefined;
    const fail = (error: Error) => {
      closed = true;
      socket.destroy();
      reject(error);
    };
    socket.once("connect", () => {
      tcpConnected = true;
    });
    socket.once(tls === undefined ? "connect" : "secureConnect", () => {
      if (closed) return;
      open = true;
      socket.setNoDelay(true);
      resolve(nodeClientSocket(socket, () => closed));
    });
    socket.on("data", (bytes: Uint8Array) => {
      answered = true;
      handlers.data(bytes);
    });
    socket.on("drain", () => {
      if (!closed) handlers.drain();
    });
    socket.on("error", (error: Error) => {
      if (open) failure ??= error;
      else if (!closed)
        fail(tls !== undefined && tcpConnected ? handshakeError(host, port, error) : error);
    });
    socket.on("close", () => {
      if (!open) {
        if (!closed)
          fail(
            tls !== undefined && tcpConnected
              ? handshakeError(host, port, failure)
              : new Error(`connection to ${host}:${port} closed while it opened`),
          );
        return;
      }
      if (closed) return;
      closed = true;
      reportClose(handlers, tls, answered, failure);
    });
  });

/** The ClientSocket over a connected Node socket; `isClosed` says when writes take nothing. */
function nodeClientSocket(socket: Socket, isClosed: () => boolean): ClientSocket {
  return {
    write: (bytes) => {
      if (isClosed() || socket.destroyed || !socket.writable || socket.writableNeedDrain) return 0;
      // Copied: node queues the chunk itself, and the client reuses its frame buffer.
      socket.write(bytes.slice());
      return bytes.length;
    },
    end: () => {
      if (socket.destroyed) return;
      socket.end();
      setTimeout(() => socket.destroy(), END_LINGER_MS).unref();
    },
    pause: () => {
      socket.pause();
    },
    resume: () => {
      socket.resume();
    },
  };
}

/**
 * node:tls options for `tls`: verification always on (whatever NODE_TLS_REJECT_UNAUTHORIZED
 * says); the host name checked by node's checkServerIdentity (an IP against IP SANs); SNI only
 * for a name (RFC 6066 forbids an IP address there).
 */
function tlsOptions(host: string, port: number, tls: DialTls) {
  return {
    host,
    port,
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    rejectUnauthorized: true,
    servername: isIP(host) === 0 ? host : undefined,
  };
}
