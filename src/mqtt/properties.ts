/**
 * MQTT 5 properties: the table of every property (identifier, type, the packets that may carry it)
 * and its reading and writing. Reading checks what section 2.2.2 and the property descriptions
 * require: a known identifier (else 0x81 malformed), allowed in this packet (else 0x82 protocol
 * error), at most once except user properties and a PUBLISH's subscription identifiers (else
 * 0x82), values in range (0/1 bytes, non-zero receive maximum, packet size, subscription
 * identifier; topic alias 0 is 0x94), and the property length inside the packet (else 0x81).
 * Not here: the checks that need session state (a topic alias above the maximum, and so on).
 */
import { assert } from "../stdx/assert.ts";
import { fail, Reader, vbiBytes, type Writer } from "./codec_bytes.ts";
import { type Properties, REASON, type UserProperty } from "./packets.ts";

/** Where a property list sits: a packet, or the will of a CONNECT. */
export type PropertyContext =
  | "connect"
  | "connack"
  | "publish"
  | "will"
  | "puback"
  | "pubrec"
  | "pubrel"
  | "pubcomp"
  | "subscribe"
  | "suback"
  | "unsubscribe"
  | "unsuback"
  | "disconnect"
  | "auth";

type ValueKind = "flag" | "zeroOne" | "u16" | "u32" | "vbi" | "string" | "binary" | "pair";

interface PropertySpec {
  readonly id: number;
  readonly key: keyof Properties;
  readonly kind: ValueKind;
  readonly allowed: readonly PropertyContext[];
  /** 0 is refused with this reason code (receive maximum, packet size, alias, subscription id). */
  readonly zeroRefused?: number;
}

const MESSAGE: readonly PropertyContext[] = ["publish", "will"];
const ACKS: readonly PropertyContext[] = [
  "puback",
  "pubrec",
  "pubrel",
  "pubcomp",
  "suback",
  "unsuback",
];
const EVERY: readonly PropertyContext[] = [
  "connect",
  "connack",
  "publish",
  "will",
  ...ACKS,
  "subscribe",
  "unsubscribe",
  "disconnect",
  "auth",
];

/** Every MQTT 5 property, in identifier order (the order the encoder writes them in). */
export const PROPERTY_SPECS: readonly PropertySpec[] = [
  { id: 0x01, key: "payloadFormatIndicator", kind: "zeroOne", allowed: MESSAGE },
  { id: 0x02, key: "messageExpiryInterval", kind: "u32", allowed: MESSAGE },
  { id: 0x03, key: "contentType", kind: "string", allowed: MESSAGE },
  { id: 0x08, key: "responseTopic", kind: "string", allowed: MESSAGE },
  { id: 0x09, key: "correlationData", kind: "binary", allowed: MESSAGE },
  {
    id: 0x0b,
    key: "subscriptionIdentifiers",
    kind: "vbi",
    allowed: ["publish", "subscribe"],
    zeroRefused: REASON.PROTOCOL_ERROR,
  },
  {
    id: 0x11,
    key: "sessionExpiryInterval",
    kind: "u32",
    allowed: ["connect", "connack", "disconnect"],
  },
  { id: 0x12, key: "assignedClientIdentifier", kind: "string", allowed: ["connack"] },
  { id: 0x13, key: "serverKeepAlive", kind: "u16", allowed: ["connack"] },
  {
    id: 0x15,
    key: "authenticationMethod",
    kind: "string",
    allowed: ["connect", "connack", "auth"],
  },
  {
    id: 0x16,
    key: "authenticationData",
    kind: "binary",
    allowed: ["connect", "connack", "auth"],
  },
  { id: 0x17, key: "requestProblemInformation", kind: "flag", allowed: ["connect"] },
  { id: 0x18, key: "willDelayInterval", kind: "u32", allowed: ["will"] },
  { id: 0x19, key: "requestResponseInformation", kind: "flag", allowed: ["connect"] },
  { id: 0x1a, key: "responseInformation", kind: "string", allowed: ["connack"] },
  { id: 0x1c, key: "serverReference", kind: "string", allowed: ["connack", "disconnect"] },
  {
    id: 0x1f,
    key: "reasonString",
    kind: "string",
    allowed: ["connack", ...ACKS, "disconnect", "auth"],
  },
  {
    id: 0x21,
    key: "receiveMaximum",
    kind: "u16",
    allowed: ["connect", "connack"],
    zeroRefused: REASON.PROTOCOL_ERROR,
  },
  { id: 0x22, key: "topicAliasMaximum", kind: "u16", allowed: ["connect", "connack"] },
  {
    id: 0x23,
    key: "topicAlias",
    kind: "u16",
    allowed: ["publish"],
    zeroRefused: REASON.TOPIC_ALIAS_INVALID,
  },
  { id: 0x24, key: "maximumQos", kind: "zeroOne", allowed: ["connack"] },
  { id: 0x25, key: "retainAvailable", kind: "flag", allowed: ["connack"] },
  { id: 0x26, key: "userProperties", kind: "pair", allowed: EVERY },
  {
    id: 0x27,
    key: "maximumPacketSize",
    kind: "u32",
    allowed: ["connect", "connack"],
    zeroRefused: REASON.PROTOCOL_ERROR,
  },
  { id: 0x28, key: "wildcardSubscriptionAvailable", kind: "flag", allowed: ["connack"] },
  { id: 0x29, key: "subscriptionIdentifiersAvailable", kind: "flag", allowed: ["connack"] },
  { id: 0x2a, key: "sharedSubscriptionAvailable", kind: "flag", allowed: ["connack"] },
];

