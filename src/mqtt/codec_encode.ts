/**
 * The MQTT encoder: any Packet to its bytes, for MQTT 3.1.1 or 5.0. For 3.1.1 it drops what the
 * version lacks, as the spec has it: properties, the reason codes of acks, UNSUBACK and
 * DISCONNECT; CONNACK's reason code becomes a 3.1.1 return code and a SUBACK failure 0x80. MQTT 5
 * acks and DISCONNECT use their short forms when the reason is success and there are no
 * properties. Values out of range (packet id 0, AUTH in 3.1.1) are bugs: asserted.
 */
import { assert } from "../stdx/assert.ts";
import { Writer } from "./codec_bytes.ts";
import {
  type ConnectPacket,
  type MqttDecodeError,
  type Packet,
  PACKET_TYPES,
  type Properties,
  type ProtocolVersion,
  REASON,
} from "./packets.ts";
import { type PropertyContext, writeProperties } from "./properties.ts";

/** An MQTT 5 CONNACK reason code as a 3.1.1 return code (other failures: server unavailable). */
export function connackReturnCodeV4(reasonCode: number): number {
  switch (reasonCode) {
    case REASON.SUCCESS:
      return 0;
    case REASON.UNSUPPORTED_PROTOCOL_VERSION:
      return 1;
    case REASON.CLIENT_IDENTIFIER_NOT_VALID:
      return 2;
    case REASON.BAD_USER_NAME_OR_PASSWORD:
    case REASON.BAD_AUTHENTICATION_METHOD:
      return 4;
    case REASON.NOT_AUTHORIZED:
    case REASON.BANNED:
      return 5;
    default:
      return 3;
  }
}

/**
 * Whether a CONNECT the decoder refused is answered with CONNACK before the connection closes.
 * MQTT 5: yes, with the reason code (3.1.4: a server MAY send CONNACK 0x80 or above). MQTT 3.1.1
 * has return codes for an unacceptable protocol version (1) and a rejected identifier (2) only;
 * any other malformed CONNECT is closed without one, as mosquitto does. No known version: closed.
 */
export function connackAnswersRefusedConnect(error: MqttDecodeError): boolean {
  if (error.packetType !== PACKET_TYPES.connect || error.protocolVersion === null) return false;
  if (error.protocolVersion === 5) return true;
  return (
    error.reasonCode === REASON.UNSUPPORTED_PROTOCOL_VERSION ||
    error.reasonCode === REASON.CLIENT_IDENTIFIER_NOT_VALID
  );
}

/** True when `properties` would write at least one property. */
export function hasProperties(properties: Properties): boolean {
  for (const value of Object.values(properties)) {
    if (value === undefined) continue;
    if (Array.isArray(value) && value.length === 0) continue;
    return true;
  }
  return false;
}

