/**
 * Test support: our packets as `mqtt-packet` objects and back, its parser, and which packets it
 * cannot represent exactly. For the cross-check and fuzz tests; not shipped code.
 */
import mqttPacket from "mqtt-packet";
import { CONNACK_V4_TO_V5 } from "./codec_parse.ts";
import type { Packet, Properties, ProtocolVersion, UserProperty } from "./packets.ts";
import { PROPERTY_SPECS } from "./properties.ts";

// biome-ignore lint/suspicious/noExplicitAny: mqtt-packet objects.
export type Loose = Record<string, any>;

const buffer = (bytes: Uint8Array) => Buffer.from(bytes);

/** User properties grouped by name, as mqtt-packet's object form keeps them. */
export function grouped(pairs: readonly UserProperty[]): UserProperty[] {
  // An object's keys iterate integer-like names first: the order mqtt-packet writes them in.
  const values: Record<string, string[]> = {};
  for (const [name, value] of pairs) (values[name] ??= []).push(value);
  return Object.keys(values).flatMap((name) => values[name].map((value) => [name, value] as const));
}

export function toLooseProperties(properties: Properties): Loose | undefined {
  const loose: Loose = {};
  // In identifier order, the order our encoder writes (mqtt-packet writes in key order).
  for (const { key } of PROPERTY_SPECS) {
    const value = properties[key];
    if (value === undefined) continue;
    if (key === "userProperties") {
      const object: Loose = {};
      for (const [name, text] of value as UserProperty[]) {
        const existing = object[name];
        object[name] = existing === undefined ? text : [existing, text].flat();
      }
      loose.userProperties = object;
    } else if (key === "subscriptionIdentifiers") {
      const ids = value as number[];
      loose.subscriptionIdentifier = ids.length === 1 ? ids[0] : ids;
    } else if (key === "maximumQos") loose.maximumQoS = value;
    else if (key === "payloadFormatIndicator") loose.payloadFormatIndicator = value === 1;
    else if (value instanceof Uint8Array) loose[key] = buffer(value);
    else loose[key] = value;
  }
  return Object.keys(loose).length === 0 ? undefined : loose;
}

export function fromLooseProperties(loose: Loose | undefined): Properties {
  const properties: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(loose ?? {})) {
    if (key === "userProperties") {
      properties.userProperties = Object.entries(value as Loose).flatMap(([name, text]) =>
        [text].flat().map((one) => [name, String(one)] as const),
      );
    } else if (key === "subscriptionIdentifier") {
      properties.subscriptionIdentifiers = [value].flat();
    } else if (key === "maximumQoS") properties.maximumQos = value;
    else if (key === "payloadFormatIndicator") properties.payloadFormatIndicator = value ? 1 : 0;
    else if (Buffer.isBuffer(value)) properties[key] = new Uint8Array(value);
    else properties[key] = value;
  }
  return properties as Properties;
}

/** Our packet as mqtt-packet's object. */
export function toLoose(packet: Packet, version: ProtocolVersion): Loose {
  const properties =
    "properties" in packet && version === 5 ? toLooseProperties(packet.properties) : undefined;
  switch (packet.type) {
    case "connect": {
      const loose: Loose = {
        cmd: "connect",
        protocolId: packet.mqtt31 === true ? "MQIsdp" : "MQTT",
        protocolVersion: packet.mqtt31 === true ? 3 : version,
        clientId: packet.clientId,
        clean: packet.cleanStart,
        keepalive: packet.keepAlive,
        properties,
      };
      if (packet.username !== undefined) loose.username = packet.username;
      if (packet.password !== undefined) loose.password = buffer(packet.password);
      if (packet.will !== undefined) {
        loose.will = {
          topic: packet.will.topic,
          payload: buffer(packet.will.payload),
          qos: packet.will.qos,
          retain: packet.will.retain,
          properties: version === 5 ? toLooseProperties(packet.will.properties) : undefined,
        };
      }
      return loose;
    }
    case "connack": {
      const code = version === 5 ? packet.reasonCode : CONNACK_V4_TO_V5.indexOf(packet.reasonCode);
      const key = version === 5 ? "reasonCode" : "returnCode";
      return { cmd: "connack", sessionPresent: packet.sessionPresent, [key]: code, properties };
    }
    case "publish":
      return {
        cmd: "publish",
        topic: packet.topic,
        payload: buffer(packet.payload),
        qos: packet.qos,
        retain: packet.retain,
        dup: packet.dup,
        messageId: packet.packetId,
        properties,
      };
    case "puback":
    case "pubrec":
    case "pubrel":
    case "pubcomp":
      return {
        cmd: packet.type,
        messageId: packet.packetId,
        reasonCode: packet.reasonCode,
        properties,
      };
    case "subscribe":
      return {
        cmd: "subscribe",
        messageId: packet.packetId,
        subscriptions: packet.subscriptions.map((s) =>
          version === 5
            ? {
                topic: s.filter,
                qos: s.qos,
                nl: s.noLocal,
                rap: s.retainAsPublished,
                rh: s.retainHandling,
              }
            : { topic: s.filter, qos: s.qos },
        ),
        properties,
      };
    case "suback":
    case "unsuback":
      return {
        cmd: packet.type,
        messageId: packet.packetId,
        granted: packet.reasonCodes,
        properties,
      };
    case "unsubscribe":
      return {
        cmd: "unsubscribe",
        messageId: packet.packetId,
        unsubscriptions: packet.filters,
        properties,
      };
    case "pingreq":
    case "pingresp":
      return { cmd: packet.type };
    case "disconnect":
    case "auth":
      return { cmd: packet.type, reasonCode: packet.reasonCode, properties };
  }
}

