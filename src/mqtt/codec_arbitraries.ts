/**
 * fast-check arbitraries of MQTT packets, per protocol version, drawn in the form the decoder
 * returns (so decode(encode(p)) equals p): 3.1.1 packets have empty properties, success reason
 * codes and the CONNACK codes 3.1.1 can carry. Test support only (tests, fuzzers, the door's).
 * Also `decodeAll`, which pushes bytes cut at given points and collects every result.
 */
import fc from "fast-check";
import { MqttDecoder, type MqttDecoderOptions } from "./codec.ts";
import { encodePacket } from "./codec_encode.ts";
import { MQTT31_CLIENT_ID_BYTES_MAX } from "./codec_parse.ts";
import type {
  MqttDecodeResult,
  Packet,
  Properties,
  ProtocolVersion,
  QoS,
  Subscription,
  UserProperty,
} from "./packets.ts";
import { PROPERTY_SPECS, type PropertyContext } from "./properties.ts";

/** An MQTT UTF-8 string: any well-formed text without U+0000 (BOM, controls and all). */
export const mqttString = (maxLength = 12): fc.Arbitrary<string> =>
  fc
    .oneof(
      fc.string({ unit: "binary", maxLength }),
      fc.string({ maxLength }),
      fc.constantFrom("a/b", "\uFEFFbom", "é/ü/日本", "$SYS/x", "a//b", "/", " "),
    )
    .map((text) => text.replaceAll("\u0000", "0"))
    .filter((text) => text.isWellFormed());

/** A topic name: non-empty, without `+` or `#`. */
export const topicNameArbitrary: fc.Arbitrary<string> = mqttString()
  .map((text) => text.replaceAll("+", "p").replaceAll("#", "h"))
  .filter((text) => text.length > 0);

/** A topic filter: non-empty, `+` and `#` only as whole levels, `#` only last. */
export const topicFilterArbitrary: fc.Arbitrary<string> = fc
  .oneof(mqttString(), fc.constantFrom("#", "+", "a/+/b", "a/#", "+/+", "$share/g/a/#", "/#"))
  .map((text) =>
    text
      .split("/")
      .map((level, index, levels) =>
        level === "+" || (level === "#" && index === levels.length - 1)
          ? level
          : level.replaceAll("+", "p").replaceAll("#", "h"),
      )
      .join("/"),
  )
  .filter((text) => text.length > 0);

const bytesArbitrary = (maxLength = 16) =>
  fc.uint8Array({ maxLength }).map((bytes) => new Uint8Array(bytes));
const qosArbitrary = fc.constantFrom<QoS>(0, 1, 2);
const packetIdArbitrary = fc.integer({ min: 1, max: 0xffff });
const u16 = fc.integer({ min: 0, max: 0xffff });
const u32 = fc.integer({ min: 0, max: 0xffffffff });

function valueArbitrary(key: keyof Properties, context: PropertyContext): fc.Arbitrary<unknown> {
  switch (key) {
    case "payloadFormatIndicator":
    case "maximumQos":
      return fc.constantFrom(0, 1);
    case "requestProblemInformation":
    case "requestResponseInformation":
    case "retainAvailable":
    case "wildcardSubscriptionAvailable":
    case "subscriptionIdentifiersAvailable":
    case "sharedSubscriptionAvailable":
      return fc.boolean();
    case "receiveMaximum":
    case "topicAlias":
      return fc.integer({ min: 1, max: 0xffff });
    case "topicAliasMaximum":
    case "serverKeepAlive":
      return u16;
    case "maximumPacketSize":
      return fc.integer({ min: 1, max: 0xffffffff });
    case "messageExpiryInterval":
    case "sessionExpiryInterval":
    case "willDelayInterval":
      return u32;
    case "correlationData":
    case "authenticationData":
      return bytesArbitrary();
    case "subscriptionIdentifiers":
      return fc.array(fc.integer({ min: 1, max: 268_435_455 }), {
        minLength: 1,
        maxLength: context === "publish" ? 3 : 1,
      });
    case "userProperties":
      return fc.array(fc.tuple(mqttString(6), mqttString(6)) as fc.Arbitrary<UserProperty>, {
        minLength: 1,
        maxLength: 4,
      });
    default:
      return mqttString();
  }
}