const SPEC_OF_ID: readonly (PropertySpec | undefined)[] = (() => {
  const table: (PropertySpec | undefined)[] = new Array(128).fill(undefined);
  for (const spec of PROPERTY_SPECS) table[spec.id] = spec;
  return table;
})();

/** True when property `key` may appear in `context`. */
export function propertyAllowed(key: keyof Properties, context: PropertyContext): boolean {
  const spec = PROPERTY_SPECS.find((candidate) => candidate.key === key);
  assert(spec !== undefined, "propertyAllowed: a known key");
  return spec.allowed.includes(context);
}

/** Reads a property length and the properties it covers, checked as the file header says. */
export function readProperties(reader: Reader, context: PropertyContext): Properties {
  const length = reader.vbi("property length");
  if (length === 0) return {};
  if (length > reader.remaining()) {
    fail(REASON.MALFORMED_PACKET, `property length ${length} runs past the end of the packet`);
  }
  const inner = new Reader(reader.bytes, reader.offset, reader.offset + length);
  reader.offset += length;
  const properties: Record<string, unknown> = {};
  const seen = new Set<number>();
  while (inner.remaining() > 0) {
    const id = inner.vbi("property identifier");
    const spec = id < 128 ? SPEC_OF_ID[id] : undefined;
    if (spec === undefined) fail(REASON.MALFORMED_PACKET, `unknown property identifier ${id}`);
    if (!spec.allowed.includes(context)) {
      fail(REASON.PROTOCOL_ERROR, `property ${spec.key} is not allowed in ${context}`);
    }
    const repeatable = spec.kind === "pair" || (spec.id === 0x0b && context === "publish");
    if (seen.has(id) && !repeatable) {
      fail(REASON.PROTOCOL_ERROR, `property ${spec.key} appears more than once`);
    }
    seen.add(id);
    const value = readValue(inner, spec);
    if (spec.kind === "pair") {
      ((properties.userProperties ??= []) as UserProperty[]).push(value as UserProperty);
    } else if (spec.id === 0x0b) {
      ((properties.subscriptionIdentifiers ??= []) as number[]).push(value as number);
    } else {
      properties[spec.key] = value;
    }
  }
  if (
    properties.authenticationData !== undefined &&
    properties.authenticationMethod === undefined
  ) {
    fail(REASON.PROTOCOL_ERROR, "authentication data without an authentication method");
  }
  return properties as Properties;
}

function readValue(reader: Reader, spec: PropertySpec): unknown {
  const what = `property ${spec.key}`;
  switch (spec.kind) {
    case "flag":
    case "zeroOne": {
      const byte = reader.u8(what);
      if (byte > 1) fail(REASON.PROTOCOL_ERROR, `${what} is ${byte}, not 0 or 1`);
      return spec.kind === "flag" ? byte === 1 : byte;
    }
    case "u16":
    case "u32":
    case "vbi": {
      const value =
        spec.kind === "u16"
          ? reader.u16(what)
          : spec.kind === "u32"
            ? reader.u32(what)
            : reader.vbi(what);
      if (value === 0 && spec.zeroRefused !== undefined) fail(spec.zeroRefused, `${what} is 0`);
      return value;
    }
    case "string":
      return reader.utf8(what);
    case "binary":
      return reader.binary(what);
    case "pair":
      return [reader.utf8(`${what} name`), reader.utf8(`${what} value`)] as const;
  }
}

/** Writes the property length and the properties (asserting each is allowed in `context`). */
export function writeProperties(
  writer: Writer,
  properties: Properties,
  context: PropertyContext,
): void {
  if (!hasAnyKey(properties)) return writer.u8(0);
  const start = writer.offset;
  for (const spec of PROPERTY_SPECS) {
    const value = properties[spec.key];
    if (value === undefined) continue;
    assert(spec.allowed.includes(context), "writeProperties: property allowed in the packet");
    if (spec.kind === "pair") {
      for (const [name, text] of value as readonly UserProperty[]) {
        writer.u8(spec.id);
        writer.utf8(name);
        writer.utf8(text);
      }
    } else if (spec.id === 0x0b) {
      for (const identifier of value as readonly number[]) {
        writer.u8(spec.id);
        writer.vbi(identifier);
      }
    } else {
      writer.u8(spec.id);
      writeValue(writer, spec, value);
    }
  }
  const length = writer.offset - start;
  writer.insertGap(start, vbiBytes(length));
  writer.vbiAt(start, length);
}

function hasAnyKey(properties: Properties): boolean {
  for (const _ in properties) return true;
  return false;
}

function writeValue(writer: Writer, spec: PropertySpec, value: unknown): void {
  switch (spec.kind) {
    case "flag":
      return writer.u8(value ? 1 : 0);
    case "zeroOne":
      return writer.u8(value as number);
    case "u16":
      return writer.u16(value as number);
    case "u32":
      return writer.u32(value as number);
    case "vbi":
      return writer.vbi(value as number);
    case "string":
      return writer.utf8(value as string);
    case "binary":
      return writer.binary(value as Uint8Array);
    case "pair":
      assert(false, "writeValue: pairs are written by writeProperties");
  }
}
