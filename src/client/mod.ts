/**
 * client: the TypeScript client of Aria. `AriaClient.connect(url, dialer)` returns an AriaClient:
 * `publish(topic, payload)` resolves to the seq, `subscribe(filter, { from })` is an async
 * iterator with back-pressure (per message, or per DATA frame with `batches()` / `frames()`); the
 * client reconnects and resumes without gap or duplicate.
 *
 * Pure: the network comes in through the Dialer port (dialer.ts). `connect(url)`, the client on
 * this process's real TCP dialer, is assembled at the edge (src/server/connect.ts, exported by
 * the root mod.ts).
 */
export {
  AriaClient,
  parseTcpUrl,
  type ClientOptions,
  type ConnectionEvent,
  type PublishResult,
} from "./client.ts";
export {
  ClientSubscription,
  startPositionOf,
  type Message,
  type StartFrom,
  type SubscribeOptions,
} from "./client_subscription.ts";
export type { ClientSocket, DialHandlers, DialOptions, DialTls, Dialer } from "./dialer.ts";
export type { MessageBatch } from "../protocol/message_batch.ts";
