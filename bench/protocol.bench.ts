/**
 * protocol.bench: encoding and decoding DATA frames of 64-byte messages, the broker's and the
 * client's hot paths. Encoding streams messages from one "ring" buffer with `addDataMessage`
 * (frames capped with `dataMessageFits`); decoding walks each frame's MessageBatch, summing one
 * payload byte and the seq, so the work cannot be dropped. Run: `bun bench/protocol.bench.ts`.
 */
import { bench, do_not_optimize, run, summary } from "mitata";
import { assert } from "../src/stdx/assert.ts";
import { FrameDecoder, FrameWriter } from "../src/protocol/mod.ts";

const MESSAGES = 100_000;
const PAYLOAD_BYTES = 64;
const TOPICS = [
  "app/orders/created",
  "app/orders/filled",
  "app/quotes/eurusd",
  "sys/heartbeat",
].map((t) => new TextEncoder().encode(t));
const ring = new Uint8Array(MESSAGES * PAYLOAD_BYTES).map((_, index) => index & 0xff);

/** Encodes MESSAGES messages into DATA frames; returns the frame count. */
export function encodeMessages(writer: FrameWriter, messages: number): number {
  writer.reset();
  let frames = 0;
  let index = 0;
  while (index < messages) {
    writer.beginData(1);
    while (index < messages) {
      const topic = TOPICS[index & 3];
      if (!writer.dataMessageFits(topic.length, PAYLOAD_BYTES)) break;
      writer.addDataMessage(
        index + 1,
        1_700_000_000_000_000 + index,
        topic,
        ring,
        index * PAYLOAD_BYTES,
        PAYLOAD_BYTES,
      );
      index++;
    }
    writer.endData();
    frames++;
  }
  return frames;
}

/** Decodes `bytes` in 64 KiB chunks; returns a checksum over seqs, topics and payloads. */
export function decodeMessages(decoder: FrameDecoder, bytes: Uint8Array): number {
  let checksum = 0;
  for (let at = 0; at < bytes.length; at += 65_536) {
    decoder.push(bytes.subarray(at, at + 65_536));
    for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
      assert(frame.kind === "data", "bench decodes DATA");
      const batch = frame.messages;
      while (batch.next())
        checksum =
          (checksum + batch.seq + batch.topic.length + batch.frame[batch.payloadStart]) | 0;
    }
  }
  return checksum;
}

if (import.meta.main) {
  const writer = new FrameWriter({ capacityBytes: 16 * 1024 * 1024 });
  encodeMessages(writer, MESSAGES);
  const encoded = writer.bytes().slice();
  const decoder = new FrameDecoder();
  const expected = decodeMessages(decoder, encoded);
  let sink = 0;
  summary(() => {
    bench(`encode DATA, ${MESSAGES} × ${PAYLOAD_BYTES} B`, () =>
      do_not_optimize(encodeMessages(writer, MESSAGES)),
    );
    bench(`decode DATA, ${MESSAGES} × ${PAYLOAD_BYTES} B`, () => {
      const checksum = decodeMessages(decoder, encoded);
      assert(checksum === expected, "decode checksum stable");
      sink = (sink + checksum) | 0;
    });
  });
  const results = await run();
  console.log(`checksum ${sink}`);
  for (const trial of results.benchmarks) {
    const stats = trial.runs[0]?.stats;
    if (stats)
      console.log(
        `${trial.alias}: median ${(stats.p50 / 1e6).toFixed(2)} ms → ${(((MESSAGES / stats.p50) * 1e9) / 1e6).toFixed(1)} M messages/s`,
      );
  }
}
