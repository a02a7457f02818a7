/**
 * SharedData: the DATA frames of one stretch of the ring for one filter, encoded once. Live
 * subscriptions with equal filters receive the same messages, so fan-out encodes each message
 * once per filter and copies whole frames into each subscriber's session (a copy of a few
 * frames, and the subscription id patched), instead of every session encoding every message.
 *
 *   tip records [seq .. to) ──encode(matcher)──▶ frames 0..n-1 (subscription id 0)
 *                                                     │ copyDataFrame(frame, id) per member
 *                                                     ▼
 *                                              session A, session B, …
 *
 * A round encodes at most about SHARED_ROUND_BYTES of frames; the caller runs rounds until the
 * range is done. Frames split where a session's own writer splits them (`dataFrameFull`), so a
 * shared frame is exactly the frame the per-message path would have written.
 *
 * Invariants after encode(): the frames hold, in seq order, every message of [startSeq, endSeq)
 * that matches, and nothing else; firstSeq(i) < firstSeq(i + 1). Pure: it owns memory only.
 */
import { FrameWriter } from "../protocol/mod.ts";
import type { TipRecords } from "../tip/mod.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import { dataFrameFull, type SharedFrames } from "./data_frame.ts";

/** Frame bytes one round encodes at most (plus one frame): bounds the scratch buffer. */
export const SHARED_ROUND_BYTES = 1024 * 1024;

/** One round of shared DATA frames. */
export class SharedData implements SharedFrames {
  private readonly writer = new FrameWriter({ capacityBytes: 2 * SHARED_ROUND_BYTES });
  private frameEnds: number[] = [];
  private firstSeqs: number[] = [];
  private messageCounts: number[] = [];
  /** The first seq the next round starts at (the range [startSeq, endSeq) is done). */
  endSeq = 0;
  /** Ring offset of endSeq (valid only when endSeq < the round's `to`). */
  endAt = 0;

  /** Frames of this round. */
  get frameCount(): number {
    return this.frameEnds.length;
  }

  /** Frame `index` (valid until the next encode). */
  frame(index: number): Uint8Array {
    const start = index === 0 ? 0 : this.frameEnds[index - 1];
    return this.writer.bytes().subarray(start, this.frameEnds[index]);
  }

  /** Seq of the first message of frame `index`. */
  firstSeq(index: number): number {
    return this.firstSeqs[index];
  }

  /** Messages in frame `index`. */
  messages(index: number): number {
    return this.messageCounts[index];
  }

  /**
   * Encodes the messages matching `matcher` among seqs [seq, to) of `records` (`at` is the
   * position of `seq`), stopping at a frame boundary once SHARED_ROUND_BYTES are written.
   */
  encode(
    records: TipRecords,
    from: { seq: number; at: number },
    to: number,
    options: {
      matcher: FilterMatcher;
      topicUtf8: (topicId: number) => Uint8Array;
      /** The group's subscriptions asked for properties: frames with the flag PROPERTIES. */
      withProperties?: boolean;
    },
  ): void {
    const writer = this.writer;
    const withProperties = options.withProperties === true;
    writer.reset();
    this.frameEnds.length = 0;
    this.firstSeqs.length = 0;
    this.messageCounts.length = 0;
    let at = from.at;
    let seq = from.seq;
    let open = false;
    for (; seq < to; seq++) {
      const topicId = records.topicAt(at);
      if (options.matcher.matches(topicId)) {
        const topic = options.topicUtf8(topicId);
        const payloadBytes = records.payloadLengthAt(at);
        const propertiesBytes = withProperties ? records.propertiesLengthAt(at) : 0;
        if (open && dataFrameFull(writer, topic.length, payloadBytes, propertiesBytes)) {
          this.close();
          open = false;
          if (writer.bytesUsed >= SHARED_ROUND_BYTES) break;
        }
        if (!open) {
          writer.beginData(0, withProperties);
          this.firstSeqs.push(seq);
          open = true;
        }
        records.writeAt(at, writer, topic);
      }
      if (seq + 1 < to) at = records.after(at);
    }
    if (open) this.close();
    this.endSeq = seq;
    this.endAt = at;
  }

  private close(): void {
    this.messageCounts.push(this.writer.endData());
    this.frameEnds.push(this.writer.bytesUsed);
  }
}
