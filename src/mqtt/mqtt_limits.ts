/**
 * The MQTT door's limits, each with why. Kept beside the door rather than in src/constants.ts
 * because they bound only MQTT connections; the native limits (connections, subscriptions per
 * connection, payload bytes) apply to MQTT clients as well, through the broker session each one
 * is bridged onto (native_link.ts).
 */
import { PAYLOAD_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";

/**
 * Largest MQTT packet the server accepts (announced as Maximum Packet Size): one largest payload
 * plus a longest topic and properties; refused before its body is buffered (codec.ts).
 */
export const MQTT_PACKET_BYTES_MAX = PAYLOAD_BYTES_MAX + 128 * 1024;
/**
 * QoS 1 and 2 PUBLISHes a client may have unacknowledged by the server (announced as Receive
 * Maximum): each waits for its native PUBLISH_ACK (an fsync), so this is the publisher's pipeline.
 */
export const MQTT_RECEIVE_MAXIMUM = 1024;
/** QoS 1 and 2 PUBLISHes in flight to a 3.1.1 client, which cannot announce a Receive Maximum. */
export const MQTT_INFLIGHT_V4 = 1024;
/** Topic aliases a client may set (announced as Topic Alias Maximum): a small map per connection. */
export const MQTT_TOPIC_ALIASES_MAX = 64;
/**
 * Bytes of MQTT packets held for a client beyond what its socket took, and of messages waiting for
 * its in-flight window: past this the door takes no more DATA from the broker, whose subscriptions
 * then stop and keep a position, as for a slow native client.
 */
export const MQTT_HELD_BYTES_MAX = 256 * 1024;
/**
 * Retained messages a subscription reads at a time (payloads copied); the next batch is read once
 * the session takes more (MQTT_HELD_BYTES_MAX, the client's window).
 */
export const MQTT_RETAINED_BATCH = 64;
/** Packets a client may send after CONNECT before the server answered it (they wait for it). */
export const MQTT_EARLY_PACKETS_MAX = 256;
/**
 * Bytes of those packets held while a sign-in is verified (a users file's KDF takes a moment):
 * past this the client is not read until CONNACK, as the native door holds 256 KiB behind HELLO.
 */
export const MQTT_EARLY_BYTES_MAX = 256 * 1024;
/** A client's keep alive is enforced at 1.5 times its value (MQTT 3.1.1 3.1.2.10, 5.0 3.1.2.10). */
export const MQTT_KEEP_ALIVE_GRACE = 1.5;
/**
 * The longest keep alive the server grants (seconds; MQTT 5 Server Keep Alive): a client asking
 * for none or more gets this, so a half-open connection is found within 1.5 times it.
 */
export const MQTT_SERVER_KEEP_ALIVE_MAX_S = 1200;
/** Sessions kept for clients that are away (session expiry > 0): a bounded map of positions. */
export const MQTT_SESSIONS_MAX = 10_000;
/** A closing connection whose client does not read its last packet is ended after this. */
export const MQTT_CLOSING_LINGER_US = 2_000_000;
/** How long a will waits for its native PUBLISH_ACK before the session is ended anyway. */
export const MQTT_WILL_ACK_TIMEOUT_US = 10_000_000;
/**
 * Payload bytes a connection keeps of its QoS 1/2 messages in flight, so a resumed session sends
 * them again with their packet ids; past it, one in flight is not kept and comes again from the
 * log as a new PUBLISH (the window alone could hold 65,535 payloads of 1 MiB).
 */
export const MQTT_FLIGHT_KEPT_BYTES_MAX = 1024 * 1024;

assert(MQTT_HELD_BYTES_MAX >= 64 * 1024, "holds at least one write of the broker");
assert(MQTT_RECEIVE_MAXIMUM <= 65_535, "Receive Maximum is a two-byte integer");
