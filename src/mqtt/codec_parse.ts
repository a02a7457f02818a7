/**
 * Parses one whole MQTT packet's variable header and payload, for a known protocol version, into a
 * Packet, checking what the 3.1.1 and 5.0 specs require of each packet (reserved bits, QoS 3,
 * packet id 0, empty SUBSCRIBE, trailing bytes, 3.1.1's fixed lengths, ...). Every failure is a
 * PacketError with the spec's reason code. Not here: the fixed header (codec.ts checks its flags
 * and length before the body is buffered) and anything needing session state.
 */
import { fail, Reader, utf8Bytes } from "./codec_bytes.ts";
import {
  type ConnackPacket,
  type ConnectPacket,
  type Packet,
  type Properties,
  type ProtocolVersion,
  type QoS,
  REASON,
  type Subscription,
  type Will,
} from "./packets.ts";
import { type PropertyContext, readProperties } from "./properties.ts";

/** MQTT 3.1.1 CONNACK return codes as MQTT 5 reason codes (index = return code). */
export const CONNACK_V4_TO_V5: readonly number[] = [
  REASON.SUCCESS,
  REASON.UNSUPPORTED_PROTOCOL_VERSION,
  REASON.CLIENT_IDENTIFIER_NOT_VALID,
  REASON.SERVER_UNAVAILABLE,
  REASON.BAD_USER_NAME_OR_PASSWORD,
  REASON.NOT_AUTHORIZED,
];

/** The reason codes each packet may carry in MQTT 5 (section 2.4 and each packet's table). */
const VALID_REASONS: Readonly<Record<string, ReadonlySet<number>>> = {
  connack: new Set([
    0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8c, 0x90, 0x95, 0x97,
    0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9f,
  ]),
  puback: new Set([0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]),
  pubrec: new Set([0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]),
  pubrel: new Set([0x00, 0x92]),
  pubcomp: new Set([0x00, 0x92]),
  suback: new Set([0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8f, 0x91, 0x97, 0x9e, 0xa1, 0xa2]),
  unsuback: new Set([0x00, 0x11, 0x80, 0x83, 0x87, 0x8f, 0x91]),
  disconnect: new Set([
    0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8b, 0x8d, 0x8e, 0x8f, 0x90, 0x93, 0x94, 0x95,
    0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f, 0xa0, 0xa1, 0xa2,
  ]),
  auth: new Set([0x00, 0x18, 0x19]),
};

/** True when `code` is a reason code MQTT 5 allows in a `kind` packet. */
export function reasonCodeValid(kind: string, code: number): boolean {
  return VALID_REASONS[kind]?.has(code) ?? false;
}

function reasonCode(reader: Reader, kind: string): number {
  const code = reader.u8("reason code");
  if (!reasonCodeValid(kind, code)) {
    fail(REASON.PROTOCOL_ERROR, `reason code 0x${code.toString(16)} is not valid in ${kind}`);
  }
  return code;
}

/**
 * A non-zero packet identifier. The spec names no reason code for 0; as mosquitto does (and its
 * test suite expects), 0x81 in SUBSCRIBE and UNSUBSCRIBE, 0x82 in PUBLISH and acks.
 */
function packetId(reader: Reader, zeroCode: number = REASON.PROTOCOL_ERROR): number {
  const id = reader.u16("packet identifier");
  if (id === 0) fail(zeroCode, "packet identifier is 0");
  return id;
}

function properties(
  reader: Reader,
  version: ProtocolVersion,
  context: PropertyContext,
): Properties {
  return version === 5 ? readProperties(reader, context) : {};
}

function end(reader: Reader, what: string): void {
  if (reader.remaining() !== 0) {
    fail(REASON.MALFORMED_PACKET, `${what} has ${reader.remaining()} bytes after its end`);
  }
}

/** A topic name: non-empty (unless `emptyAllowed`), without wildcards [MQTT-3.3.2-2]. */
function topicName(reader: Reader, what: string, emptyAllowed: boolean): string {
  const topic = reader.utf8(what);
  if (topic.length === 0 && !emptyAllowed) fail(REASON.MALFORMED_PACKET, `${what} is empty`);
  if (topic.includes("+") || topic.includes("#")) {
    fail(REASON.MALFORMED_PACKET, `${what} contains a wildcard character`);
  }
  return topic;
}

