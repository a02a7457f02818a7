/**
 * TCP listener (Bun): connects Bun's sockets to the broker's events. Each accepted socket becomes a
 * session; bytes, drain and close become broker.receive / writable / closed. The broker never
 * sees a socket, only the Connection port (write what the kernel takes now, close).
 *
 * With `tls`, Bun's native TLS (the `tls` option of Bun.listen) wraps each socket: the broker
 * still sees plaintext. With `tls.clientCa`, a client without a certificate signed by it fails the
 * handshake (Bun closes it); an accepted one's subject becomes Connection.peerSubject once the
 * handshake completed, which is before the client's first byte (its HELLO) arrives.
 */
import type { Socket, TCPSocketListener } from "bun";
import type { Connection } from "../broker/ports.ts";
import type { ConnectionEvents, TcpListener } from "./runtime.ts";
import { type SubjectFields, subjectText, type TlsServerOptions } from "./tls.ts";

interface SocketData {
  sessionId: number;
  /** The client certificate's subject (mutual TLS), once the handshake completed. */
  peerSubject?: string;
}

/** Connections this process's listeners saw close (garbage_hint.ts: what a burst freed). */
let closedCount = 0;

/** Connections this process's listeners saw close since it started. */
export function connectionsClosed(): number {
  return closedCount;
}

/** Listens on host:port (port 0 picks a free one) and feeds connections to `broker`. */
export function listenTcp(
  broker: ConnectionEvents,
  options: { host: string; port: number; tls?: TlsServerOptions },
): TcpListener {
  const tls = options.tls;
  const mutual = tls?.clientCa !== undefined;
  const listener: TCPSocketListener<SocketData> = Bun.listen<SocketData>({
    hostname: options.host,
    port: options.port,
    tls:
      tls === undefined
        ? undefined
        : {
            cert: tls.cert,
            key: tls.key,
            ...(mutual ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
          },
    socket: {
      open(socket) {
        socket.setNoDelay(true);
        socket.data = { sessionId: 0 };
        socket.data.sessionId = broker.open(connectionOf(socket));
      },
      handshake(socket, success, authorizationError) {
        if (!mutual) return;
        // rejectUnauthorized has Bun close an unverified client; never let one through regardless.
        if (!success || authorizationError !== null) {
          socket.end();
          return;
        }
        const subject = socket.getPeerCertificate()?.subject as SubjectFields | undefined;
        if (subject !== undefined) socket.data.peerSubject = subjectText(subject);
      },
      data(socket, bytes) {
        broker.receive(socket.data.sessionId, bytes);
      },
      drain(socket) {
        broker.writable(socket.data.sessionId);
      },
      close(socket) {
        closedCount++;
        broker.closed(socket.data.sessionId);
      },
      error(socket) {
        broker.closed(socket.data.sessionId);
      },
    },
  });
  return {
    host: listener.hostname,
    port: listener.port,
    stop: () => listener.stop(false),
  };
}

function connectionOf(socket: Socket<SocketData>): Connection {
  return {
    write: (bytes) => Math.max(0, socket.write(bytes)),
    close: () => {
      socket.end();
    },
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    remoteAddress: socket.remoteAddress,
    get peerSubject() {
      return socket.data.peerSubject;
    },
  };
}
