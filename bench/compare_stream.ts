/**
 * compare_stream: the stream bench/nats_compare.ts publishes to both systems, as data. Message i
 * goes to partition `partitionOf[i]` (drawn from a Zipf-like spread, weight 1/(k+1)) and topic
 * `topicOf[i]` within it (uniform), topics `bench/pK/tJ` (Aria) and `bench.pK.tJ` (NATS).
 * Every message has the same payload; the order is fixed by a seed, so both sides hold the same
 * stream and a replay can be checked message by message: the i-th message of the stream has the
 * i-th seq on both sides, so a delivered seq names the message and its partition.
 *
 * Not here: clients or servers. Invariant: counts[k] is the number of i with partitionOf[i] = k.
 */
import { Prng } from "../src/stdx/prng.ts";

/** The shape of a stream. */
export interface StreamSpec {
  messages: number;
  partitions: number;
  topicsPerPartition: number;
  payloadBytes: number;
  /** Zipf exponent: partition k gets a weight of 1 / (k + 1)^skew. */
  skew: number;
  seed: number;
}

/** A generated stream. */
export interface CompareStream {
  spec: StreamSpec;
  partitionOf: Uint16Array;
  topicOf: Uint16Array;
  /** Messages per partition. */
  counts: Float64Array;
  /** The partition whose share is closest to 1% (the subtree rows replay it). */
  onePercent: number;
}

/** Generates the stream of `spec`. */
export function compareStream(spec: StreamSpec): CompareStream {
  if (spec.partitions > 65_536 || spec.topicsPerPartition > 65_536)
    throw new Error("partitions and topics per partition must fit 16 bits");
  const prng = new Prng(spec.seed);
  const cumulative = new Float64Array(spec.partitions);
  let sum = 0;
  for (let k = 0; k < spec.partitions; k++) cumulative[k] = sum += 1 / (k + 1) ** spec.skew;
  const partitionOf = new Uint16Array(spec.messages);
  const topicOf = new Uint16Array(spec.messages);
  const counts = new Float64Array(spec.partitions);
  for (let i = 0; i < spec.messages; i++) {
    const x = prng.nextFloat() * sum;
    let low = 0;
    let high = spec.partitions - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (cumulative[middle] < x) low = middle + 1;
      else high = middle;
    }
    partitionOf[i] = low;
    topicOf[i] = Math.floor(prng.nextFloat() * spec.topicsPerPartition);
    counts[low]++;
  }
  let onePercent = 0;
  for (let k = 1; k < spec.partitions; k++) {
    const target = spec.messages / 100;
    if (Math.abs(counts[k] - target) < Math.abs(counts[onePercent] - target)) onePercent = k;
  }
  return { spec, partitionOf, topicOf, counts, onePercent };
}

/** Topic names of every partition and topic, `sep`-joined: index partition * topics + topic. */
export function topicNames(stream: CompareStream, separator: "/" | "."): string[] {
  const { partitions, topicsPerPartition } = stream.spec;
  const names: string[] = new Array(partitions * topicsPerPartition);
  for (let k = 0; k < partitions; k++)
    for (let j = 0; j < topicsPerPartition; j++)
      names[k * topicsPerPartition + j] = `bench${separator}p${k}${separator}t${j}`;
  return names;
}

/**
 * Checks a replay as it arrives: seqs strictly increasing, each naming a message of the
 * selected partition (or any, for the whole stream); `delivered` counts them. A seq of the
 * stream's message i is `firstSeq + i`.
 */
export class ReplayCheck {
  delivered = 0;
  private lastSeq = 0;
  /** The first problem seen, or null. */
  problem: string | null = null;

  constructor(
    private readonly stream: CompareStream,
    private readonly firstSeq: number,
    /** The partition replayed, or -1 for the whole stream. */
    private readonly partition: number,
  ) {}

  /** Messages the replay must deliver. */
  get expected(): number {
    return this.partition < 0 ? this.stream.spec.messages : this.stream.counts[this.partition];
  }

  /** Records one delivered message. */
  see(seq: number): void {
    this.delivered++;
    if (this.problem !== null) return;
    const index = seq - this.firstSeq;
    if (seq <= this.lastSeq) this.problem = `seq ${seq} after ${this.lastSeq}`;
    else if (index < 0 || index >= this.stream.spec.messages)
      this.problem = `seq ${seq} is outside the stream`;
    else if (this.partition >= 0 && this.stream.partitionOf[index] !== this.partition)
      this.problem = `seq ${seq} is in partition ${this.stream.partitionOf[index]}`;
    this.lastSeq = seq;
  }

  /** Throws unless exactly the expected messages arrived, in order. */
  verify(label: string): void {
    if (this.problem !== null) throw new Error(`${label}: ${this.problem}`);
    if (this.delivered !== this.expected)
      throw new Error(`${label}: delivered ${this.delivered} messages, expected ${this.expected}`);
  }
}