/** Properties allowed in `context` (none for 3.1.1). */
export function propertiesArbitrary(
  context: PropertyContext,
  version: ProtocolVersion,
): fc.Arbitrary<Properties> {
  if (version === 4) return fc.constant({});
  const record: Record<string, fc.Arbitrary<unknown>> = {};
  for (const spec of PROPERTY_SPECS) {
    if (spec.allowed.includes(context)) record[spec.key] = valueArbitrary(spec.key, context);
  }
  return fc.record(record, { requiredKeys: [] }).map((properties) => {
    const result = properties as Properties & Record<string, unknown>;
    // Authentication data needs a method [MQTT-3.1.2-? "Protocol Error" otherwise].
    if (result.authenticationData !== undefined && result.authenticationMethod === undefined) {
      result.authenticationMethod = "m";
    }
    return result;
  });
}

function reasonArbitrary(codes: readonly number[], version: ProtocolVersion) {
  return version === 4 ? fc.constant(0) : fc.constantFrom(...codes);
}

const subscriptionArbitrary = (version: ProtocolVersion): fc.Arbitrary<Subscription> =>
  fc
    .record({
      filter: topicFilterArbitrary,
      qos: qosArbitrary,
      noLocal: version === 5 ? fc.boolean() : fc.constant(false),
      retainAsPublished: version === 5 ? fc.boolean() : fc.constant(false),
      retainHandling: version === 5 ? fc.constantFrom<0 | 1 | 2>(0, 1, 2) : fc.constant<0>(0),
    })
    .map((s) => (s.filter.startsWith("$share/") ? { ...s, noLocal: false } : s));

