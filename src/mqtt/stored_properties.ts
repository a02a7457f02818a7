/**
 * A PUBLISH's MQTT 5 properties as the log keeps them: the message's native properties bytes
 * (docs/protocol.md, PUBLISH flag 0x01), encoded as MQTT 5 encodes them — property identifier and
 * value, one after another — without the leading length. Kept: payload format, message expiry,
 * content type, response topic, correlation data and user properties; not the topic alias or
 * subscription identifiers, which belong to one connection. Pure.
 *
 * Properties written by a native client are opaque bytes to the server: ones that do not decode as
 * MQTT 5 PUBLISH properties are given to MQTT subscribers as none.
 *
 * The door's own user properties (reserved, docs/mqtt.md): `aria-qos` (`0` or `1`: the QoS the
 * message was published with; absent: 2, or not published over MQTT) and `aria-retain` (`1`: the
 * retain flag was set). Written last, read back and stripped before delivery to MQTT clients; a
 * client's own user properties named `aria-…` (any: `aria-seq` too) are dropped when it
 * publishes, and a native publisher's are not given to MQTT clients.
 *
 * Origin: the door writes `aria-origin` (16 hex digits: a 64-bit hash of the publishing client
 * id, `clientOrigin`) as the very last property, so a stored message ends in these 32 bytes:
 * 0x26 | u16 11 | "aria-origin" | u16 16 | hex. No Local compares it with the subscriber's
 * client id (any connection of it, before or after a restart) [MQTT-3.8.3-3]; it is taken out
 * before delivery like the others. Read from the tail without decoding the rest.
 */
import { Reader, vbiBytes, Writer } from "./codec_bytes.ts";
import type { Properties, QoS } from "./packets.ts";
import { readProperties, writeProperties } from "./properties.ts";

/** The door's user property naming a publish QoS of 0 or 1. */
export const ARIA_QOS = "aria-qos";
/** The door's user property saying the retain flag was set. */
export const ARIA_RETAIN = "aria-retain";
/** The door's user property naming the publishing client (clientOrigin), written last. */
export const ARIA_ORIGIN = "aria-origin";

/** A stored message as MQTT sees it: its properties and how it was published. */
export interface StoredMessage {
  /** The kept properties, without the door's own user properties. */
  properties: Properties;
  /** The QoS it was published with (2 when the message does not say). */
  qos: QoS;
  /** Its retain flag when published. */
  retain: boolean;
}

/** The origin of client id `clientId`: a 64-bit hash (two 32-bit FNV-1a) as 16 hex digits. */
export function clientOrigin(clientId: string): string {
  let a = 0x811c9dc5;
  let b = 0x811c9dc5 ^ 0x5bd1e995;
  for (let i = 0; i < clientId.length; i++) {
    const code = clientId.charCodeAt(i);
    a = Math.imul(a ^ code, 0x01000193) >>> 0;
    b = Math.imul(b ^ (code + 0x9e), 0x01000193) >>> 0;
  }
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0");
}

/** The origin property's bytes before its 16 hex digits. */
const ORIGIN_HEAD = Uint8Array.of(0x26, 0, 11, ...new TextEncoder().encode(ARIA_ORIGIN), 0, 16);
/** Bytes of the origin property at the end of a stored message's properties. */
const ORIGIN_BYTES = ORIGIN_HEAD.length + 16;

/** The origin property's bytes for `origin` (16 hex digits). */
function originTail(origin: string): Uint8Array {
  const tail = new Uint8Array(ORIGIN_BYTES);
  tail.set(ORIGIN_HEAD);
  for (let i = 0; i < 16; i++) tail[ORIGIN_HEAD.length + i] = origin.charCodeAt(i);
  return tail;
}

/** True when `bytes` end in an origin property (its head: any 16 bytes of origin after it). */
function hasOriginTail(bytes: Uint8Array): boolean {
  const at = bytes.length - ORIGIN_BYTES;
  if (at < 0) return false;
  for (let i = 0; i < ORIGIN_HEAD.length; i++) if (bytes[at + i] !== ORIGIN_HEAD[i]) return false;
  return true;
}

