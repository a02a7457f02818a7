/**
 * Every malformed packet and protocol violation the decoder refuses, each with the reason code the
 * specs give, as a table of hand-built bytes; plus the limits (packet size before buffering), the
 * fatal-error contract and chunk reuse.
 */
import { describe, expect, test } from "bun:test";
import { decodeAll } from "./codec_arbitraries.ts";
import { INPUT_CARRY_BYTES_UNCOUNTED } from "../constants.ts";
import { InputBudget } from "../protocol/mod.ts";
import { MqttDecoder, type MqttDecoderOptions } from "./codec.ts";
import { connackAnswersRefusedConnect, encodePacket } from "./codec_encode.ts";
import { REASON } from "./packets.ts";

const text = new TextEncoder();

/** A string as MQTT writes it: two-byte length, bytes (raw bytes given as an array). */
function str(value: string | number[]): number[] {
  const bytes = typeof value === "string" ? [...text.encode(value)] : value;
  return [bytes.length >> 8, bytes.length & 0xff, ...bytes];
}

/** A packet: first byte, remaining length (one or two bytes), body. */
function pkt(first: number, ...body: (number | number[])[]): number[] {
  const flat = body.flat();
  const length =
    flat.length < 128 ? [flat.length] : [(flat.length & 0x7f) | 0x80, flat.length >> 7];
  return [first, ...length, ...flat];
}

/** A CONNECT of `level` with `flags`, keep alive 60, properties (5 only) and payload. */
function connect(level: number, flags: number, payload: number[], properties: number[] = []) {
  const props = level === 5 ? [properties.length, ...properties] : [];
  return pkt(0x10, str("MQTT"), level, flags, 0, 60, props, payload);
}

const CONNECT_5 = connect(5, 0x02, str("c"));
const CONNECT_4 = connect(4, 0x02, str("c"));

function firstError(bytes: number[], options: MqttDecoderOptions) {
  const results = decodeAll(Uint8Array.from(bytes), [], options);
  const failure = results.find((result) => !result.ok);
  return failure === undefined || failure.ok ? null : failure.error.reasonCode;
}

const V5 = { protocolVersion: 5 } as const;
const V4 = { protocolVersion: 4 } as const;
const SERVER = { role: "server" } as const;

