/**
 * The durable consumers of persistent MQTT sessions: one per subscription, named
 *
 *   mqtt/<client>.<client hash>/<qos><filter hash>      e.g. mqtt/sensor_7.3f2a9c01b4d2/1a94c0e12f7b3
 *
 * `<client>` is the client id's first 16 characters with anything outside `[A-Za-z0-9_.:-]` as
 * `_` (for people reading `aria consumers ls`); the hashes (48 bits each, of the whole client id
 * and of the whole MQTT filter) make the name unique; the QoS lets a session found after a
 * restart grant its subscriptions again. A client's consumers share the prefix up to the second
 * `/`, which is how the door finds them. The consumer's filter is the subscription's Aria filter;
 * `mqttFilterOf` turns it back into the MQTT filter. Pure.
 */
import { CONSUMER_NAME_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { QoS } from "./packets.ts";
import { ariaTopicToMqtt } from "./topic_map.ts";

const READABLE_CHARS = 16;

/** A hash of `text` as 12 hex digits (two 32-bit FNV-1a of different offsets, 24 bits each). */
function hash48(text: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    a = Math.imul(a ^ code, 0x01000193) >>> 0;
    b = Math.imul(b ^ code, 0x01000193) >>> 0;
  }
  return (a >>> 8).toString(16).padStart(6, "0") + (b >>> 8).toString(16).padStart(6, "0");
}

/** The prefix of every consumer of client `clientId`'s session. */
export function sessionConsumerPrefix(clientId: string): string {
  const readable = clientId.slice(0, READABLE_CHARS).replace(/[^A-Za-z0-9_.:-]/g, "_");
  return `mqtt/${readable}.${hash48(clientId)}/`;
}

/** The consumer of client `clientId`'s subscription to MQTT filter `filter`, granted `qos`. */
export function sessionConsumerName(clientId: string, filter: string, qos: QoS): string {
  const name = `${sessionConsumerPrefix(clientId)}${qos}${hash48(filter)}`;
  assert(name.length <= CONSUMER_NAME_BYTES_MAX, "session consumer names fit");
  return name;
}

/**
 * The shared group of MQTT's `$share/GROUP/filter`: one per group and filter, whoever subscribes
 * (MQTT clients of any session; a native client may not use the name, the broker refuses it):
 * `$share/<group>.<group hash>/<filter hash>`.
 */
export function sharedConsumerName(group: string, filter: string): string {
  const readable = group.slice(0, READABLE_CHARS).replace(/[^A-Za-z0-9_.:-]/g, "_");
  const name = `$share/${readable}.${hash48(group)}/${hash48(filter)}`;
  assert(name.length <= CONSUMER_NAME_BYTES_MAX, "shared consumer names fit");
  return name;
}

/** The QoS a session consumer's name records (null: not a session consumer's name). */
export function qosOfConsumer(name: string): QoS | null {
  const last = name.slice(name.lastIndexOf("/") + 1);
  const qos = last.length === 13 ? Number(last[0]) : Number.NaN;
  return qos === 0 || qos === 1 || qos === 2 ? qos : null;
}

/** The MQTT filter of a one-entry Aria filter (`*` is `+`, `**` is `#`, levels unescaped). */
export function mqttFilterOf(entry: string): string {
  return entry
    .split("/")
    .map((level) => (level === "*" ? "+" : level === "**" ? "#" : ariaTopicToMqtt(level)))
    .join("/");
}
