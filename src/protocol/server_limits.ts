/**
 * serverLimits: the limits a server announces in WELCOME, read from src/constants.ts, so the broker
 * and the tests build WELCOME from one place.
 */
import {
  FILTER_ENTRIES_MAX,
  FRAME_BYTES_MAX,
  PAYLOAD_BYTES_MAX,
  PUBLISH_BATCH_MESSAGES_MAX,
  SUBSCRIPTIONS_PER_CONNECTION_MAX,
  TOPIC_BYTES_MAX,
} from "../constants.ts";
import type { ServerLimits } from "./frames.ts";

/** The limits of src/constants.ts as WELCOME carries them. */
export function serverLimits(): ServerLimits {
  return {
    frameBytesMax: FRAME_BYTES_MAX,
    payloadBytesMax: PAYLOAD_BYTES_MAX,
    publishBatchMessagesMax: PUBLISH_BATCH_MESSAGES_MAX,
    subscriptionsPerConnectionMax: SUBSCRIPTIONS_PER_CONNECTION_MAX,
    filterEntriesMax: FILTER_ENTRIES_MAX,
    topicBytesMax: TOPIC_BYTES_MAX,
  };
}
