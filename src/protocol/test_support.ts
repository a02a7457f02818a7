/**
 * Test support: decode a byte stream cut at given points, describing each result at once (views
 * die at the next call), and encode a list of frames into fresh bytes.
 */
import { describeFrame } from "./frame_dump.ts";
import { FrameDecoder, type FrameDecoderOptions } from "./frame_decoder.ts";
import { encodeFrame } from "./frame_encode.ts";
import { FrameWriter } from "./frame_writer.ts";
import type { OutgoingFrame } from "./frames.ts";

/** Encodes `frames` back to back; returns a copy of the bytes. */
export function encodeAll(frames: readonly OutgoingFrame[]): Uint8Array {
  const writer = new FrameWriter({ capacityBytes: 16 });
  for (const frame of frames) encodeFrame(writer, frame);
  return writer.bytes().slice();
}

/** Decodes `bytes` pushed as chunks cut at `cuts` (any numbers; clamped and sorted). */
export function decodeSplit(
  bytes: Uint8Array,
  cuts: readonly number[] = [],
  options: FrameDecoderOptions = {},
): Record<string, unknown>[] {
  const decoder = new FrameDecoder(options);
  const points = [...new Set(cuts.map((cut) => Math.min(cut, bytes.length)))].sort((a, b) => a - b);
  const results: Record<string, unknown>[] = [];
  let from = 0;
  for (const to of [...points, bytes.length]) {
    decoder.push(bytes.subarray(from, to));
    for (let result = decoder.next(); result !== null; result = decoder.next())
      results.push(describeFrame(result));
    from = to;
  }
  return results;
}

/** Every byte its own chunk. */
export function byteCuts(bytes: Uint8Array): number[] {
  return Array.from({ length: bytes.length }, (_, index) => index);
}