/** Any packet of `version`, in decoded form. */
export function packetArbitrary(version: ProtocolVersion): fc.Arbitrary<Packet> {
  const props = (context: PropertyContext) => propertiesArbitrary(context, version);
  const connect = fc
    .record({
      clientId: mqttString(),
      cleanStart: fc.boolean(),
      keepAlive: u16,
      username: fc.option(mqttString(), { nil: undefined }),
      password: fc.option(bytesArbitrary(), { nil: undefined }),
      will: fc.option(
        fc.record({
          topic: topicNameArbitrary,
          payload: bytesArbitrary(),
          qos: qosArbitrary,
          retain: fc.boolean(),
          properties: props("will"),
        }),
        { nil: undefined },
      ),
      properties: props("connect"),
      // MQTT 3.1 (MQIsdp, level 3) rides on version 4: the same packets.
      mqtt31: version === 4 ? fc.boolean() : fc.constant(false),
    })
    .map(({ mqtt31, ...fields }): Packet => {
      const packet: Record<string, unknown> = { type: "connect", protocolVersion: version };
      for (const [key, value] of Object.entries(fields))
        if (value !== undefined) packet[key] = value;
      if (version === 4 && packet.password !== undefined && packet.username === undefined) {
        packet.username = "user";
      }
      if (version === 4 && fields.clientId === "") packet.cleanStart = true;
      if (mqtt31) {
        packet.mqtt31 = true;
        // 3.1's client id has 1 to 23 bytes.
        const bytes = new TextEncoder().encode(fields.clientId).length;
        if (bytes === 0 || bytes > MQTT31_CLIENT_ID_BYTES_MAX) packet.clientId = "mqtt31-client";
      }
      return packet as unknown as Packet;
    });
  const connack = fc.record({
    type: fc.constant("connack" as const),
    sessionPresent: fc.boolean(),
    reasonCode:
      version === 4
        ? fc.constantFrom(0x00, 0x84, 0x85, 0x88, 0x86, 0x87)
        : fc.constantFrom(0x00, 0x80, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x95, 0x9f),
    properties: props("connack"),
  });
  const publish = fc
    .record({
      topic: topicNameArbitrary,
      payload: bytesArbitrary(64),
      qos: qosArbitrary,
      retain: fc.boolean(),
      dup: fc.boolean(),
      packetId: packetIdArbitrary,
      properties: props("publish"),
    })
    .map(({ packetId, ...rest }): Packet => {
      if (rest.qos === 0) return { type: "publish", ...rest, dup: false };
      return { type: "publish", ...rest, packetId };
    });
  const ack = fc
    .record({
      type: fc.constantFrom("puback", "pubrec", "pubrel", "pubcomp"),
      packetId: packetIdArbitrary,
      publishCode: reasonArbitrary([0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99], version),
      releaseCode: reasonArbitrary([0x00, 0x92], version),
      properties: props("puback"),
    })
    .map(
      ({ type, packetId, publishCode, releaseCode, properties }): Packet => ({
        type,
        packetId,
        reasonCode: type === "puback" || type === "pubrec" ? publishCode : releaseCode,
        properties,
      }),
    );
  const subscribe = fc.record({
    type: fc.constant("subscribe" as const),
    packetId: packetIdArbitrary,
    subscriptions: fc.array(subscriptionArbitrary(version), { minLength: 1, maxLength: 4 }),
    properties: props("subscribe"),
  });
  const suback = fc.record({
    type: fc.constant("suback" as const),
    packetId: packetIdArbitrary,
    reasonCodes: fc.array(
      version === 4
        ? fc.constantFrom(0, 1, 2, 0x80)
        : fc.constantFrom(0, 1, 2, 0x80, 0x83, 0x87, 0x8f, 0x91, 0x97, 0x9e, 0xa1, 0xa2),
      { minLength: 1, maxLength: 4 },
    ),
    properties: props("suback"),
  });
  const unsubscribe = fc.record({
    type: fc.constant("unsubscribe" as const),
    packetId: packetIdArbitrary,
    filters: fc.array(topicFilterArbitrary, { minLength: 1, maxLength: 4 }),
    properties: props("unsubscribe"),
  });
  const unsuback = fc.record({
    type: fc.constant("unsuback" as const),
    packetId: packetIdArbitrary,
    reasonCodes:
      version === 4
        ? fc.constant<number[]>([])
        : fc.array<number>(fc.constantFrom(0, 0x11, 0x80, 0x83, 0x87, 0x8f, 0x91), {
            minLength: 1,
            maxLength: 4,
          }),
    properties: props("unsuback"),
  });
  const ping = fc.record({ type: fc.constantFrom("pingreq" as const, "pingresp" as const) });
  const disconnect = fc.record({
    type: fc.constant("disconnect" as const),
    reasonCode: reasonArbitrary([0x00, 0x04, 0x80, 0x81, 0x82, 0x8e, 0x93, 0x95, 0x9c], version),
    properties: props("disconnect"),
  });
  const auth = fc.record({
    type: fc.constant("auth" as const),
    reasonCode: fc.constantFrom(0x00, 0x18, 0x19),
    properties: props("auth"),
  });
  const common = [connect, connack, publish, publish, ack, subscribe, suback, unsubscribe];
  const arbitraries = [...common, unsuback, ping, disconnect] as fc.Arbitrary<Packet>[];
  if (version === 5) arbitraries.push(auth as fc.Arbitrary<Packet>);
  return fc.oneof(...arbitraries);
}

/** Encodes `packets` back to back for `version`. */
export function encodeAll(packets: readonly Packet[], version: ProtocolVersion): Uint8Array {
  const parts = packets.map((packet) => encodePacket(packet, version));
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}

/** Decodes `bytes` pushed as chunks cut at `cuts` (clamped and sorted); every result in order. */
export function decodeAll(
  bytes: Uint8Array,
  cuts: readonly number[],
  options: MqttDecoderOptions,
): MqttDecodeResult[] {
  const decoder = new MqttDecoder(options);
  const points = [...new Set(cuts.map((cut) => Math.min(cut, bytes.length)))].sort((a, b) => a - b);
  const results: MqttDecodeResult[] = [];
  let from = 0;
  for (const to of [...points, bytes.length]) {
    decoder.push(bytes.subarray(from, to));
    for (let result = decoder.next(); result !== null; result = decoder.next())
      results.push(result);
    from = to;
  }
  return results;
}

/** Every byte its own chunk. */
export function byteCuts(bytes: Uint8Array): number[] {
  return Array.from({ length: bytes.length }, (_, index) => index);
}
