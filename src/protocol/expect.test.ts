/** Expect tests: hex dumps of small frames, and the decode errors of malformed inputs. */
import { describe, expect, test } from "bun:test";
import { FRAME_BYTES_MAX, PAYLOAD_BYTES_MAX, PROTOCOL_VERSION } from "../constants.ts";
import { hexDump } from "./frame_dump.ts";
import {
  encodeAck,
  encodeData,
  encodeHello,
  encodePublish,
  encodeSubscribe,
} from "./frame_encode.ts";
import { FRAME_TYPES, type FrameKind } from "./frame_layout.ts";
import { FrameWriter } from "./frame_writer.ts";
import { byteCuts, decodeSplit, encodeAll } from "./test_support.ts";

const ascii = (text: string) => new TextEncoder().encode(text);

/** A frame from raw parts: header with the right length unless `length` overrides it. */
function raw(
  type: FrameKind | number,
  body: number[],
  options: { length?: number; flags?: number } = {},
): Uint8Array {
  const bytes = new Uint8Array(8 + body.length);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, options.length ?? bytes.length, true);
  bytes[4] = typeof type === "number" ? type : FRAME_TYPES[type];
  bytes[5] = options.flags ?? 0;
  bytes.set(body, 8);
  return bytes;
}
const le32 = (value: number) => [
  value & 0xff,
  (value >>> 8) & 0xff,
  (value >>> 16) & 0xff,
  value >>> 24,
];
const le64 = (low: number, high = 0) => [...le32(low), ...le32(high)];
const str8 = (text: string) => [text.length, ...ascii(text)];
const str16 = (text: string) => [text.length & 0xff, text.length >> 8, ...ascii(text)];

describe("hex dumps", () => {
  test("HELLO", () => {
    const writer = new FrameWriter();
    encodeHello(writer, { version: PROTOCOL_VERSION, clientName: "cli", authToken: "s3cret" });
    expect(hexDump(writer.bytes())).toMatchInlineSnapshot(`
      "0000  16 00 00 00 01 00 00 00 01 00 03 63 6c 69 06 00
      0010  73 33 63 72 65 74"
    `);
  });

  test("PUBLISH", () => {
    const writer = new FrameWriter();
    encodePublish(writer, {
      requestId: 7,
      messages: [
        { topic: "a/b", payload: ascii("hi") },
        { topic: "a/c", payload: new Uint8Array(0) },
      ],
    });
    expect(hexDump(writer.bytes())).toMatchInlineSnapshot(`
      "0000  22 00 00 00 03 00 00 00 07 00 00 00 02 00 00 00
      0010  03 61 2f 62 02 00 00 00 68 69 03 61 2f 63 00 00
      0020  00 00"
    `);
  });

  test("DATA", () => {
    const writer = new FrameWriter();
    encodeData(writer, {
      subscriptionId: 3,
      messages: [{ seq: 258, timeUs: 1_700_000_000_000_000, topic: "a/b", payload: ascii("hi") }],
    });
    expect(hexDump(writer.bytes())).toMatchInlineSnapshot(`
      "0000  2a 00 00 00 07 00 00 00 03 00 00 00 01 00 00 00
      0010  02 01 00 00 00 00 00 00 00 40 1e 18 24 0a 06 00
      0020  03 61 2f 62 02 00 00 00 68 69"
    `);
  });
});

describe("durable SUBSCRIBE and ACK", () => {
  test("hex dumps", () => {
    const writer = new FrameWriter();
    encodeSubscribe(writer, {
      subscriptionId: 4,
      start: { kind: "earliest" },
      filter: ["a/**"],
      durable: "c1",
      shared: true,
    });
    encodeAck(writer, { subscriptionId: 4, seq: 258 });
    expect(hexDump(writer.bytes())).toMatchInlineSnapshot(`
      "0000  21 00 00 00 05 00 00 00 04 00 00 00 01 06 01 00
      0010  00 00 00 00 00 00 00 00 04 00 61 2f 2a 2a 02 63
      0020  31 18 00 00 00 0e 00 00 00 04 00 00 00 00 00 00
      0030  00 02 01 00 00 00 00 00 00"
    `);
  });

  test("decode to frames naming the consumer", () => {
    const bytes = encodeAll([
      {
        kind: "subscribe",
        subscriptionId: 4,
        start: { kind: "live" },
        filter: ["a"],
        durable: "c",
      },
      { kind: "ack", subscriptionId: 4, seq: 7 },
    ]);
    expect(decodeSplit(bytes, byteCuts(bytes))).toMatchInlineSnapshot(`
      [
        {
          "durable": "c",
          "filter": [
            "a",
          ],
          "kind": "subscribe",
          "shared": false,
          "start": {
            "kind": "live",
          },
          "subscriptionId": 4,
        },
        {
          "kind": "ack",
          "seq": 7,
          "subscriptionId": 4,
        },
      ]
    `);
  });
});

