/**
 * Tip recovery scenarios: builds a tip full of 64-byte messages over a chosen number of
 * partitions, then reads filters of a chosen selectivity with each strategy (linear, indexed,
 * planned) side by side, and with many subscribers interleaved the way a server serves them
 * (round-robin batches). Used by bench/tip.bench.ts (full size) and its smoke test (tiny sizes).
 *
 * Stream shape. Topics are `g{group}/p{partition}/t{0|1}`, so a partition is `g…/p…` and one
 * filter entry `g{group}/**` selects a whole group of partitions. With 1,000 or more partitions
 * there are 1,000 equal groups and a selectivity of 0.1% / 1% / 10% is the first 1 / 10 / 100
 * groups. With fewer partitions the groups are unequal (0.1%, 0.9%, 9%, the rest) with one
 * partition each in the first three, so the same filters select the same shares.
 * Interleaving "runs" sends RUN_LENGTH messages of one partition in a row; "spread" draws each
 * message's partition independently.
 */
import { Prng } from "../src/stdx/prng.ts";
import { Filter, FilterMatcher, TopicTable } from "../src/topic/mod.ts";
import { Tip, type ReadChoice, type TipCursor } from "../src/tip/mod.ts";

/** Messages of one partition in a row when interleaving is "runs". */
export const RUN_LENGTH = 64;

/** One stream to build. */
export interface StreamSpec {
  partitions: number;
  interleave: "runs" | "spread";
  ringBytes: number;
  payloadBytes: number;
  poolBlocks?: number;
  seed?: number;
}

/** A built stream: the tip, its topics and the filter of each selectivity. */
export interface BuiltStream {
  tip: Tip;
  topics: TopicTable;
  filters: Map<number, Filter>;
  /** Appends/s while filling the empty ring (pages touched for the first time). */
  fillAppendsPerSecond: number;
  /** Appends/s once the ring is full: every append also evicts (the steady state of a server). */
  appendsPerSecond: number;
  /** The same by this process's CPU time (user + system): less hurt by a loaded machine. */
  appendsPerCpuSecond: number;
}

/** Selectivities the scenarios read, as fractions of the stream. */
export const SELECTIVITIES = [0.001, 0.01, 0.1, 1] as const;

function groupLayout(partitions: number): {
  groupOf: Int32Array;
  weights: Float64Array;
  groups: number;
} {
  const groupOf = new Int32Array(partitions);
  if (partitions >= 1000) {
    const perGroup = partitions / 1000;
    for (let p = 0; p < partitions; p++) groupOf[p] = Math.floor(p / perGroup);
    return { groupOf, weights: new Float64Array(partitions).fill(1 / partitions), groups: 1000 };
  }
  const weights = new Float64Array(partitions);
  const shares = [0.001, 0.009, 0.09];
  for (let p = 0; p < partitions; p++) {
    groupOf[p] = Math.min(p, 3);
    weights[p] = p < 3 ? shares[p] : 0.9 / (partitions - 3);
  }
  return { groupOf, weights, groups: 4 };
}

/** Builds the tip for `spec`, timing the appends. */
export function buildStream(spec: StreamSpec, now: () => number): BuiltStream {
  const prng = new Prng(spec.seed ?? 1);
  const topics = new TopicTable();
  const { groupOf, weights, groups } = groupLayout(spec.partitions);
  const topicIds = new Int32Array(spec.partitions * 2);
  for (let p = 0; p < spec.partitions; p++) {
    for (let t = 0; t < 2; t++)
      topicIds[p * 2 + t] = topics.internValid(`g${groupOf[p]}/p${p}/t${t}`);
  }
  const cumulative = new Float64Array(spec.partitions);
  let sum = 0;
  for (let p = 0; p < spec.partitions; p++) cumulative[p] = sum += weights[p];
  const pick = (): number => {
    const x = prng.nextFloat() * sum;
    let low = 0;
    let high = spec.partitions - 1;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (cumulative[middle] <= x) low = middle + 1;
      else high = middle;
    }
    return low;
  };
  const recordBytes = 24 + ((spec.payloadBytes + 7) & ~7);
  const ringRecords = Math.ceil(spec.ringBytes / recordBytes);
  const messages = 2 * ringRecords;
  // Pre-draw the topic of every message so the timed loop measures appends only.
  const order = new Int32Array(messages);
  for (let i = 0; i < messages; ) {
    const p = pick();
    const run = spec.interleave === "runs" ? RUN_LENGTH : 1;
    for (let r = 0; r < run && i < messages; r++, i++)
      order[i] = topicIds[p * 2 + (prng.nextU32() & 1)];
  }
  const tip = new Tip(topics, { capacityBytes: spec.ringBytes, poolBlocks: spec.poolBlocks });
  const payload = new Uint8Array(spec.payloadBytes);
  prng.fill(payload);
  const appendRange = (from: number, to: number): number => {
    const started = now();
    for (let i = from; i < to; i++) {
      payload[0] = i & 0xff;
      tip.append(order[i], i + 1, i + 1, payload);
    }
    return (to - from) / ((now() - started) / 1000);
  };
  const fillAppendsPerSecond = appendRange(0, ringRecords);
  const cpuStarted = process.cpuUsage();
  const appendsPerSecond = appendRange(ringRecords, messages);
  const cpu = process.cpuUsage(cpuStarted);
  const appendsPerCpuSecond = (messages - ringRecords) / ((cpu.user + cpu.system) / 1e6);
  const filters = new Map<number, Filter>();
  for (const selectivity of SELECTIVITIES) {
    if (selectivity === 1) {
      filters.set(selectivity, Filter.of("**"));
      continue;
    }
    const count =
      groups === 1000 ? Math.round(selectivity * 1000) : SELECTIVITIES.indexOf(selectivity) + 1;
    filters.set(selectivity, Filter.of(...Array.from({ length: count }, (_, g) => `g${g}/**`)));
  }
  return { tip, topics, filters, fillAppendsPerSecond, appendsPerSecond, appendsPerCpuSecond };
}

/** Result of reading: how many messages and a checksum the JIT cannot drop. */
export interface ReadOutcome {
  messages: number;
  checksum: number;
}

function consume(tip: Tip, cursor: TipCursor, limit: number, outcome: ReadOutcome): boolean {
  const ring = tip.ring;
  for (let i = 0; i < limit; i++) {
    if (!cursor.next()) return false;
    const at = cursor.offset;
    outcome.messages++;
    outcome.checksum = (outcome.checksum + ring.seqAt(at) + ring.bytes[at + 24]) % 1_000_000_007;
  }
  return true;
}

/**
 * Reads `filter` from the oldest seq with `subscribers` cursors served round-robin in batches of
 * `batch` messages, as a server interleaves subscribers. Returns the combined outcome.
 */
export function readInterleaved(
  built: BuiltStream,
  filter: Filter,
  strategy: ReadChoice,
  subscribers: number,
  batch = 64,
): ReadOutcome {
  const { tip, topics } = built;
  const outcome = { messages: 0, checksum: 0 };
  const cursors: TipCursor[] = [];
  for (let r = 0; r < subscribers; r++) {
    const read = tip.read(new FilterMatcher(topics, filter), tip.ring.firstSeq, { strategy });
    if (!read.ok) throw new Error("bench: read refused");
    cursors.push(read.cursor);
  }
  let open = subscribers;
  const done = new Uint8Array(subscribers);
  while (open > 0) {
    for (let r = 0; r < subscribers; r++) {
      if (done[r] === 1) continue;
      if (!consume(tip, cursors[r], batch, outcome)) {
        done[r] = 1;
        open--;
      }
    }
  }
  return outcome;
}
