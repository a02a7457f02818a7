/** broker: the server's state machine (pure), its stages, and the ports it is handed. */
export {
  Broker,
  type BrokerOptions,
  type BrokerStats,
  type SubscriptionLag,
  RECOVERY_SECONDS_BOUNDS,
} from "./broker.ts";
export type { LatestEntry, LatestMessage } from "./latest.ts";
export {
  Consumer,
  type ConsumerInfo,
  ConsumerRegistry,
} from "./consumer_registry.ts";
export type {
  BrokerStore,
  Clock,
  Connection,
  ConsumerRecord,
  ConsumerStore,
  Scheduler,
  StoredMessageLike,
} from "./ports.ts";
export { Session } from "./session.ts";
export { Phase, type SubscriberSession, Subscription } from "./subscription.ts";
