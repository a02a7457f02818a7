import { expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { FrameDecoder } from "./frame_decoder.ts";
import { FrameWriter } from "./frame_writer.ts";

const ENCODER = new TextEncoder();

test("MessageBatch.copy(fromSeq): a batch of its own holding exactly the messages at or after fromSeq", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          gap: fc.integer({ min: 1, max: 3 }),
          topic: fc.constantFrom<string>("a", "b/c", "d/e/f"),
          payload: fc.uint8Array({ maxLength: 40 }),
        }),
        { minLength: 1, maxLength: 30 },
      ),
      fc.integer({ min: 0, max: 100 }),
      (drawn, fromSeq) => {
        let seq = 0;
        const messages = drawn.map((m) => ({
          seq: (seq += m.gap),
          timeUs: seq * 1000,
          topic: m.topic,
          payload: m.payload,
        }));
        const writer = new FrameWriter();
        writer.beginData(7);
        for (const m of messages)
          writer.addDataMessage(m.seq, m.timeUs, ENCODER.encode(m.topic), m.payload);
        writer.endData();
        const decoder = new FrameDecoder();
        decoder.push(writer.bytes().slice());
        const frame = decoder.next();
        if (frame?.kind !== "data") throw new Error("expected a DATA frame");
        const batch = frame.messages;
        expect(batch.firstSeq).toBe(messages[0].seq);
        expect(batch.lastSeq).toBe(messages[messages.length - 1].seq);
        const copy = batch.copy(fromSeq);
        // The decoder's buffer is reused for the next frame: the copy must not depend on it.
        batch.frame.fill(0xee);
        const expected = messages.filter((m) => m.seq >= fromSeq);
        if (expected.length === 0) {
          expect(copy).toBeNull();
          return;
        }
        expect(copy!.count).toBe(expected.length);
        expect(copy!.remaining).toBe(expected.length);
        expect([copy!.firstSeq, copy!.lastSeq]).toEqual([
          expected[0].seq,
          expected[expected.length - 1].seq,
        ]);
        const got: typeof messages = [];
        while (copy!.next())
          got.push({
            seq: copy!.seq,
            timeUs: copy!.timeUs,
            topic: copy!.topic,
            payload: copy!.payload.slice(),
          });
        expect(got).toEqual(expected);
        expect(copy!.remaining).toBe(0);
      },
    ),
    fcParams({ runs: 200 }),
  );
});
