/**
 * The WebSocket door on Deno's HTTP server: what web_socket_door.ts does on Bun's, through
 * Deno.upgradeWebSocket. Requests to the door's path go through the same checks (upgradeCheck:
 * Upgrade, the door's refusal, the subprotocol); an accepted one becomes a connection of the
 * door's events, binary messages its bytes in any split. The events never see a WebSocket.
 *
 * Back-pressure: the web WebSocket has no drain event. A write is refused (0 taken) while the
 * socket's bufferedAmount holds WEB_SOCKET_BUFFERED_BYTES_MAX; from the first refusal the door
 * looks at bufferedAmount every DRAIN_POLL_MS and calls `writable` once it is below the bound.
 * Invariants: `open` is called once the socket is open, before any `receive`; `closed` once, and
 * only after `open`. Call only under Deno.
 */
import type { Connection } from "../broker/ports.ts";
import {
  upgradeCheck,
  WEB_SOCKET_BUFFERED_BYTES_MAX,
  type WebSocketDoor,
} from "./web_socket_door.ts";

/** How often a refused writer's socket is looked at for room again. */
const DRAIN_POLL_MS = 2;

const encoder = new TextEncoder();

/**
 * Upgrades `request` when it is for `door`: the response that accepts or refuses it, or null
 * when it is not for the door (the app answers it).
 */
export function denoUpgradeWebSocket(
  door: WebSocketDoor,
  request: Request,
  remoteAddress: string | undefined,
): Response | null {
  const checked = upgradeCheck(door, request);
  if (checked !== "upgrade") return checked;
  let upgraded: { socket: WebSocket; response: Response };
  try {
    upgraded = Deno.upgradeWebSocket(request, { protocol: door.protocol });
  } catch {
    // Not a valid WebSocket handshake (no Sec-WebSocket-Key, no Connection: Upgrade): as Bun's.
    return new Response("WebSocket upgrade failed\n", { status: 400 });
  }
  const { socket, response } = upgraded;
  socket.binaryType = "arraybuffer";
  const events = door.events;
  let id: number | null = null;
  let polling: ReturnType<typeof setTimeout> | null = null;
  const pollDrain = () => {
    polling = null;
    if (id === null || socket.readyState !== WebSocket.OPEN) return;
    if (socket.bufferedAmount >= WEB_SOCKET_BUFFERED_BYTES_MAX)
      polling = setTimeout(pollDrain, DRAIN_POLL_MS);
    else events.writable(id);
  };
  const connection: Connection = {
    write: (bytes) => {
      if (socket.readyState !== WebSocket.OPEN) return 0;
      if (socket.bufferedAmount >= WEB_SOCKET_BUFFERED_BYTES_MAX) {
        polling ??= setTimeout(pollDrain, DRAIN_POLL_MS);
        return 0;
      }
      // The caller may reuse `bytes` once this returns, and send may keep a view until it is out.
      socket.send(bytes.slice());
      return bytes.length;
    },
    close: () => socket.close(),
    remoteAddress,
  };
  socket.onopen = () => {
    id = events.open(connection);
  };
  socket.onmessage = (event: MessageEvent) => {
    if (id === null) return;
    // Text frames are not MQTT; their bytes go on as they are and fail to decode there.
    const data = event.data;
    events.receive(
      id,
      typeof data === "string" ? encoder.encode(data) : new Uint8Array(data as ArrayBuffer),
    );
  };
  socket.onclose = () => {
    if (polling !== null) clearTimeout(polling);
    polling = null;
    if (id !== null) events.closed(id);
    id = null;
  };
  return response;
}
