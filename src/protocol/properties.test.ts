/**
 * Message properties on the wire: PUBLISH and DATA frames with the flag PROPERTIES (0x01), the
 * SUBSCRIBE option PROPERTIES, and the decode errors of bad ones (docs/protocol.md).
 */
import { describe, expect, test } from "bun:test";
import { PROPERTIES_BYTES_MAX } from "../constants.ts";
import { hexDump } from "./frame_dump.ts";
import { encodeData, encodePublish, encodeSubscribe } from "./frame_encode.ts";
import { FRAME_TYPES } from "./frame_layout.ts";
import { FrameWriter } from "./frame_writer.ts";
import { byteCuts, decodeSplit } from "./test_support.ts";

const ascii = (text: string) => new TextEncoder().encode(text);

/** A frame from raw parts with the right length. */
function raw(type: keyof typeof FRAME_TYPES, body: number[], flags: number): Uint8Array {
  const bytes = new Uint8Array(8 + body.length);
  new DataView(bytes.buffer).setUint32(0, bytes.length, true);
  bytes[4] = FRAME_TYPES[type];
  bytes[5] = flags;
  bytes.set(body, 8);
  return bytes;
}
const le16 = (value: number) => [value & 0xff, value >>> 8];
const le32 = (value: number) => [...le16(value & 0xffff), ...le16(value >>> 16)];

describe("properties on the wire", () => {
  test("PUBLISH with properties: flag 0x01, u16 properties bytes after the topic", () => {
    const writer = new FrameWriter();
    encodePublish(writer, {
      requestId: 7,
      messages: [
        { topic: "a/b", payload: ascii("hi"), properties: Uint8Array.of(0x01, 0x01) },
        { topic: "a/c", payload: new Uint8Array(0) },
      ],
    });
    expect(hexDump(writer.bytes())).toMatchInlineSnapshot(`
      "0000  28 00 00 00 03 01 00 00 07 00 00 00 02 00 00 00
      0010  03 61 2f 62 02 00 01 01 02 00 00 00 68 69 03 61
      0020  2f 63 00 00 00 00 00 00"
    `);
    expect(decodeSplit(writer.bytes(), byteCuts(writer.bytes()))).toEqual([
      {
        kind: "publish",
        requestId: 7,
        messages: [
          { topic: "a/b", payload: ascii("hi"), properties: Uint8Array.of(1, 1) },
          { topic: "a/c", payload: new Uint8Array(0), properties: new Uint8Array(0) },
        ],
      },
    ]);
  });

  test("a PUBLISH whose messages have no properties is the v1 layout (flags 0)", () => {
    const writer = new FrameWriter();
    encodePublish(writer, {
      requestId: 1,
      messages: [{ topic: "a", payload: ascii("x"), properties: new Uint8Array(0) }],
    });
    expect(writer.bytes()[5]).toBe(0);
    expect(writer.bytes().length).toBe(8 + 8 + 1 + 1 + 4 + 1);
  });

  test("DATA with properties, and the largest properties allowed", () => {
    const largest = new Uint8Array(PROPERTIES_BYTES_MAX).map((_, i) => i & 0xff);
    const messages = [
      { seq: 5, timeUs: 9, topic: "a/b", payload: ascii("p"), properties: largest },
      { seq: 6, timeUs: 9, topic: "a/b", payload: ascii("q"), properties: new Uint8Array(0) },
    ];
    const writer = new FrameWriter();
    encodeData(writer, { subscriptionId: 3, properties: true, messages });
    expect(writer.bytes()[5]).toBe(0x01);
    expect(decodeSplit(writer.bytes(), [1, 100, 5000])).toEqual([
      { kind: "data", subscriptionId: 3, properties: true, messages },
    ]);
  });

  test("SUBSCRIBE option PROPERTIES (0x01) decodes as properties: true", () => {
    const writer = new FrameWriter();
    encodeSubscribe(writer, {
      subscriptionId: 2,
      start: { kind: "live" },
      filter: ["a/**"],
      properties: true,
    });
    expect(writer.bytes()[8 + 5]).toBe(0x01);
    expect(decodeSplit(writer.bytes())).toEqual([
      {
        kind: "subscribe",
        subscriptionId: 2,
        start: { kind: "live" },
        filter: ["a/**"],
        properties: true,
      },
    ]);
  });

  const message = (propertiesBytes: number, have = propertiesBytes) => [
    ...le32(9),
    ...le32(1),
    1,
    ...ascii("a"),
    ...le16(propertiesBytes),
    ...new Array(have).fill(0),
    ...le32(0),
  ];
  const cases: [string, Uint8Array, string][] = [
    ["too large", raw("publish", message(PROPERTIES_BYTES_MAX + 1), 1), "PROPERTIES_TOO_LARGE"],
    ["overrun", raw("publish", message(10, 3).slice(0, -4), 1), "MALFORMED_FRAME"],
    ["other flag bits", raw("publish", message(0), 0x03), "MALFORMED_FRAME"],
    ["flag on PING", raw("ping", [0, 0, 0, 0, 0, 0, 0, 0], 1), "MALFORMED_FRAME"],
    ["flag on SUBSCRIBED", raw("subscribed", new Array(16).fill(0), 1), "MALFORMED_FRAME"],
  ];
  for (const [name, bytes, code] of cases) {
    test(`decode error: ${name}`, () => {
      const [result] = decodeSplit(bytes);
      expect(result.kind).toBe("decode_error");
      expect(result.code).toBe(`ARIA_ERR_${code}`);
      expect(result.fatal).toBe(false);
    });
  }

  test("the limit itself decodes", () => {
    const [result] = decodeSplit(raw("publish", message(PROPERTIES_BYTES_MAX), 1));
    expect(result.kind).toBe("publish");
  });
});
