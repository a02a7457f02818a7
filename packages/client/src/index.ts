/**
 * The Aria client for Node.js (the npm package in packages/client): the pure client of
 * src/client/ bound to the Node dialer (src/runtime/node_dialer.ts) — what src/server/connect.ts
 * gives Bun and Deno users, for Node ≥ 20. This file is the package's entry; the build bundles it
 * to one ESM file and emits its declarations (scripts/build_client.ts). No code is copied.
 *
 * Not here: anything of the server; the client itself (src/client/).
 */
import { AriaClient, type ClientOptions } from "../../../src/client/mod.ts";
import { dialNode } from "../../../src/runtime/node_dialer.ts";

export {
  AriaClient,
  ClientSubscription,
  parseTcpUrl,
  startPositionOf,
  type ClientOptions,
  type ClientSocket,
  type ConnectionEvent,
  type DialHandlers,
  type DialOptions,
  type DialTls,
  type Dialer,
  type Message,
  type MessageBatch,
  type PublishResult,
  type StartFrom,
  type SubscribeOptions,
} from "../../../src/client/mod.ts";
export {
  AriaError,
  ARIA_ERROR_WIRE_CODES,
  type AriaErrorCode,
} from "../../../src/protocol/mod.ts";
export { dialNode };

/**
 * Connects to an Aria server at `url` (tcp://HOST:PORT or tls://HOST:PORT) over node:net or
 * node:tls and completes the handshake.
 */
export function connect(url: string, options: ClientOptions = {}): Promise<AriaClient> {
  return AriaClient.connect(url, dialNode, options);
}