/** mqtt-packet's parsed object as our packet. */
export function fromLoose(loose: Loose, version: ProtocolVersion): Packet {
  const properties = fromLooseProperties(loose.properties);
  switch (loose.cmd) {
    case "connect": {
      const packet: Loose = {
        type: "connect",
        protocolVersion: loose.protocolVersion === 3 ? 4 : loose.protocolVersion,
        ...(loose.protocolVersion === 3 ? { mqtt31: true } : {}),
        clientId: loose.clientId,
        cleanStart: loose.clean,
        keepAlive: loose.keepalive,
        properties,
      };
      if (loose.username !== undefined) packet.username = loose.username;
      if (loose.password !== undefined) packet.password = new Uint8Array(loose.password);
      if (loose.will) {
        packet.will = {
          topic: loose.will.topic,
          payload: new Uint8Array(loose.will.payload),
          qos: loose.will.qos,
          retain: loose.will.retain,
          properties: fromLooseProperties(loose.will.properties),
        };
      }
      return packet as Packet;
    }
    case "connack":
      return {
        type: "connack",
        sessionPresent: loose.sessionPresent,
        reasonCode: version === 5 ? loose.reasonCode : CONNACK_V4_TO_V5[loose.returnCode],
        properties,
      };
    case "publish": {
      const packet: Loose = {
        type: "publish",
        topic: loose.topic,
        payload: new Uint8Array(loose.payload),
        qos: loose.qos,
        retain: loose.retain,
        dup: loose.dup,
        properties,
      };
      if (loose.qos > 0) packet.packetId = loose.messageId;
      return packet as Packet;
    }
    case "puback":
    case "pubrec":
    case "pubrel":
    case "pubcomp":
      return {
        type: loose.cmd,
        packetId: loose.messageId,
        reasonCode: loose.reasonCode ?? 0,
        properties,
      };
    case "subscribe":
      return {
        type: "subscribe",
        packetId: loose.messageId,
        subscriptions: loose.subscriptions.map((s: Loose) => ({
          filter: s.topic,
          qos: s.qos,
          noLocal: s.nl ?? false,
          retainAsPublished: s.rap ?? false,
          retainHandling: s.rh ?? 0,
        })),
        properties,
      };
    case "suback":
    case "unsuback":
      return {
        type: loose.cmd,
        packetId: loose.messageId,
        reasonCodes: loose.granted ?? [],
        properties,
      };
    case "unsubscribe":
      return {
        type: "unsubscribe",
        packetId: loose.messageId,
        filters: loose.unsubscriptions,
        properties,
      };
    case "pingreq":
    case "pingresp":
      return { type: loose.cmd };
    default:
      return { type: loose.cmd, reasonCode: loose.reasonCode ?? 0, properties };
  }
}

/** Our packet with user properties grouped by name (mqtt-packet's object form reorders them). */
export function normalised(packet: Packet): Packet {
  const fix = (properties: Properties): Properties =>
    properties.userProperties === undefined
      ? properties
      : { ...properties, userProperties: grouped(properties.userProperties) };
  const copy = structuredClone(packet) as Loose;
  if ("properties" in packet) copy.properties = fix(packet.properties);
  if (packet.type === "connect" && packet.will !== undefined) {
    copy.will = { ...copy.will, properties: fix(packet.will.properties) };
  }
  return copy as Packet;
}

export function mqttPacketParse(bytes: Uint8Array, version: ProtocolVersion): Loose[] {
  const parser = mqttPacket.parser({ protocolVersion: version });
  const packets: Loose[] = [];
  const errors: Error[] = [];
  parser.on("packet", (packet: Loose) => packets.push(packet));
  parser.on("error", (error: Error) => errors.push(error));
  parser.parse(Buffer.from(bytes));
  if (errors.length > 0) throw errors[0];
  return packets;
}

/** Packets mqtt-packet cannot generate or parse exactly, left out of the cross-check. */
export function representable(packet: Packet): boolean {
  if (packet.type === "connect") {
    // MQTT 5 allows an empty client id without clean start (3.1.3.1) and a password without a
    // user name (3.1.2.9); mqtt-packet's generator refuses both.
    if (packet.clientId === "" && !packet.cleanStart) return false;
    if (packet.password !== undefined && packet.username === undefined) return false;
  }
  // mqtt-packet's parser drops a repeated user property whose earlier value is "" (it tests
  // the value for truth, parser.js `if (result[name][currentUserProperty.name])`).
  const lists: (Properties | undefined)[] = [
    "properties" in packet ? packet.properties : undefined,
    packet.type === "connect" ? packet.will?.properties : undefined,
  ];
  for (const properties of lists) {
    const names = new Map<string, string>();
    for (const [name, value] of properties?.userProperties ?? []) {
      if (names.get(name) === "") return false;
      if (!names.has(name)) names.set(name, value);
    }
  }
  return true;
}
