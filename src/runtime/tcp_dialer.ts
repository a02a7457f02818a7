/**
 * TCP dialer: opens a client connection with Bun.connect and hands the client library a small
 * socket it can write to, pause and resume. The client itself never touches Bun.
 */
import type { Socket } from "bun";

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
