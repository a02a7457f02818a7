/**
 * DATA frame sizing, and shared frames as a session copies them: what a session's own writer
 * and live fan-out's shared encoding (shared_data.ts) must agree on, so that a shared frame is
 * exactly the frame the per-message path would have written. It sits in its own file so that
 * session.ts and shared_data.ts both depend on it and not on each other.
 *
 * Pure: no state.
 */
import type { FrameWriter } from "../protocol/mod.ts";

/** A DATA frame is closed at this many bytes, so delivery is not held back by batching. */
export const DATA_FRAME_BYTES_TARGET = 64 * 1024;

/**
 * True when a message of these sizes starts a new DATA frame after the open one in `writer`
 * (`propertiesBytes` count only in a frame with the flag PROPERTIES).
 */
export function dataFrameFull(
  writer: FrameWriter,
  topicBytes: number,
  payloadBytes: number,
  propertiesBytes = 0,
): boolean {
  return (
    writer.frameBytes >= DATA_FRAME_BYTES_TARGET ||
    !writer.dataMessageFits(topicBytes, payloadBytes, propertiesBytes)
  );
}

/** Whole DATA frames encoded once (subscription id 0), to be copied into sessions. */
export interface SharedFrames {
  /** Frames held. */
  readonly frameCount: number;
  /** Frame `index`, one whole DATA frame. */
  frame(index: number): Uint8Array;
}
