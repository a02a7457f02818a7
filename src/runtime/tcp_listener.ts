/**
 * TCP listener (Bun): connects Bun's sockets to the broker's events. Each accepted socket becomes a
 * session; bytes, drain and close become broker.receive / writable / closed. The broker never
 * sees a socket, only the Connection port (write what the kernel takes now, close).
 */
import type { Socket, TCPSocketListener } from "bun";
import type { Connection } from "../broker/ports.ts";
import type { ConnectionEvents, TcpListener } from "./runtime.ts";

interface SocketData {
  sessionId: number;
}

/** Listens on host:port (port 0 picks a free one) and feeds connections to `broker`. */
export function listenTcp(
  broker: ConnectionEvents,
  options: { host: string; port: number },
): TcpListener {
  const listener: TCPSocketListener<SocketData> = Bun.listen<SocketData>({
    hostname: options.host,
    port: options.port,
    socket: {
      open(socket) {
        socket.setNoDelay(true);
        socket.data = { sessionId: 0 };
        socket.data.sessionId = broker.open(connectionOf(socket));
      },
      data(socket, bytes) {
        broker.receive(socket.data.sessionId, bytes);
      },
      drain(socket) {
        broker.writable(socket.data.sessionId);
      },
      close(socket) {
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
  };
}
