/**
 * A WebSocket door on Bun's HTTP server (Deno's is deno_web_socket.ts, with the same checks):
 * requests to one path with an Upgrade (and the expected subprotocol) become connections of a
 * ConnectionEvents (MQTT over WebSocket: the MQTT door at `/mqtt` of the admin port, subprotocol
 * `mqtt`). Binary messages are the stream's bytes in any
 * split; the events never see a WebSocket, only the Connection port. Back-pressure: a write is
 * refused (0 taken) while Bun's buffer for the socket holds WEB_SOCKET_BUFFERED_BYTES_MAX; Bun's
 * drain says when to write again.
 */
import type { Server, ServerWebSocket, WebSocketHandler } from "bun";
import type { Connection } from "../broker/ports.ts";
import type { ConnectionEvents } from "./runtime.ts";

/** Bytes Bun may buffer for one WebSocket before writes are refused (the events queue the rest). */
export const WEB_SOCKET_BUFFERED_BYTES_MAX = 256 * 1024;

/** A WebSocket endpoint of an HTTP server. */
export interface WebSocketDoor {
  /** The request path, e.g. `/mqtt`. */
  path: string;
  /** The subprotocol a client must offer (Sec-WebSocket-Protocol), e.g. `mqtt`. */
  protocol: string;
  events: ConnectionEvents;
  /** Why a request may not upgrade (the Host check of the app it shares a port with), or null. */
  refusal?: (request: Request) => string | null;
}

/** What Bun keeps per WebSocket of a door. */
export interface WebSocketData {
  connectionId: number;
  remoteAddress?: string;
}

/**
 * Whether `request` may upgrade to `door`: "upgrade" when it may, a Response when it was for the
 * door but is refused (no Upgrade 426, the refusal's 403, no subprotocol 400), null when it is not
 * for the door. Both runtimes' doors ask it first (this file for Bun, deno_web_socket.ts).
 */
export function upgradeCheck(door: WebSocketDoor, request: Request): Response | "upgrade" | null {
  if (new URL(request.url).pathname !== door.path) return null;
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket")
    return new Response(`${door.path} takes WebSocket connections only\n`, { status: 426 });
  const refusal = door.refusal?.(request) ?? null;
  if (refusal !== null) return new Response(`${refusal}\n`, { status: 403 });
  const offered = (request.headers.get("sec-websocket-protocol") ?? "")
    .split(",")
    .map((name) => name.trim());
  if (!offered.includes(door.protocol))
    return new Response(`${door.path} needs the WebSocket subprotocol "${door.protocol}"\n`, {
      status: 400,
    });
  return "upgrade";
}

/**
 * Upgrades `request` when it is for `door`: undefined when it was upgraded (Bun answers it), a
 * Response when it was for the door but refused, null when it is not for the door.
 */
export function upgradeWebSocket(
  door: WebSocketDoor,
  request: Request,
  server: Server<WebSocketData>,
): Response | undefined | null {
  const checked = upgradeCheck(door, request);
  if (checked !== "upgrade") return checked;
  const data: WebSocketData = {
    connectionId: 0,
    remoteAddress: server.requestIP(request)?.address,
  };
  const upgraded = server.upgrade(request, {
    data,
    headers: { "Sec-WebSocket-Protocol": door.protocol },
  });
  return upgraded ? undefined : new Response("WebSocket upgrade failed\n", { status: 400 });
}

/** Bun's websocket handler feeding `door.events`. */
export function webSocketHandler(door: WebSocketDoor): WebSocketHandler<WebSocketData> {
  const events = door.events;
  return {
    open(socket) {
      socket.binaryType = "uint8array";
      socket.data.connectionId = events.open(connectionOf(socket));
    },
    message(socket, message) {
      // Text frames are not MQTT; their bytes go on as they are and fail to decode there.
      const bytes = typeof message === "string" ? new TextEncoder().encode(message) : message;
      events.receive(socket.data.connectionId, bytes);
    },
    drain(socket) {
      events.writable(socket.data.connectionId);
    },
    close(socket) {
      events.closed(socket.data.connectionId);
    },
  };
}

function connectionOf(socket: ServerWebSocket<WebSocketData>): Connection {
  return {
    write: (bytes) => {
      if (socket.getBufferedAmount() >= WEB_SOCKET_BUFFERED_BYTES_MAX) return 0;
      const sent = socket.sendBinary(bytes);
      // -1: enqueued behind back-pressure (taken); 0: dropped (the socket is closing).
      return sent === 0 ? 0 : bytes.length;
    },
    close: () => socket.close(),
    remoteAddress: socket.data.remoteAddress,
  };
}