/** The longest client identifier MQTT 3.1 allows, in bytes (its spec: 23 characters). */
export const MQTT31_CLIENT_ID_BYTES_MAX = 23;

/**
 * Parses CONNECT (the version comes from its own protocol level). MQTT 3.1 (`MQIsdp`, level 3) is
 * read as 3.1.1 and flagged `mqtt31`. Any other level than 4 or 5, or a wrong protocol name,
 * fails with 0x84, to be answered with CONNACK (3.1.1 return code 1).
 */
export function parseConnect(bytes: Uint8Array, start: number, end_: number): ConnectPacket {
  const reader = new Reader(bytes, start, end_);
  const name = reader.utf8("protocol name");
  const level = reader.u8("protocol level");
  const mqtt31 = name === "MQIsdp" && level === 3;
  if (!mqtt31 && (name !== "MQTT" || (level !== 4 && level !== 5))) {
    fail(
      REASON.UNSUPPORTED_PROTOCOL_VERSION,
      `protocol "${name}" level ${level} is not supported (only 3.1, 3.1.1 and 5.0)`,
    );
  }
  // MQTT 3.1 shares 3.1.1's wire format: it is read as 3.1.1, flagged.
  const version: ProtocolVersion = mqtt31 ? 4 : (level as ProtocolVersion);
  const flags = reader.u8("connect flags");
  if ((flags & 0x01) !== 0) fail(REASON.MALFORMED_PACKET, "connect flags: reserved bit is set");
  const cleanStart = (flags & 0x02) !== 0;
  const willFlag = (flags & 0x04) !== 0;
  const willQos = (flags >> 3) & 0x03;
  const willRetain = (flags & 0x20) !== 0;
  const passwordFlag = (flags & 0x40) !== 0;
  const usernameFlag = (flags & 0x80) !== 0;
  if (willQos === 3) fail(REASON.MALFORMED_PACKET, "connect flags: will QoS is 3");
  if (!willFlag && (willQos !== 0 || willRetain)) {
    fail(REASON.MALFORMED_PACKET, "connect flags: will QoS or retain set without a will");
  }
  if (version === 4 && passwordFlag && !usernameFlag) {
    fail(REASON.MALFORMED_PACKET, "connect flags: password without a user name (MQTT 3.1.1)");
  }
  const keepAlive = reader.u16("keep alive");
  const props = properties(reader, version, "connect");
  const clientId = reader.utf8("client identifier");
  if (version === 4 && clientId.length === 0 && !cleanStart) {
    fail(REASON.CLIENT_IDENTIFIER_NOT_VALID, "empty client identifier without clean session");
  }
  // MQTT 3.1 (3.1 CONNECT, Client Identifier): 1 to 23 characters, else return code 2.
  const idBytes = mqtt31 ? utf8Bytes(clientId).length : 0;
  if (mqtt31 && (idBytes === 0 || idBytes > MQTT31_CLIENT_ID_BYTES_MAX)) {
    fail(
      REASON.CLIENT_IDENTIFIER_NOT_VALID,
      `an MQTT 3.1 client identifier has 1 to ${MQTT31_CLIENT_ID_BYTES_MAX} bytes (${idBytes})`,
    );
  }
  const packet: ConnectPacket = {
    type: "connect",
    protocolVersion: version,
    ...(mqtt31 ? { mqtt31: true as const } : {}),
    clientId,
    cleanStart,
    keepAlive,
    properties: props,
  };
  if (willFlag) {
    const willProperties = properties(reader, version, "will");
    const topic = topicName(reader, "will topic", false);
    const will: Will = {
      topic,
      payload: reader.binary("will payload"),
      qos: willQos as QoS,
      retain: willRetain,
      properties: willProperties,
    };
    packet.will = will;
  }
  if (usernameFlag) packet.username = reader.utf8("user name");
  if (passwordFlag) packet.password = reader.binary("password");
  end(reader, "CONNECT");
  return packet;
}