/** [what, bytes, decoder options, expected reason code, valid packets before the error]. */
const CASES: [string, number[], MqttDecoderOptions, number, number?][] = [
  ["reserved packet type 0", [0x00, 0x00], V5, REASON.MALFORMED_PACKET],
  ["AUTH in MQTT 3.1.1 (type 15 reserved)", [0xf0, 0x00], V4, REASON.MALFORMED_PACKET],
  ["AUTH after a 3.1.1 CONNECT", [...CONNECT_4, 0xf0, 0x00], SERVER, REASON.MALFORMED_PACKET, 1],
  [
    "remaining length of five bytes",
    [0x30, 0xff, 0xff, 0xff, 0xff, 0x7f],
    V5,
    REASON.MALFORMED_PACKET,
  ],
  ["remaining length not in the fewest bytes", [0xc0, 0x80, 0x00], V5, REASON.MALFORMED_PACKET],
  ["PUBLISH with QoS 3", pkt(0x36, str("a"), 0, 1), V5, REASON.MALFORMED_PACKET],
  ["PUBLISH with DUP at QoS 0", pkt(0x38, str("a"), 0), V5, REASON.MALFORMED_PACKET],
  ["PUBREL with flags 0", pkt(0x60, 0, 1), V5, REASON.MALFORMED_PACKET],
  ["SUBSCRIBE with flags 0", pkt(0x80, 0, 1, 0, str("a"), 0), V5, REASON.MALFORMED_PACKET],
  ["UNSUBSCRIBE with flags 0", pkt(0xa0, 0, 1, 0, str("a")), V5, REASON.MALFORMED_PACKET],
  ["PINGREQ with a flag", [0xc1, 0x00], V5, REASON.MALFORMED_PACKET],
  ["PINGREQ with a body", [0xc0, 0x01, 0x00], V5, REASON.MALFORMED_PACKET],
  ["PUBLISH before CONNECT", pkt(0x30, str("a")), SERVER, REASON.PROTOCOL_ERROR],
  ["a second CONNECT", [...CONNECT_5, ...CONNECT_5], SERVER, REASON.PROTOCOL_ERROR, 1],
  ["CONNACK sent to a server", [...CONNECT_5, 0x20, 0x02, 0, 0], SERVER, REASON.PROTOCOL_ERROR, 1],
  ["CONNECT sent to a client", CONNECT_5, { role: "client", ...V5 }, REASON.PROTOCOL_ERROR],
  [
    "MQTT 3.1 with an empty client id",
    pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str("")),
    SERVER,
    REASON.CLIENT_IDENTIFIER_NOT_VALID,
  ],
  [
    "MQTT 3.1 with a client id of 24 bytes",
    pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str("x".repeat(24))),
    SERVER,
    REASON.CLIENT_IDENTIFIER_NOT_VALID,
  ],
  [
    "protocol name MQIsdp at level 4",
    pkt(0x10, str("MQIsdp"), 4, 2, 0, 60, str("c")),
    SERVER,
    REASON.UNSUPPORTED_PROTOCOL_VERSION,
  ],
  [
    "protocol name MQTT at level 3",
    pkt(0x10, str("MQTT"), 3, 2, 0, 60, str("c")),
    SERVER,
    REASON.UNSUPPORTED_PROTOCOL_VERSION,
  ],
  ["protocol level 6", connect(6, 0x02, str("c")), SERVER, REASON.UNSUPPORTED_PROTOCOL_VERSION],
  [
    "protocol name MQTX",
    pkt(0x10, str("MQTX"), 4, 2, 0, 60, str("c")),
    SERVER,
    REASON.UNSUPPORTED_PROTOCOL_VERSION,
  ],
  ["CONNECT reserved flag", connect(5, 0x03, str("c")), SERVER, REASON.MALFORMED_PACKET],
  ["will QoS 3", connect(4, 0x1e, [...str("c"), ...str("w"), ...str("x")]), SERVER, 0x81],
  ["will retain without a will", connect(4, 0x22, str("c")), SERVER, REASON.MALFORMED_PACKET],
  ["will QoS without a will", connect(4, 0x0a, str("c")), SERVER, REASON.MALFORMED_PACKET],
  ["3.1.1 password without user name", connect(4, 0x42, [...str("c"), ...str("p")]), SERVER, 0x81],
  [
    "3.1.1 empty client id without clean session",
    connect(4, 0x00, str("")),
    SERVER,
    REASON.CLIENT_IDENTIFIER_NOT_VALID,
  ],
  ["CONNECT with a trailing byte", connect(5, 0x02, [...str("c"), 0]), SERVER, 0x81],
  [
    "will topic with a wildcard",
    connect(5, 0x06, [...str("c"), 0, ...str("a/#"), ...str("")]),
    SERVER,
    0x81,
  ],
  ["topic with invalid UTF-8", pkt(0x30, str([0xc3, 0x28])), V5, REASON.MALFORMED_PACKET],
  ["topic with U+0000", pkt(0x30, str([0x61, 0x00]), 0), V5, REASON.MALFORMED_PACKET],
  ["topic with an encoded surrogate", pkt(0x30, str([0xed, 0xa0, 0x80]), 0), V5, 0x81],
  ["topic with an overlong encoding", pkt(0x30, str([0xc0, 0xaf]), 0), V5, 0x81],
  ["string length past the end", pkt(0x30, [0, 9, 0x61]), V5, REASON.MALFORMED_PACKET],
  // The next packet's bytes follow: a read past the end would take them for the packet id.
  ["packet id past the end of a PUBLISH", [...pkt(0x32, str("a"), 0), 0xc0, 0], V4, 0x81],
  ["property past the end of a PUBLISH", [...pkt(0x30, str("a"), 2, 0x02, 0), 0xc0, 0], V5, 0x81],
  ["PUBLISH topic with +", pkt(0x30, str("a/+"), 0), V5, REASON.MALFORMED_PACKET],
  ["PUBLISH topic with #", pkt(0x30, str("#")), V4, REASON.MALFORMED_PACKET],
  ["3.1.1 PUBLISH with an empty topic", pkt(0x30, str("")), V4, REASON.MALFORMED_PACKET],
  ["5.0 empty topic without an alias", pkt(0x30, str(""), 0), V5, REASON.PROTOCOL_ERROR],
  ["PUBLISH QoS 1 with packet id 0", pkt(0x32, str("a"), 0, 0, 0), V5, REASON.PROTOCOL_ERROR],
  ["PUBACK with packet id 0", pkt(0x40, 0, 0), V5, REASON.PROTOCOL_ERROR],
  ["SUBSCRIBE with packet id 0", pkt(0x82, 0, 0, 0, str("a"), 0), V5, REASON.MALFORMED_PACKET],
  ["UNSUBSCRIBE with packet id 0", pkt(0xa2, 0, 0, str("a")), V4, REASON.MALFORMED_PACKET],
  ["3.1.1 PUBACK of three bytes", pkt(0x40, 0, 1, 0), V4, REASON.MALFORMED_PACKET],
  ["PUBACK with reason code 0x05", pkt(0x40, 0, 1, 0x05), V5, REASON.PROTOCOL_ERROR],
  ["3.1.1 SUBSCRIBE with no filter", pkt(0x82, 0, 1), V4, REASON.MALFORMED_PACKET],
  ["5.0 SUBSCRIBE with no filter", pkt(0x82, 0, 1, 0), V5, REASON.PROTOCOL_ERROR],
  ["5.0 UNSUBSCRIBE with no filter", pkt(0xa2, 0, 1, 0), V5, REASON.PROTOCOL_ERROR],
  ["SUBSCRIBE with an empty filter", pkt(0x82, 0, 1, 0, str(""), 0), V5, 0x81],
  ["SUBSCRIBE to a/#/b", pkt(0x82, 0, 1, 0, str("a/#/b"), 0), V5, REASON.MALFORMED_PACKET],
  ["SUBSCRIBE to a+", pkt(0x82, 0, 1, str("a+"), 0), V4, REASON.MALFORMED_PACKET],
  ["SUBSCRIBE to a/b#", pkt(0x82, 0, 1, 0, str("a/b#"), 0), V5, REASON.MALFORMED_PACKET],
  ["UNSUBSCRIBE from #/a", pkt(0xa2, 0, 1, 0, str("#/a")), V5, REASON.MALFORMED_PACKET],
  ["3.1.1 subscription option bit 2", pkt(0x82, 0, 1, str("a"), 0x04), V4, 0x81],
  ["5.0 subscription option bit 6", pkt(0x82, 0, 1, 0, str("a"), 0x40), V5, 0x81],
  ["subscription QoS 3", pkt(0x82, 0, 1, 0, str("a"), 0x03), V5, REASON.MALFORMED_PACKET],
  ["retain handling 3", pkt(0x82, 0, 1, 0, str("a"), 0x30), V5, REASON.PROTOCOL_ERROR],
  ["no local on a shared subscription", pkt(0x82, 0, 1, 0, str("$share/g/a"), 0x04), V5, 0x82],
  ["a property twice", pkt(0x30, str("a"), 4, 0x01, 0, 0x01, 0), V5, REASON.PROTOCOL_ERROR],
  ["a property not allowed in PUBLISH", pkt(0x30, str("a"), 2, 0x24, 0), V5, 0x82],
  ["an unknown property", pkt(0x30, str("a"), 2, 0x7f, 0), V5, REASON.MALFORMED_PACKET],
  ["a property length past the end", pkt(0x30, str("a"), 9, 0x01, 0), V5, 0x81],
  ["a property value past its length", pkt(0x30, str("a"), 1, 0x02, 0, 0, 0, 1), V5, 0x81],
  ["payload format indicator 2", pkt(0x30, str("a"), 2, 0x01, 2), V5, REASON.PROTOCOL_ERROR],
  ["topic alias 0", pkt(0x30, str("a"), 3, 0x23, 0, 0), V5, REASON.TOPIC_ALIAS_INVALID],
  ["receive maximum 0", connect(5, 0x02, str("c"), [0x21, 0, 0]), SERVER, REASON.PROTOCOL_ERROR],
  [
    "maximum packet size 0",
    connect(5, 0x02, str("c"), [0x27, 0, 0, 0, 0]),
    SERVER,
    REASON.PROTOCOL_ERROR,
  ],
  [
    "authentication data without a method",
    connect(5, 0x02, str("c"), [0x16, 0, 0]),
    SERVER,
    REASON.PROTOCOL_ERROR,
  ],
  [
    "a subscription identifier in a client's PUBLISH",
    [...CONNECT_5, ...pkt(0x30, str("a"), 2, 0x0b, 1)],
    SERVER,
    REASON.PROTOCOL_ERROR,
    1,
  ],
  ["subscription identifier 0", pkt(0x82, 0, 1, 2, 0x0b, 0, str("a"), 0), V5, 0x82],
  ["two subscription identifiers", pkt(0x82, 0, 1, 4, 0x0b, 1, 0x0b, 2, str("a"), 0), V5, 0x82],
  ["3.1.1 DISCONNECT with a body", [0xe0, 0x01, 0x00], V4, REASON.MALFORMED_PACKET],
  ["3.1.1 server sending DISCONNECT", [0xe0, 0x00], { role: "client", ...V4 }, 0x82],
];

