/**
 * Aria's public library API. Import from here, not from src/ folders: what is exported here is
 * what Aria promises to keep stable.
 */
export {
  Filter,
  FilterMatcher,
  TopicTable,
  partitionOf,
  validateTopic,
  type FilterEntry,
  type FilterParse,
} from "./src/topic/mod.ts";
export {
  Tip,
  type TipCursor,
  type TipOptions,
  type TipRead,
  type TipStats,
} from "./src/tip/mod.ts";
export {
  AriaClient,
  ClientSubscription,
  type ClientOptions,
  type ConnectionEvent,
  type Message,
  type MessageBatch,
  type PublishResult,
  type StartFrom,
  type SubscribeOptions,
} from "./src/client/mod.ts";
export {
  connect,
  startServer,
  type RunningServer,
  type ServerOptions,
} from "./src/server/mod.ts";
export { Store, type FsyncPolicy, type StoreOptions } from "./src/store/mod.ts";
export { AriaError, ARIA_ERROR_WIRE_CODES, type AriaErrorCode } from "./src/protocol/mod.ts";