/** Parses the body of any packet but CONNECT; `flags` is the fixed header's low nibble. */
export function parseBody(
  type: number,
  flags: number,
  bytes: Uint8Array,
  range: { start: number; end: number },
  version: ProtocolVersion,
): Packet {
  const reader = new Reader(bytes, range.start, range.end);
  switch (type) {
    case 2:
      return parseConnack(reader, version);
    case 3:
      return parsePublish(reader, flags, version);
    case 4:
    case 5:
    case 6:
    case 7:
      return parsePublishAck(reader, type, version);
    case 8:
      return parseSubscribe(reader, version);
    case 9:
      return parseSuback(reader, version);
    case 10:
      return parseUnsubscribe(reader, version);
    case 11:
      return parseUnsuback(reader, version);
    case 12:
    case 13:
      end(reader, type === 12 ? "PINGREQ" : "PINGRESP");
      return { type: type === 12 ? "pingreq" : "pingresp" };
    case 14:
      return parseDisconnectOrAuth(reader, "disconnect", version);
    case 15:
      return parseDisconnectOrAuth(reader, "auth", version);
    default:
      return fail(REASON.MALFORMED_PACKET, `packet type ${type} is reserved`);
  }
}

function parseConnack(reader: Reader, version: ProtocolVersion): ConnackPacket {
  const acknowledge = reader.u8("connect acknowledge flags");
  if ((acknowledge & 0xfe) !== 0) fail(REASON.MALFORMED_PACKET, "CONNACK: reserved flag bits set");
  let code = reader.u8("return code");
  if (version === 4) {
    if (code >= CONNACK_V4_TO_V5.length) {
      fail(REASON.PROTOCOL_ERROR, `CONNACK return code ${code} is reserved`);
    }
    code = CONNACK_V4_TO_V5[code];
  } else if (!reasonCodeValid("connack", code)) {
    fail(REASON.PROTOCOL_ERROR, `reason code 0x${code.toString(16)} is not valid in connack`);
  }
  const props = properties(reader, version, "connack");
  end(reader, "CONNACK");
  return {
    type: "connack",
    sessionPresent: acknowledge === 1,
    reasonCode: code,
    properties: props,
  };
}

function parsePublish(reader: Reader, flags: number, version: ProtocolVersion): Packet {
  const qos = ((flags >> 1) & 0x03) as QoS;
  const topic = topicName(reader, "topic name", version === 5);
  const id = qos > 0 ? packetId(reader) : undefined;
  const props = properties(reader, version, "publish");
  if (topic.length === 0 && props.topicAlias === undefined) {
    fail(REASON.PROTOCOL_ERROR, "PUBLISH has an empty topic name and no topic alias");
  }
  const packet: Packet = {
    type: "publish",
    topic,
    payload: reader.rest(),
    qos,
    retain: (flags & 0x01) !== 0,
    dup: (flags & 0x08) !== 0,
    properties: props,
  };
  if (id !== undefined) packet.packetId = id;
  return packet;
}

const ACK_KINDS = ["puback", "pubrec", "pubrel", "pubcomp"] as const;

function parsePublishAck(reader: Reader, type: number, version: ProtocolVersion): Packet {
  const kind = ACK_KINDS[type - 4];
  const id = packetId(reader);
  let code: number = REASON.SUCCESS;
  let props: Properties = {};
  if (version === 5 && reader.remaining() > 0) {
    code = reasonCode(reader, kind);
    if (reader.remaining() > 0) props = readProperties(reader, kind);
  }
  end(reader, kind.toUpperCase());
  return { type: kind, packetId: id, reasonCode: code, properties: props };
}

/**
 * A topic filter: non-empty, each `+` and `#` a whole level, `#` the last [MQTT-4.7.1-1,
 * MQTT-4.7.1-2]. A filter that breaks these is malformed (0x81), as mosquitto answers: 0x8F is for
 * a well-formed filter the server does not allow. `$share/` structure is topic_map.ts's (0x8F).
 */
