/**
 * A PUBLISH's MQTT 5 properties as the log keeps them: the message's native properties bytes
 * (docs/protocol.md, PUBLISH flag 0x01), encoded as MQTT 5 encodes them — property identifier and
 * value, one after another — without the leading length. Kept: payload format, message expiry,
 * content type, response topic, correlation data and user properties; not the topic alias or
 * subscription identifiers, which belong to one connection. Pure.
 *
 * Properties written by a native client are opaque bytes to the server: ones that do not decode as
 * MQTT 5 PUBLISH properties are given to MQTT subscribers as none.
 */
import { Reader, vbiBytes, Writer } from "./codec_bytes.ts";
import type { Properties } from "./packets.ts";
import { readProperties, writeProperties } from "./properties.ts";

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
  if (properties.userProperties !== undefined && properties.userProperties.length > 0)
    kept.userProperties = properties.userProperties;
  return kept;
}

const EMPTY = new Uint8Array(0);

/** The log's bytes of a PUBLISH's kept properties (empty when it has none). */
export function encodeStoredProperties(properties: Properties): Uint8Array {
  const kept = keptProperties(properties);
  if (Object.keys(kept).length === 0) return EMPTY;
  const writer = new Writer(64);
  writeProperties(writer, kept, "publish");
  // finish() puts a type byte and the body's length in front; the body is length + properties.
  const packet = writer.finish(0);
  const reader = new Reader(packet, 1, packet.length);
  reader.vbi("body length");
  const length = reader.vbi("properties length");
  return packet.slice(reader.offset, reader.offset + length);
}

/** The MQTT properties of a message's native properties bytes (none when they do not decode). */
export function decodeStoredProperties(bytes: Uint8Array): Properties {
  if (bytes.length === 0) return {};
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
    return keptProperties(readProperties(new Reader(framed, 0, framed.length), "publish"));
  } catch {
    return {};
  }
}