/**
 * A client's stored properties writer and No Local test: its origin property's bytes, and the
 * bytes of a publish with no properties of its own (per QoS and retain flag) made once.
 */
export class ClientOrigin {
  /** The origin property's bytes (the last of every message this client publishes). */
  readonly tail: Uint8Array;
  private readonly doorOnly: (Uint8Array | undefined)[] = [];

  constructor(clientId: string) {
    this.tail = originTail(clientOrigin(clientId));
  }

  /** encodeStoredProperties with this client's origin. */
  encode(properties: Properties, qos: QoS, retain: boolean): Uint8Array {
    const bytes = encodeWithoutOrigin(properties, qos, retain);
    const doorOnly = bytes === DOOR_ONLY[qos][retain ? 1 : 0];
    const key = qos * 2 + (retain ? 1 : 0);
    if (doorOnly) {
      const cached = this.doorOnly[key];
      if (cached !== undefined) return cached;
    }
    const joined = new Uint8Array(bytes.length + ORIGIN_BYTES);
    joined.set(bytes);
    joined.set(this.tail, bytes.length);
    if (doorOnly) this.doorOnly[key] = joined;
    return joined;
  }

  /** True when a stored message's properties say this client id published it (No Local). */
  published(bytes: Uint8Array): boolean {
    const at = bytes.length - ORIGIN_BYTES;
    if (at < 0) return false;
    for (let i = 0; i < ORIGIN_BYTES; i++) if (bytes[at + i] !== this.tail[i]) return false;
    return true;
  }
}

/** The properties of a PUBLISH that travel with its message. */
export function keptProperties(properties: Properties): Properties {
  const kept: Properties = {};
  if (properties.payloadFormatIndicator !== undefined)
    kept.payloadFormatIndicator = properties.payloadFormatIndicator;
  if (properties.messageExpiryInterval !== undefined)
    kept.messageExpiryInterval = properties.messageExpiryInterval;
  if (properties.contentType !== undefined) kept.contentType = properties.contentType;
  if (properties.responseTopic !== undefined) kept.responseTopic = properties.responseTopic;
  if (properties.correlationData !== undefined) kept.correlationData = properties.correlationData;
  const user = properties.userProperties?.filter(([name]) => !isAriaName(name));
  if (user !== undefined && user.length > 0) kept.userProperties = user;
  return kept;
}

/**
 * User properties whose name starts with `aria-` are Aria's (docs/mqtt.md): a publisher's are
 * not kept (a client's own `aria-seq` would come before the real one), nor given to MQTT clients.
 */
export function isAriaName(name: string): boolean {
  return name.startsWith("aria-");
}

const EMPTY = new Uint8Array(0);

/**
 * The log's bytes of a PUBLISH's kept properties, with its QoS and retain flag (as the door's
 * user properties, when not 2 and not 0) and its publisher's origin (last); empty when there is
 * nothing to keep.
 */
export function encodeStoredProperties(
  properties: Properties,
  qos: QoS = 2,
  retain = false,
  origin?: string,
): Uint8Array {
  const bytes = encodeWithoutOrigin(properties, qos, retain);
  if (origin === undefined) return bytes;
  // User properties are the last a PUBLISH's kept properties write: the origin, appended to
  // them, is the last bytes.
  const joined = new Uint8Array(bytes.length + ORIGIN_BYTES);
  joined.set(bytes);
  joined.set(originTail(origin), bytes.length);
  return joined;
}