describe("malformed packets and protocol violations", () => {
  for (const [what, bytes, options, expected, okBefore = 0] of CASES) {
    test(`${what}: 0x${expected.toString(16)}`, () => {
      // Whole and byte by byte: the valid packets before, then the error, then nothing.
      for (const cuts of [[], bytes.map((_, index) => index)]) {
        const results = decodeAll(Uint8Array.from(bytes), cuts, options);
        expect(results.map((result) => (result.ok ? "ok" : result.error.reasonCode))).toEqual([
          ...new Array(okBefore).fill("ok"),
          expected,
        ]);
      }
    });
  }

  test("MQTT 3.1 (MQIsdp, level 3) decodes as 3.1.1, flagged, and encodes back to its bytes", () => {
    for (const id of ["c", "x".repeat(23), "\u00e9".repeat(11)]) {
      const bytes = Uint8Array.from(pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str(id)));
      const [result] = decodeAll(bytes, [], SERVER);
      expect(result?.ok && result.packet).toMatchObject({
        type: "connect",
        protocolVersion: 4,
        mqtt31: true,
        clientId: id,
      });
      if (result?.ok) expect(encodePacket(result.packet, 4)).toEqual(bytes);
    }
    // 3.1.1 and 5.0 CONNECTs carry no flag.
    const [v4] = decodeAll(Uint8Array.from(CONNECT_4), [], SERVER);
    expect(v4?.ok && "mqtt31" in v4.packet).toBe(false);
  });

  test("after an MQTT 3.1 CONNECT, PUBREL, SUBSCRIBE and UNSUBSCRIBE may carry DUP (3.1.1: 0x81)", () => {
    const connect31 = pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str("c"));
    const resent = [pkt(0x6a, 0, 1), pkt(0x8a, 0, 2, str("a"), 1), pkt(0xaa, 0, 3, str("a"))];
    for (const bytes of resent) {
      expect(firstError([...connect31, ...bytes], SERVER)).toBe(null);
      expect(firstError([...CONNECT_4, ...bytes], SERVER)).toBe(REASON.MALFORMED_PACKET);
    }
    // Other flag bits stay reserved in 3.1 as well.
    expect(firstError([...connect31, ...pkt(0x6b, 0, 1)], SERVER)).toBe(REASON.MALFORMED_PACKET);
  });

  test("the valid neighbours of those cases decode", () => {
    const valid: [number[], MqttDecoderOptions][] = [
      [pkt(0x30, str(""), 3, 0x23, 0, 1), V5],
      [connect(5, 0x42, [...str("c"), ...str("p")]), SERVER],
      [connect(5, 0x00, str("")), SERVER],
      [pkt(0x30, str("a"), 10, 0x26, 0, 0, 0, 0, 0x26, 0, 0, 0, 0), V5],
      [pkt(0x82, 0, 1, 0, str("$share/g/a"), 0x2a), V5],
      [pkt(0x30, str("\uFEFFa/ b")), V4],
      [pkt(0x82, 0, 1, 0, str("+/a/+/#"), 0, str("#"), 0, str("$share/g/+"), 0), V5],
    ];
    for (const [bytes, options] of valid) {
      expect(decodeAll(Uint8Array.from(bytes), [], options).every((result) => result.ok)).toBe(
        true,
      );
    }
  });
});