function topicFilter(reader: Reader): string {
  const filter = reader.utf8("topic filter");
  if (filter.length === 0) fail(REASON.MALFORMED_PACKET, "topic filter is empty");
  if (filter.includes("+") || filter.includes("#")) {
    const levels = filter.split("/");
    for (let index = 0; index < levels.length; index++) {
      const level = levels[index];
      const wildcard = level === "+" || (level === "#" && index === levels.length - 1);
      if (!wildcard && (level.includes("+") || level.includes("#"))) {
        fail(REASON.MALFORMED_PACKET, `topic filter "${filter.slice(0, 64)}" misplaces a wildcard`);
      }
    }
  }
  return filter;
}

function parseSubscribe(reader: Reader, version: ProtocolVersion): Packet {
  const id = packetId(reader, REASON.MALFORMED_PACKET);
  const props = properties(reader, version, "subscribe");
  const subscriptions: Subscription[] = [];
  while (reader.remaining() > 0) {
    const filter = topicFilter(reader);
    const options = reader.u8("subscription options");
    const reserved = version === 5 ? 0xc0 : 0xfc;
    if ((options & reserved) !== 0) {
      fail(REASON.MALFORMED_PACKET, "subscription options: reserved bits are set");
    }
    const qos = options & 0x03;
    if (qos === 3) fail(REASON.MALFORMED_PACKET, "subscription options: QoS is 3");
    const retainHandling = (options >> 4) & 0x03;
    if (retainHandling === 3)
      fail(REASON.PROTOCOL_ERROR, "subscription options: retain handling 3");
    const noLocal = (options & 0x04) !== 0;
    if (noLocal && filter.startsWith("$share/")) {
      fail(REASON.PROTOCOL_ERROR, "no local is set on a shared subscription");
    }
    subscriptions.push({
      filter,
      qos: qos as QoS,
      noLocal,
      retainAsPublished: (options & 0x08) !== 0,
      retainHandling: retainHandling as 0 | 1 | 2,
    });
  }
  if (subscriptions.length === 0) {
    const code = version === 5 ? REASON.PROTOCOL_ERROR : REASON.MALFORMED_PACKET;
    fail(code, "SUBSCRIBE has no topic filter");
  }
  return { type: "subscribe", packetId: id, subscriptions, properties: props };
}

function parseSuback(reader: Reader, version: ProtocolVersion): Packet {
  const id = packetId(reader);
  const props = properties(reader, version, "suback");
  const reasonCodes: number[] = [];
  while (reader.remaining() > 0) {
    const code = reader.u8("return code");
    const valid = version === 5 ? reasonCodeValid("suback", code) : code <= 2 || code === 0x80;
    if (!valid)
      fail(REASON.PROTOCOL_ERROR, `SUBACK return code 0x${code.toString(16)} is not valid`);
    reasonCodes.push(code);
  }
  return { type: "suback", packetId: id, reasonCodes, properties: props };
}

function parseUnsubscribe(reader: Reader, version: ProtocolVersion): Packet {
  const id = packetId(reader, REASON.MALFORMED_PACKET);
  const props = properties(reader, version, "unsubscribe");
  const filters: string[] = [];
  while (reader.remaining() > 0) filters.push(topicFilter(reader));
  if (filters.length === 0) {
    const code = version === 5 ? REASON.PROTOCOL_ERROR : REASON.MALFORMED_PACKET;
    fail(code, "UNSUBSCRIBE has no topic filter");
  }
  return { type: "unsubscribe", packetId: id, filters, properties: props };
}

function parseUnsuback(reader: Reader, version: ProtocolVersion): Packet {
  const id = packetId(reader);
  const props = properties(reader, version, "unsuback");
  const reasonCodes: number[] = [];
  if (version === 5)
    while (reader.remaining() > 0) reasonCodes.push(reasonCode(reader, "unsuback"));
  end(reader, "UNSUBACK");
  return { type: "unsuback", packetId: id, reasonCodes, properties: props };
}

function parseDisconnectOrAuth(
  reader: Reader,
  kind: "disconnect" | "auth",
  version: ProtocolVersion,
): Packet {
  let code: number = REASON.SUCCESS;
  let props: Properties = {};
  if (version === 5 && reader.remaining() > 0) {
    code = reasonCode(reader, kind);
    if (reader.remaining() > 0) props = readProperties(reader, kind);
  }
  end(reader, kind.toUpperCase());
  return { type: kind, reasonCode: code, properties: props };
}