function encodeWithoutOrigin(properties: Properties, qos: QoS, retain: boolean): Uint8Array {
  const kept = keptProperties(properties);
  if (Object.keys(kept).length === 0) return DOOR_ONLY[qos][retain ? 1 : 0];
  if (qos < 2 || retain) {
    const user = kept.userProperties === undefined ? [] : [...kept.userProperties];
    if (qos < 2) user.push([ARIA_QOS, String(qos)]);
    if (retain) user.push([ARIA_RETAIN, "1"]);
    kept.userProperties = user;
  }
  return encodeKept(kept);
}

function encodeKept(kept: Properties): Uint8Array {
  const writer = new Writer(64);
  writeProperties(writer, kept, "publish");
  // finish() puts a type byte and the body's length in front; the body is length + properties.
  const packet = writer.finish(0);
  const reader = new Reader(packet, 1, packet.length);
  reader.vbi("body length");
  const length = reader.vbi("properties length");
  return packet.slice(reader.offset, reader.offset + length);
}

/** The bytes of a message with no properties but the door's: [qos][retain]. */
const DOOR_ONLY: readonly (readonly [Uint8Array, Uint8Array])[] = ([0, 1, 2] as const).map(
  (qos) =>
    [false, true].map((retain) => {
      const user: [string, string][] = [];
      if (qos < 2) user.push([ARIA_QOS, String(qos)]);
      if (retain) user.push([ARIA_RETAIN, "1"]);
      return user.length === 0 ? EMPTY : encodeKept({ userProperties: user });
    }) as [Uint8Array, Uint8Array],
);

/**
 * A stored message's properties bytes as MQTT sees them (no properties when they do not decode):
 * the door's own user properties read and taken out.
 */
export function decodeStoredProperties(bytes: Uint8Array): StoredMessage {
  const end = hasOriginTail(bytes) ? bytes.length - ORIGIN_BYTES : bytes.length;
  if (end === 0) return { properties: {}, qos: 2, retain: false };
  // The common case, a message with no properties of its publisher's, needs no decoding.
  for (let qos = 0; qos < 3; qos++)
    for (let retain = 0; retain < 2; retain++)
      if (samePrefix(bytes, end, DOOR_ONLY[qos][retain]))
        return { properties: {}, qos: qos as QoS, retain: retain === 1 };
  return decodeWithoutOrigin(end === bytes.length ? bytes : bytes.subarray(0, end));
}

function decodeWithoutOrigin(bytes: Uint8Array): StoredMessage {
  const properties = decodeKept(bytes);
  let qos: QoS = 2;
  let retain = false;
  const user = properties.userProperties;
  if (user?.some(([name]) => isAriaName(name))) {
    for (const [name, value] of user) {
      if (name === ARIA_QOS && (value === "0" || value === "1")) qos = Number(value) as QoS;
      else if (name === ARIA_RETAIN && value === "1") retain = true;
    }
    const others = user.filter(([name]) => !isAriaName(name));
    if (others.length > 0) properties.userProperties = others;
    else delete properties.userProperties;
  }
  return { properties, qos, retain };
}

/** True when the first `end` bytes of `a` are `b` (not empty). */
function samePrefix(a: Uint8Array, end: number, b: Uint8Array): boolean {
  if (end !== b.length || end === 0) return false;
  for (let i = 0; i < end; i++) if (a[i] !== b[i]) return false;
  return true;
}

function decodeKept(bytes: Uint8Array): Properties {
  const framed = new Uint8Array(vbiBytes(bytes.length) + bytes.length);
  let at = 0;
  let rest = bytes.length;
  do {
    let byte = rest % 128;
    rest = Math.floor(rest / 128);
    if (rest > 0) byte |= 0x80;
    framed[at++] = byte;
  } while (rest > 0);
  framed.set(bytes, at);
  try {
    // Not keptProperties: it would drop the door's user properties, which the caller reads.
    const read = readProperties(new Reader(framed, 0, framed.length), "publish");
    const kept = keptProperties({ ...read, userProperties: undefined });
    if (read.userProperties !== undefined && read.userProperties.length > 0)
      kept.userProperties = read.userProperties;
    return kept;
  } catch {
    return {};
  }
}
