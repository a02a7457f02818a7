/**
 * client: the TypeScript client of Aria. `connect("tcp://127.0.0.1:7400")` returns an AriaClient:
 * `publish(topic, payload)` resolves to the seq, `subscribe(filter, { from })` is an async
 * iterator with back-pressure (per message, or per DATA frame with `batches()` / `frames()`); the
 * client reconnects and resumes without gap or duplicate.
 */
import { runtime } from "../runtime/current_runtime.ts";
import { AriaClient, type ClientOptions } from "./client.ts";

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
export type { ClientSocket, DialHandlers, Dialer } from "./dialer.ts";
export type { MessageBatch } from "../protocol/message_batch.ts";

/** Connects to an Aria server at `url` (tcp://HOST:PORT) and completes the handshake. */
export function connect(url: string, options: ClientOptions = {}): Promise<AriaClient> {
  return AriaClient.connect(url, runtime.dialTcp, options);
}