/** Encodes `packet` for a connection of `protocolVersion` (3.1.1 drops properties). */
export function encodePacket(packet: Packet, protocolVersion: ProtocolVersion): Uint8Array {
  const v5 = protocolVersion === 5;
  const type = PACKET_TYPES[packet.type];
  const properties = (writer: Writer, props: Properties, context: PropertyContext) => {
    if (v5) writeProperties(writer, props, context);
  };
  switch (packet.type) {
    case "connect":
      return encodeConnect(packet, protocolVersion);
    case "connack": {
      const writer = new Writer(8);
      writer.u8(packet.sessionPresent ? 1 : 0);
      writer.u8(v5 ? packet.reasonCode : connackReturnCodeV4(packet.reasonCode));
      properties(writer, packet.properties, "connack");
      return writer.finish(type << 4);
    }
    case "publish": {
      const writer = new Writer(packet.topic.length * 3 + packet.payload.length + 16);
      writer.utf8(packet.topic);
      if (packet.qos > 0) {
        assert(packet.packetId !== undefined && packet.packetId > 0, "PUBLISH: QoS > 0 has an id");
        writer.u16(packet.packetId);
      }
      properties(writer, packet.properties, "publish");
      writer.bytes(packet.payload);
      const flags = (packet.dup ? 8 : 0) | (packet.qos << 1) | (packet.retain ? 1 : 0);
      return writer.finish((type << 4) | flags);
    }
    case "puback":
    case "pubrec":
    case "pubrel":
    case "pubcomp": {
      const writer = new Writer(4);
      assert(packet.packetId > 0, "ack: packet id is not 0");
      writer.u16(packet.packetId);
      writeReason(writer, v5, packet.reasonCode, packet.properties, packet.type);
      return writer.finish((type << 4) | (packet.type === "pubrel" ? 2 : 0));
    }
    case "subscribe": {
      const writer = new Writer(64);
      assert(packet.packetId > 0, "SUBSCRIBE: packet id is not 0");
      writer.u16(packet.packetId);
      properties(writer, packet.properties, "subscribe");
      for (const subscription of packet.subscriptions) {
        writer.utf8(subscription.filter);
        let options = subscription.qos;
        if (v5) {
          options |= subscription.noLocal ? 0x04 : 0;
          options |= subscription.retainAsPublished ? 0x08 : 0;
          options |= subscription.retainHandling << 4;
        }
        writer.u8(options);
      }
      return writer.finish((type << 4) | 2);
    }
    case "suback":
    case "unsuback": {
      const writer = new Writer(16 + packet.reasonCodes.length);
      writer.u16(packet.packetId);
      properties(writer, packet.properties, packet.type);
      if (v5 || packet.type === "suback") {
        for (const code of packet.reasonCodes) writer.u8(v5 || code < 0x80 ? code : 0x80);
      }
      return writer.finish(type << 4);
    }
    case "unsubscribe": {
      const writer = new Writer(64);
      assert(packet.packetId > 0, "UNSUBSCRIBE: packet id is not 0");
      writer.u16(packet.packetId);
      properties(writer, packet.properties, "unsubscribe");
      for (const filter of packet.filters) writer.utf8(filter);
      return writer.finish((type << 4) | 2);
    }
    case "pingreq":
    case "pingresp":
      return Uint8Array.of(type << 4, 0);
    case "disconnect":
    case "auth": {
      assert(v5 || packet.type === "disconnect", "AUTH exists in MQTT 5 only");
      const writer = new Writer(8);
      writeReason(writer, v5, packet.reasonCode, packet.properties, packet.type);
      return writer.finish(type << 4);
    }
  }
}

/** An MQTT 5 reason code and properties, in the shortest form; nothing in 3.1.1. */
function writeReason(
  writer: Writer,
  v5: boolean,
  reasonCode: number,
  properties: Properties,
  context: PropertyContext,
): void {
  if (!v5) return;
  const withProperties = hasProperties(properties);
  if (reasonCode === REASON.SUCCESS && !withProperties) return;
  writer.u8(reasonCode);
  if (withProperties) writeProperties(writer, properties, context);
}

function encodeConnect(packet: ConnectPacket, protocolVersion: ProtocolVersion): Uint8Array {
  const v5 = protocolVersion === 5;
  const will = packet.will;
  const writer = new Writer(64 + (will?.payload.length ?? 0) + (packet.password?.length ?? 0));
  // MQTT 3.1 is 3.1.1's wire format under another protocol name and level.
  writer.utf8(packet.mqtt31 === true ? "MQIsdp" : "MQTT");
  writer.u8(packet.mqtt31 === true ? 3 : protocolVersion);
  let flags = packet.cleanStart ? 0x02 : 0;
  if (will !== undefined) flags |= 0x04 | (will.qos << 3) | (will.retain ? 0x20 : 0);
  if (packet.password !== undefined) flags |= 0x40;
  if (packet.username !== undefined) flags |= 0x80;
  writer.u8(flags);
  writer.u16(packet.keepAlive);
  if (v5) writeProperties(writer, packet.properties, "connect");
  writer.utf8(packet.clientId);
  if (will !== undefined) {
    if (v5) writeProperties(writer, will.properties, "will");
    writer.utf8(will.topic);
    writer.binary(will.payload);
  }
  if (packet.username !== undefined) writer.utf8(packet.username);
  if (packet.password !== undefined) writer.binary(packet.password);
  return writer.finish(PACKET_TYPES.connect << 4);
}