describe("decode errors", () => {
  const cases: [string, Uint8Array][] = [
    ["oversize length", raw("hello", [], { length: FRAME_BYTES_MAX + 1 })],
    ["length below header", raw("ping", [], { length: 4 })],
    ["unknown type", raw(0x7f, [1, 2, 3])],
    ["non-zero flags", raw("ping", le64(1), { flags: 1 })],
    ["truncated body", raw("ping", [1, 2, 3, 4])],
    ["count overrun", raw("publish", [...le32(9), ...le32(1000), ...str8("a"), ...le32(0)])],
    ["count zero", raw("publish", [...le32(9), ...le32(0)])],
    ["batch too large", raw("publish", [...le32(9), ...le32(100_000)])],
    ["payload overrun", raw("publish", [...le32(9), ...le32(1), ...str8("a"), ...le32(5), 1, 2])],
    [
      "payload too large",
      raw("publish", [...le32(9), ...le32(1), ...str8("a"), ...le32(PAYLOAD_BYTES_MAX + 1)]),
    ],
    ["bad topic", raw("publish", [...le32(9), ...le32(1), ...str8("a//b"), ...le32(0)])],
    ["bad topic UTF-8", raw("publish", [...le32(9), ...le32(1), 2, 0xff, 0xfe, ...le32(0)])],
    ["empty topic, empty payload", raw("publish", [...le32(9), ...le32(1), 0, ...le32(0)])],
    ["bad filter", raw("subscribe", [...le32(4), 0, 0, 1, 0, ...le64(0), ...str16("a/b*")])],
    ["too many filter entries", raw("subscribe", [...le32(4), 0, 0, 0xff, 0xff, ...le64(0)])],
    ["empty filter entry", raw("subscribe", [...le32(4), 0, 0, 1, 0, ...le64(0), 0, 0])],
    ["bad start kind", raw("subscribe", [...le32(4), 9, 0, 1, 0, ...le64(0), ...str16("a")])],
    ["start seq 0", raw("subscribe", [...le32(4), 2, 0, 1, 0, ...le64(0), ...str16("a")])],
    [
      "subscribe unknown option",
      raw("subscribe", [...le32(4), 0, 8, 1, 0, ...le64(0), ...str16("a")]),
    ],
    [
      "subscribe shared, not durable",
      raw("subscribe", [...le32(4), 0, 4, 1, 0, ...le64(0), ...str16("a")]),
    ],
    ["durable name missing", raw("subscribe", [...le32(4), 0, 2, 1, 0, ...le64(0), ...str16("a")])],
    [
      "durable name empty",
      raw("subscribe", [...le32(4), 0, 2, 1, 0, ...le64(0), ...str16("a"), 0]),
    ],
    [
      "durable name bad character",
      raw("subscribe", [...le32(4), 0, 2, 1, 0, ...le64(0), ...str16("a"), ...str8("a b")]),
    ],
    ["ack reserved", raw("ack", [...le32(4), 1, 0, 0, 0, ...le64(9)])],
    ["non-safe u64", raw("ping", le64(0, 0x0020_0000))],
    [
      "DATA seqs not ascending",
      raw("data", [
        ...le32(4),
        ...le32(2),
        ...le64(5),
        ...le64(0),
        ...str8("a"),
        ...le32(0),
        ...le64(5),
        ...le64(0),
        ...str8("a"),
        ...le32(0),
      ]),
    ],
    ["trailing bytes", raw("unsubscribe", [...le32(4), 0, 0])],
    ["unsupported version", raw("hello", [2, 0, ...str8("x"), 0, 0])],
    ["error frame with fatal 2", raw("error", [1, 0, 2, 0, ...le32(0), 0, 0])],
  ];

  test("each malformed input gives one structured error, whole or byte by byte", () => {
    const results = Object.fromEntries(
      cases.map(([name, bytes]) => {
        const whole = decodeSplit(bytes);
        expect(decodeSplit(bytes, byteCuts(bytes))).toEqual(whole);
        expect(whole).toHaveLength(1);
        const error = whole[0] as {
          code: string;
          fatal: boolean;
          relatedKind: string;
          relatedId: number;
          reason: string;
        };
        return [
          name,
          `${error.code}${error.fatal ? " (fatal)" : ""} [${error.relatedKind} ${error.relatedId}] ${error.reason}`,
        ];
      }),
    );
    expect(results).toMatchInlineSnapshot(`
      {
        "DATA seqs not ascending": "ARIA_ERR_MALFORMED_FRAME [subscription 4] DATA message 1 has seq 5, not above the previous seq 5",
        "ack reserved": "ARIA_ERR_MALFORMED_FRAME [subscription 4] ACK reserved field is not zero",
        "bad filter": "ARIA_ERR_INVALID_FILTER [subscription 4] filter entry "a/b*": '*' stands for one whole segment, so segment "b*" is invalid",
        "bad start kind": "ARIA_ERR_INVALID_START [subscription 4] start kind 9 is unknown",
        "bad topic": "ARIA_ERR_INVALID_TOPIC [request 9] message 0: topic has an empty segment at byte 2",
        "bad topic UTF-8": "ARIA_ERR_INVALID_TOPIC [request 9] message 0: topic is not valid UTF-8",
        "batch too large": "ARIA_ERR_BATCH_TOO_LARGE [request 9] PUBLISH has 100000 messages, more than the limit of 8192",
        "count overrun": "ARIA_ERR_MALFORMED_FRAME [request 9] PUBLISH message count 1000 overruns the frame: needs at least 5000 bytes, 6 remain",
        "count zero": "ARIA_ERR_MALFORMED_FRAME [request 9] PUBLISH message count is 0",
        "durable name bad character": "ARIA_ERR_MALFORMED_FRAME [subscription 4] SUBSCRIBE consumer name "a b" holds a character outside [A-Za-z0-9_.:/$-]",
        "durable name empty": "ARIA_ERR_MALFORMED_FRAME [subscription 4] SUBSCRIBE consumer name is 0 bytes, not 1..64",
        "durable name missing": "ARIA_ERR_MALFORMED_FRAME [subscription 4] SUBSCRIBE consumer name length at byte 27 needs 1 bytes, 0 remain",
        "empty filter entry": "ARIA_ERR_INVALID_FILTER [subscription 4] filter entry "": topic is empty",
        "empty topic, empty payload": "ARIA_ERR_INVALID_TOPIC [request 9] message 0: topic is empty",
        "error frame with fatal 2": "ARIA_ERR_MALFORMED_FRAME [none 0] ERROR fatal flag is 2, not 0 or 1",
        "length below header": "ARIA_ERR_MALFORMED_FRAME (fatal) [none 0] frame length 4 is smaller than the 8-byte header",
        "non-safe u64": "ARIA_ERR_MALFORMED_FRAME [none 0] PING token at byte 8 exceeds 2^53 - 1",
        "non-zero flags": "ARIA_ERR_MALFORMED_FRAME [none 0] PING header has non-zero flags or reserved bits",
        "oversize length": "ARIA_ERR_FRAME_TOO_LARGE (fatal) [none 0] frame length 1114113 exceeds the limit of 1114112 bytes",
        "payload overrun": "ARIA_ERR_MALFORMED_FRAME [request 9] PUBLISH message 0 payload at byte 22 needs 5 bytes, 2 remain",
        "payload too large": "ARIA_ERR_PAYLOAD_TOO_LARGE [request 9] message 0 payload is 1048577 bytes, more than the limit of 1048576",
        "start seq 0": "ARIA_ERR_INVALID_START [subscription 4] start seq is 0; seqs start at 1",
        "subscribe shared, not durable": "ARIA_ERR_MALFORMED_FRAME [subscription 4] SUBSCRIBE option SHARED needs option DURABLE (a shared group is a durable consumer)",
        "subscribe unknown option": "ARIA_ERR_MALFORMED_FRAME [subscription 4] SUBSCRIBE options 0x08 has unknown bits",
        "too many filter entries": "ARIA_ERR_INVALID_FILTER [subscription 4] filter has 65535 entries, more than the limit of 256",
        "trailing bytes": "ARIA_ERR_MALFORMED_FRAME [subscription 4] UNSUBSCRIBE has 2 trailing bytes",
        "truncated body": "ARIA_ERR_MALFORMED_FRAME [none 0] PING token at byte 8 needs 8 bytes, 4 remain",
        "unknown type": "ARIA_ERR_UNKNOWN_FRAME_TYPE [none 0] unknown frame type 0x7f; the frame is skipped",
        "unsupported version": "ARIA_ERR_UNSUPPORTED_VERSION (fatal) [none 0] HELLO has protocol version 2; this peer speaks 1",
      }
    `);
  });

  test("a non-fatal error skips one frame; a fatal one ends the stream", () => {
    const ping = encodeAll([{ kind: "ping", token: 42 }]);
    const badTopic = raw("publish", [...le32(9), ...le32(1), ...str8("a//b"), ...le32(0)]);
    const oversize = raw("ping", le64(1), { length: FRAME_BYTES_MAX + 1 });
    const kinds = (parts: Uint8Array[]) => {
      const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
      let at = 0;
      for (const part of parts) bytes.set(part, (at += part.length) - part.length);
      return decodeSplit(bytes).map(
        (result) => `${result.kind}${"code" in result ? ` ${result.code}` : ""}`,
      );
    };
    expect(kinds([badTopic, ping])).toEqual(["decode_error ARIA_ERR_INVALID_TOPIC", "ping"]);
    expect(kinds([ping, oversize, ping])).toEqual([
      "ping",
      "decode_error ARIA_ERR_FRAME_TOO_LARGE",
    ]);
  });
});
