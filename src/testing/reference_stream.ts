/**
 * ReferenceStream: the naive model of Aria's stream that fast structures are checked against —
 * an array of every message ever appended, filtered with Filter.matches on topic names. Slow and
 * obviously right; use it only in tests and the simulator.
 */
import type { Filter } from "../topic/filter.ts";

/** One message of the reference stream. */
export interface ReferenceMessage {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
}

/** Every message appended, in seq order. */
export class ReferenceStream {
  readonly messages: ReferenceMessage[] = [];

  /** Records a message; seqs must be appended in increasing order. */
  append(message: ReferenceMessage): void {
    const last = this.messages.at(-1);
    if (last !== undefined && message.seq <= last.seq)
      throw new Error("ReferenceStream: seqs increase");
    this.messages.push(message);
  }

  /** Messages with fromSeq <= seq < endSeq whose topic matches `filter`, in seq order. */
  read(filter: Filter, fromSeq: number, endSeq = Infinity): ReferenceMessage[] {
    return this.messages.filter(
      (m) => m.seq >= fromSeq && m.seq < endSeq && filter.matches(m.topic),
    );
  }
}
