/**
 * Fuzz properties: random bytes and mutated valid frames never make the decoder throw; it yields
 * only frames and structured errors, stops after a fatal one, and never buffers beyond the frame limit.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { frameArbitrary } from "./frame_arbitraries.ts";
import { describeFrame } from "./frame_dump.ts";
import { FrameDecoder } from "./frame_decoder.ts";
import { FRAME_TYPES } from "./frame_layout.ts";
import { encodeAll } from "./test_support.ts";

const FRAME_BYTES_MAX_SMALL = 600; // shrunk so random lengths land on both sides of the limit
const kinds = new Set([...Object.keys(FRAME_TYPES), "decode_error"]);

/** Feeds `bytes` in chunks cut at `cuts`; checks the decoder's contract at every step. */
function feed(bytes: Uint8Array, cuts: number[], frameBytesMax = FRAME_BYTES_MAX_SMALL): void {
  const decoder = new FrameDecoder({ frameBytesMax });
  let fatalSeen = false;
  let from = 0;
  for (const to of [
    ...cuts.map((cut) => Math.min(cut, bytes.length)).sort((a, b) => a - b),
    bytes.length,
  ]) {
    if (to < from) continue;
    decoder.push(bytes.subarray(from, to));
    from = to;
    for (let result = decoder.next(); result !== null; result = decoder.next()) {
      expect(fatalSeen).toBe(false);
      expect(kinds.has(result.kind)).toBe(true);
      describeFrame(result); // walks every message: must not throw either
      if (result.kind === "decode_error") {
        expect(typeof result.reason).toBe("string");
        fatalSeen ||= result.fatal;
      }
    }
    expect(decoder.carryCapacityBytes).toBeLessThanOrEqual(frameBytesMax);
  }
  expect(decoder.failed).toBe(fatalSeen);
}

/** A header with a plausible length and type in front of random bytes: reaches every body parser. */
const plausibleFrame = fc
  .tuple(fc.integer({ min: 0, max: 15 }), fc.uint8Array({ maxLength: 80 }))
  .map(([type, body]) => {
    const bytes = new Uint8Array(8 + body.length);
    new DataView(bytes.buffer).setUint32(0, bytes.length, true);
    bytes[4] = type;
    bytes.set(body, 8);
    return bytes;
  });

const mutation = fc.oneof(
  fc.record({
    kind: fc.constant("set" as const),
    at: fc.nat(),
    value: fc.integer({ min: 0, max: 255 }),
  }),
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    value: fc.integer({ min: 0, max: 255 }),
  }),
);

function mutate(
  bytes: Uint8Array,
  mutations: { kind: "set" | "cut" | "insert"; at: number; value?: number }[],
): Uint8Array {
  let out = Array.from(bytes);
  for (const change of mutations) {
    if (out.length === 0) break;
    const at = change.at % out.length;
    if (change.kind === "set") out[at] = change.value!;
    else if (change.kind === "cut") out = out.slice(0, at);
    else out.splice(at, 0, change.value!);
  }
  return Uint8Array.from(out);
}

describe("fuzz", () => {
  test("random bytes", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 2000 }),
        fc.array(fc.nat({ max: 2000 }), { maxLength: 8 }),
        (bytes, cuts) => feed(bytes, cuts),
      ),
      fcParams({ runs: 300 }),
    );
  });

  test("plausible headers with random bodies", () => {
    fc.assert(
      fc.property(
        fc.array(plausibleFrame, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat({ max: 1000 }), { maxLength: 8 }),
        (frames, cuts) => {
          const bytes = new Uint8Array(frames.reduce((sum, frame) => sum + frame.length, 0));
          let at = 0;
          for (const frame of frames) bytes.set(frame, at), (at += frame.length);
          feed(bytes, cuts);
        },
      ),
      fcParams({ runs: 500 }),
    );
  });

  test("mutated valid frames", () => {
    fc.assert(
      fc.property(
        fc.array(frameArbitrary, { minLength: 1, maxLength: 4 }),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        fc.array(fc.nat({ max: 4000 }), { maxLength: 6 }),
        (frames, mutations, cuts) => feed(mutate(encodeAll(frames), mutations), cuts, 8192),
      ),
      fcParams({ runs: 500 }),
    );
  });

  test("a hostile length allocates only with the bytes that arrive", () => {
    const decoder = new FrameDecoder();
    const header = new Uint8Array(8);
    new DataView(header.buffer).setUint32(0, 1024 * 1024, true);
    header[4] = FRAME_TYPES.ping;
    decoder.push(header);
    expect(decoder.next()).toBeNull();
    for (let i = 0; i < 100; i++) {
      decoder.push(new Uint8Array(10));
      expect(decoder.next()).toBeNull();
    }
    expect(decoder.bufferedBytes).toBe(1008);
    expect(decoder.carryCapacityBytes).toBeLessThanOrEqual(4096);
  });
});
