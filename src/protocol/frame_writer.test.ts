/** FrameWriter: streaming DATA and PUBLISH, frame caps, buffer reuse, reason truncation; the error table and the docs. */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ERROR_REASON_BYTES_MAX } from "../constants.ts";
import { ARIA_ERROR_WIRE_CODES, AriaError, codeOfWire } from "./error_codes.ts";
import { encodeError, encodePing } from "./frame_encode.ts";
import {
  DATA_HEAD_BYTES,
  DATA_MESSAGE_HEAD_BYTES,
  FRAME_HEADER_BYTES,
  FRAME_TYPES,
} from "./frame_layout.ts";
import { FrameWriter } from "./frame_writer.ts";
import { FrameDecoder } from "./frame_decoder.ts";
import { decodeSplit } from "./test_support.ts";

const topic = new TextEncoder().encode("app/orders");

describe("FrameWriter", () => {
  test("a broker caps DATA frames with dataMessageFits and streams from a larger buffer", () => {
    const frameBytesMax =
      FRAME_HEADER_BYTES + DATA_HEAD_BYTES + 3 * (DATA_MESSAGE_HEAD_BYTES + topic.length + 16);
    const writer = new FrameWriter({ capacityBytes: 8, frameBytesMax });
    const ring = new Uint8Array(1000).map((_, index) => index & 0xff);
    let frames = 0;
    let seq = 1;
    while (seq <= 10) {
      writer.beginData(5);
      while (seq <= 10 && writer.dataMessageFits(topic.length, 16)) {
        writer.addDataMessage(seq, seq * 1000, topic, ring, seq * 16, 16);
        seq++;
      }
      expect(writer.endData()).toBeGreaterThan(0);
      frames++;
    }
    expect(frames).toBe(4); // 3 + 3 + 3 + 1
    const decoded = decodeSplit(writer.bytes(), [], { frameBytesMax });
    const messages = decoded.flatMap(
      (frame) => frame.messages as { seq: number; payload: Uint8Array }[],
    );
    expect(messages.map((message) => message.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(messages[2].payload).toEqual(ring.subarray(48, 64));
  });

  test("an empty DATA or PUBLISH frame is dropped", () => {
    const writer = new FrameWriter();
    encodePing(writer, { token: 1 });
    writer.beginData(1);
    expect(writer.endData()).toBe(0);
    writer.beginPublish(1);
    expect(writer.endPublish()).toBe(0);
    expect(writer.bytesUsed).toBe(16);
  });

  test("streamed PUBLISH decodes through the cursor without materialising", () => {
    const writer = new FrameWriter();
    writer.beginPublish(11);
    for (let i = 0; i < 50; i++) writer.addPublishMessage(topic, new Uint8Array([i]));
    writer.endPublish();
    const decoder = new FrameDecoder();
    decoder.push(writer.bytes());
    const frame = decoder.next();
    if (frame === null || frame.kind !== "publish") throw new Error("expected PUBLISH");
    let sum = 0;
    while (frame.messages.next()) {
      expect(frame.messages.topic).toBe("app/orders");
      sum += frame.messages.frame[frame.messages.payloadStart];
    }
    expect(sum).toBe((49 * 50) / 2);
    expect(decoder.next()).toBeNull();
  });

  test("reset and consume reuse the buffer", () => {
    const writer = new FrameWriter({ capacityBytes: 64 });
    encodePing(writer, { token: 1 });
    encodePing(writer, { token: 2 });
    writer.consume(16);
    expect(decodeSplit(writer.bytes())).toEqual([{ kind: "ping", token: 2 }]);
    writer.reset();
    expect(writer.bytesUsed).toBe(0);
  });

  test("a buffer a burst grew past 256 KiB goes back to its first size at the first reset after the bursts; a smaller one is kept", () => {
    const writer = new FrameWriter({ capacityBytes: 1024 });
    for (let i = 0; i < 20_000; i++) encodePing(writer, { token: i }); // 320 KB
    expect(writer.capacity).toBeGreaterThan(256 * 1024);
    const big = writer.capacity;
    writer.reset(); // the burst itself: kept, another may follow
    expect(writer.capacity).toBe(big);
    encodePing(writer, { token: 1 });
    writer.reset(); // a small write: the bursts are over
    expect(writer.capacity).toBe(1024);
    for (let i = 0; i < 1000; i++) encodePing(writer, { token: i }); // 16 KB
    const grown = writer.capacity;
    expect(grown).toBeGreaterThan(1024);
    writer.reset();
    expect(writer.capacity).toBe(grown);
    encodePing(writer, { token: 7 });
    expect(decodeSplit(writer.bytes())).toEqual([{ kind: "ping", token: 7 }]);
  });

  test("an ERROR reason is cut at a character boundary", () => {
    const writer = new FrameWriter();
    encodeError(writer, {
      code: "ARIA_ERR_INTERNAL",
      fatal: true,
      reason: `x${"é".repeat(ERROR_REASON_BYTES_MAX)}`,
    });
    const [frame] = decodeSplit(writer.bytes()) as { reason: string }[];
    expect(new TextEncoder().encode(frame.reason).length).toBe(ERROR_REASON_BYTES_MAX - 1);
    expect(frame.reason.endsWith("é")).toBe(true);
  });
});

describe("error codes", () => {
  test("wire codes are unique and map back", () => {
    const wires = Object.values(ARIA_ERROR_WIRE_CODES);
    expect(new Set(wires).size).toBe(wires.length);
    for (const [code, wire] of Object.entries(ARIA_ERROR_WIRE_CODES))
      expect(codeOfWire(wire)).toBe(code as never);
    expect(codeOfWire(999)).toBe("ARIA_ERR_UNKNOWN");
    const error = new AriaError("ARIA_ERR_INVALID_TOPIC", "bad");
    expect([error.code, error.wireCode, error.fatal, error instanceof Error]).toEqual([
      "ARIA_ERR_INVALID_TOPIC",
      8,
      false,
      true,
    ]);
  });

  test("docs/protocol.md lists every error code and frame type", () => {
    const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
    for (const [code, wire] of Object.entries(ARIA_ERROR_WIRE_CODES))
      expect(doc).toContain(`| ${wire} | \`${code}\``);
    for (const [kind, type] of Object.entries(FRAME_TYPES)) {
      expect(doc).toContain(`0x${type.toString(16).padStart(2, "0")} ${kind.toUpperCase()}`);
    }
  });
});
