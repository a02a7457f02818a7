/** Round trips: every frame kind encodes and decodes back, from one buffer, byte by byte, in random splits. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { expectedOf, frameArbitrary } from "./frame_arbitraries.ts";
import { FRAME_TYPES, type FrameKind } from "./frame_layout.ts";
import type { OutgoingFrame } from "./frames.ts";
import { byteCuts, decodeSplit, encodeAll } from "./test_support.ts";

describe("round trip", () => {
  test("every frame kind is drawn by the arbitrary", () => {
    const seen = new Set<FrameKind>();
    fc.assert(
      fc.property(frameArbitrary, (frame) => void seen.add(frame.kind)),
      fcParams({ runs: 400 }),
    );
    expect([...seen].sort()).toEqual((Object.keys(FRAME_TYPES) as FrameKind[]).sort());
  });

  test("one frame, decoded from the whole buffer and one byte at a time", () => {
    fc.assert(
      fc.property(frameArbitrary, (frame) => {
        const bytes = encodeAll([frame]);
        expect(decodeSplit(bytes)).toEqual([expectedOf(frame)]);
        expect(decodeSplit(bytes, byteCuts(bytes))).toEqual([expectedOf(frame)]);
      }),
      fcParams({ runs: 300 }),
    );
  });

  test("frames back to back, decoded from random splits", () => {
    fc.assert(
      fc.property(
        fc.array(frameArbitrary, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat({ max: 20_000 }), { maxLength: 12 }),
        (frames: OutgoingFrame[], cuts) => {
          const bytes = encodeAll(frames);
          expect(decodeSplit(bytes, cuts)).toEqual(frames.map(expectedOf));
        },
      ),
      fcParams({ runs: 200 }),
    );
  });
});