describe("decoder contract", () => {
  test("a leading BOM is kept, not stripped [MQTT-1.5.4-3]", () => {
    const [result] = decodeAll(Uint8Array.from(pkt(0x30, str("\uFEFFa"))), [], V4);
    expect(result.ok && result.packet.type === "publish" && result.packet.topic).toBe("\uFEFFa");
  });

  test("an oversize packet is refused from its fixed header, before any body byte", () => {
    const decoder = new MqttDecoder({ ...V5, packetBytesMax: 100 });
    // PUBLISH announcing 200,000 bytes: only the header arrives.
    decoder.push(Uint8Array.of(0x30, 0xc0, 0x9a, 0x0c));
    const result = decoder.next();
    expect(result?.ok === false && result.error).toMatchObject({
      reasonCode: REASON.PACKET_TOO_LARGE,
      packetType: 3,
    });
    expect(decoder.bytesHeld).toBe(0);
  });

  test("the packet limit counts the fixed header: 100 bytes pass, 101 do not", () => {
    const body = (bytes: number) => pkt(0x30, str("a"), new Array(bytes - 5).fill(0x78));
    expect(body(100).length).toBe(100);
    expect(firstError(body(100), { ...V4, packetBytesMax: 100 })).toBe(null);
    expect(firstError(body(101), { ...V4, packetBytesMax: 100 })).toBe(REASON.PACKET_TOO_LARGE);
  });

  test("a slow packet is held by the bytes received, not by its announced length", () => {
    const decoder = new MqttDecoder({ ...V5 });
    decoder.push(Uint8Array.of(0x30, 0xff, 0xff, 0xff, 0x7f, 0, 1, 0x61));
    expect(decoder.next()).toBe(null);
    expect(decoder.bytesHeld).toBe(8);
  });

  test("after the error: null for ever, input ignored", () => {
    const decoder = new MqttDecoder(V5);
    decoder.push(Uint8Array.of(0x00, 0x00, 0xc0, 0x00));
    expect(decoder.next()?.ok).toBe(false);
    expect(decoder.next()).toBe(null);
    decoder.push(Uint8Array.of(0xc0, 0x00));
    expect(decoder.next()).toBe(null);
  });

  test("a failed CONNECT tells the version to answer in", () => {
    const errorOf = (bytes: number[]) => {
      const [result] = decodeAll(Uint8Array.from(bytes), [], SERVER);
      return result.ok ? null : result.error.protocolVersion;
    };
    expect(errorOf(connect(5, 0x03, str("c")))).toBe(5);
    expect(errorOf(connect(4, 0x03, str("c")))).toBe(4);
    expect(errorOf(pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str("")))).toBe(4);
    // Before any CONNECT, a PUBLISH has no version to answer in.
    expect(errorOf(pkt(0x30, str("a")))).toBe(null);
  });

  test("which refused CONNECTs get a CONNACK: all in 5.0, only return codes 1 and 2 in 3.1.1", () => {
    const answered = (bytes: number[]) => {
      const [result] = decodeAll(Uint8Array.from(bytes), [], SERVER);
      return result.ok ? "accepted" : connackAnswersRefusedConnect(result.error);
    };
    expect(answered(connect(5, 0x03, str("c")))).toBe(true);
    expect(answered(connect(4, 0x03, str("c")))).toBe(false);
    expect(answered(connect(4, 0x42, [...str("c"), ...str("p")]))).toBe(false);
    expect(answered(pkt(0x10, str("MQIsdp"), 4, 2, 0, 60, str("c")))).toBe(true);
    expect(answered(pkt(0x10, str("MQIsdp"), 3, 2, 0, 60, str("")))).toBe(true);
    expect(answered(connect(4, 0x00, str("")))).toBe(true);
    expect(answered(pkt(0x30, str("a")))).toBe(false);
  });

  test("decoded packets own their bytes: the chunk may be reused", () => {
    const chunk = Uint8Array.from(pkt(0x30, str("t"), 0, 1, 2, 3));
    const decoder = new MqttDecoder(V5);
    decoder.push(chunk);
    const result = decoder.next();
    chunk.fill(0xee);
    expect(result?.ok && result.packet.type === "publish" && [...result.packet.payload]).toEqual([
      1, 2, 3,
    ]);
  });

  test("incomplete packets share the server's input budget: over it 0x97, given back", () => {
    const budget = new InputBudget(350_000);
    const big = 400_000;
    // A PUBLISH announcing `big` bytes, of which `sent` arrive.
    const partial = (sent: number) => {
      const bytes = new Uint8Array(sent);
      bytes.set([0x30, 0xfc, 0xb4, 0x18, 0x00, 0x01, 0x61]);
      return bytes;
    };
    const first = new MqttDecoder({ ...V4, inputBudget: budget });
    first.push(partial(200_000));
    expect(first.next()).toBe(null);
    expect(budget.bytesHeld).toBeGreaterThan(0);
    expect(budget.bytesHeld).toBeLessThanOrEqual(big - INPUT_CARRY_BYTES_UNCOUNTED);
    const second = new MqttDecoder({ ...V4, inputBudget: budget });
    second.push(partial(300_000));
    const refused = second.next();
    expect(refused?.ok === false && refused.error.reasonCode).toBe(REASON.QUOTA_EXCEEDED);
    // The refused decoder holds nothing; the first gives its part back when released.
    const held = budget.bytesHeld;
    first.release();
    expect(budget.bytesHeld).toBe(0);
    expect(held).toBeGreaterThan(0);
    // A packet that completes gives its carry back too.
    const third = new MqttDecoder({ ...V4, inputBudget: budget });
    const whole = partial(big);
    third.push(whole.subarray(0, 150_000));
    expect(third.next()).toBe(null);
    third.push(whole.subarray(150_000));
    expect(third.next()?.ok).toBe(true);
    expect(budget.bytesHeld).toBe(0);
  });
});
