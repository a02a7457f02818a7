/**
 * TCP dialer: opens a client connection with Bun.connect and hands the client library a small
 * socket it can write to, pause and resume — the Bun implementation of the client's Dialer port
 * (src/client/dialer.ts). The client itself never touches Bun.
 */
import type { Socket } from "bun";
import type { Dialer } from "../client/mod.ts";

/** The Bun implementation of Dialer. */
export const dialTcp: Dialer = async (host, port, handlers) => {
  let closed = false;
  const close = (error?: Error) => {
    if (closed) return;
    closed = true;
    handlers.close(error);
  };
  const socket: Socket<undefined> = await Bun.connect({
    hostname: host,
    port,
    socket: {
      data: (_socket, bytes) => handlers.data(bytes),
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
