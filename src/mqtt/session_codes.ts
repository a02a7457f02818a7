/**
 * The MQTT session's constants and pure helpers: reason codes of native errors, the failures an
 * acknowledgement may carry, UTF-8 checks, where a subscription resumes. Split out of
 * mqtt_session.ts; no state, no I/O.
 */
import { PAYLOAD_BYTES_MAX, PROPERTIES_BYTES_MAX } from "../constants.ts";
import type { StartPosition } from "../protocol/mod.ts";
import { type Properties, REASON } from "./packets.ts";
import type { SentMessage, SubscriptionState } from "./session_types.ts";
import type { StoredMessage } from "./stored_properties.ts";

/** An empty payload (shared). */
export const EMPTY_PAYLOAD = new Uint8Array(0);
/** What a QoS 2 message in flight keeps once PUBRECed (PUBREL needs its packet id only). */
export const EMPTY_SENT: SentMessage = {
  seq: 0,
  topic: "",
  payload: EMPTY_PAYLOAD,
  properties: {},
  qos: 2,
  retain: false,
  retainFlag: false,
};

/** A message without properties (a native one): its subscription's QoS, no retain flag. */
export const NATIVE: StoredMessage = { properties: {}, qos: 2, retain: false };

/** The failure reason codes PUBACK and PUBREC may carry (MQTT 5, 3.4.2.1 and 3.5.2.1). */
export const PUBLISH_ACK_FAILURES: ReadonlySet<number> = new Set([
  REASON.UNSPECIFIED_ERROR,
  REASON.IMPLEMENTATION_SPECIFIC_ERROR,
  REASON.NOT_AUTHORIZED,
  REASON.TOPIC_NAME_INVALID,
  REASON.PACKET_IDENTIFIER_IN_USE,
  REASON.QUOTA_EXCEEDED,
  REASON.PAYLOAD_FORMAT_INVALID,
]);

/** The failure reason codes SUBACK may carry (MQTT 5, 3.9.3). */
export const SUBACK_FAILURES: ReadonlySet<number> = new Set([
  REASON.UNSPECIFIED_ERROR,
  REASON.IMPLEMENTATION_SPECIFIC_ERROR,
  REASON.NOT_AUTHORIZED,
  REASON.TOPIC_FILTER_INVALID,
  REASON.PACKET_IDENTIFIER_IN_USE,
  REASON.QUOTA_EXCEEDED,
  REASON.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED,
  REASON.SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED,
  REASON.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED,
]);

/** Why a message cannot be published natively (over PAYLOAD_BYTES_MAX or PROPERTIES_BYTES_MAX). */
export function nativeLimitProblem(payload: Uint8Array, properties: Uint8Array): string | null {
  if (payload.length > PAYLOAD_BYTES_MAX)
    return `payload of ${payload.length} bytes is over the limit of ${PAYLOAD_BYTES_MAX}`;
  if (properties.length > PROPERTIES_BYTES_MAX)
    return `properties of ${properties.length} bytes are over the limit of ${PROPERTIES_BYTES_MAX}`;
  return null;
}

/** UTF-8 encoder (shared). */
export const UTF8 = new TextEncoder();
const UTF8_STRICT = new TextDecoder("utf-8", { fatal: true });

/** `text` cut to at most `bytesMax` bytes of UTF-8, at a character boundary. */
export function cutUtf8(text: string, bytesMax: number): string {
  if (UTF8.encode(text).length <= bytesMax) return text;
  let cut = "";
  let bytes = 0;
  for (const char of text) {
    bytes += UTF8.encode(char).length;
    if (bytes > bytesMax) break;
    cut += char;
  }
  return cut;
}

/** True when `bytes` are valid UTF-8. */
export function isUtf8(bytes: Uint8Array): boolean {
  try {
    UTF8_STRICT.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Where a subscription goes on: the first seq its client did not process. */
export function resumeOf(state: SubscriptionState): StartPosition {
  if (state.positionSeq === 0) return state.start;
  let seq = state.positionSeq;
  for (const unprocessed of state.unprocessed) if (unprocessed < seq) seq = unprocessed;
  return { kind: "seq", seq };
}

/** The MQTT 5 reason code of a native error code. */
export function reasonOfError(code: string): number {
  switch (code) {
    case "ARIA_ERR_PERMISSION_DENIED":
    case "ARIA_ERR_AUTH_FAILED":
      return REASON.NOT_AUTHORIZED;
    case "ARIA_ERR_INVALID_TOPIC":
      return REASON.TOPIC_NAME_INVALID;
    case "ARIA_ERR_INVALID_FILTER":
      return REASON.TOPIC_FILTER_INVALID;
    case "ARIA_ERR_PAYLOAD_TOO_LARGE":
    case "ARIA_ERR_FRAME_TOO_LARGE":
      return REASON.PACKET_TOO_LARGE;
    case "ARIA_ERR_TOO_MANY_SUBSCRIPTIONS":
    case "ARIA_ERR_TOO_MANY_CONNECTIONS":
    case "ARIA_ERR_CONSUMERS_FULL":
      return REASON.QUOTA_EXCEEDED;
    case "ARIA_ERR_PROPERTIES_TOO_LARGE":
      return REASON.PACKET_TOO_LARGE;
    case "ARIA_ERR_SHUTTING_DOWN":
      return REASON.SERVER_SHUTTING_DOWN;
    case "ARIA_ERR_STORAGE_FAILED":
      return REASON.SERVER_UNAVAILABLE;
    default:
      return REASON.UNSPECIFIED_ERROR;
  }
}

/**
 * The CONNACK reason of a fatal error during sign-in: a refused credential is a bad user name or
 * password; no credential where one is needed is not authorized (3.1.1: return codes 4 and 5).
 */
export function connackOfError(code: string, credentialSent: boolean): number {
  switch (code) {
    case "ARIA_ERR_AUTH_FAILED":
      return credentialSent ? REASON.BAD_USER_NAME_OR_PASSWORD : REASON.NOT_AUTHORIZED;
    case "ARIA_ERR_TOO_MANY_CONNECTIONS":
      return REASON.QUOTA_EXCEEDED;
    case "ARIA_ERR_SHUTTING_DOWN":
      return REASON.SERVER_UNAVAILABLE;
    default:
      return REASON.UNSPECIFIED_ERROR;
  }
}

/** False when a message's expiry interval ran out; else sets what is left of it. */
export function expiryLeft(properties: Properties, timeUs: number, nowUs: number): boolean {
  const expiryS = properties.messageExpiryInterval;
  if (expiryS === undefined) return true;
  const leftS = expiryS - Math.floor((nowUs - timeUs) / 1e6);
  if (leftS <= 0) return false;
  properties.messageExpiryInterval = leftS;
  return true;
}
