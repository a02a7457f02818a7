/**
 * TCP dialer: opens a client connection with Bun.connect and hands the client library a small
 * socket it can write to, pause and resume — the Bun implementation of the client's Dialer port
 * (src/client/dialer.ts). The client itself never touches Bun.
 *
 * With `tls`, Bun's native TLS (the `tls` option of Bun.connect) verifies the server's chain
 * (against `ca`, else the system's CAs and Bun's bundled ones), its expiry and its host name —
 * an IP address against the certificate's IP SANs. Bun reports the outcome in `handshake` and
 * then closes a failed connection; the dialer's promise waits for it, so a failure rejects it
 * with the reason in words (tls.ts) and is never reported as a close.
 */
import type { Socket } from "bun";
import { getCACertificates } from "node:tls";
import type { DialTls, Dialer } from "../client/mod.ts";
import { handshakeError, reportClose } from "./tls.ts";

/** The Bun implementation of Dialer. */
export const dialTcp: Dialer = async (host, port, handlers, options) => {
  const tls = options?.tls;
  let closed = false;
  let answered = false;
  /** Set while a TLS handshake is under way: its outcome settles the dial. */
  let handshake: { resolve(): void; reject(error: Error): void } | null = null;
  const handshaken =
    tls === undefined
      ? null
      : new Promise<void>((resolve, reject) => {
          handshake = { resolve, reject };
        });
  const close = (error?: Error) => {
    if (closed) return;
    closed = true;
    if (handshake !== null) {
      // Before the handshake completed, a close is a failed connect: the promise says it.
      handshake.reject(handshakeError(host, port, error));
      handshake = null;
      return;
    }
    reportClose(handlers, tls, answered, error);
  };
  const socket: Socket<undefined> = await Bun.connect({
    hostname: host,
    port,
    tls: tls === undefined ? undefined : bunClientTls(host, tls),
    socket: {
      handshake: (_socket, success, error) => {
        const pending = handshake;
        handshake = null;
        if (success && error === null) pending?.resolve();
        else pending?.reject(handshakeError(host, port, error));
      },
      data: (_socket, bytes) => {
        answered = true;
        handlers.data(bytes);
      },
      drain: () => handlers.drain(),
      close: () => close(),
      error: (_socket, error) => close(error),
      // A failed connect is reported once, by Bun.connect's rejected promise. Reporting it as a
      // close too made every failed reconnect attempt start one more reconnect loop (a socket storm).
      connectError: () => {
        closed = true;
      },
    },
  });
  if (handshaken !== null) {
    try {
      await handshaken;
    } catch (error) {
      closed = true;
      socket.end();
      throw error;
    }
  }
  socket.setNoDelay(true);
  return {
    write: (bytes) => (closed ? 0 : Math.max(0, socket.write(bytes))),
    end: () => {
      socket.end();
    },
    pause: () => socket.pause(),
    resume: () => socket.resume(),
  };
};

/**
 * Bun.connect's `tls` for `tls`: verification always on (whatever NODE_TLS_REJECT_UNAUTHORIZED
 * says); without `ca`, the system's CAs beside Bun's bundled ones ("default").
 */
function bunClientTls(host: string, tls: DialTls) {
  return {
    ca: tls.ca ?? defaultCas(),
    cert: tls.cert,
    key: tls.key,
    rejectUnauthorized: true,
    serverName: host,
  };
}

let defaultCaList: string[] | null = null;

/** The system's CAs and Bun's bundled ones, read once. */
function defaultCas(): string[] {
  defaultCaList ??= getCACertificates("default");
  return defaultCaList;
}
