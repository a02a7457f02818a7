/**
 * dumpTip: a plain-object picture of a tip's ring, pool and partition chains, for expect tests
 * and debugging. Walks the structures exactly as cursors do, so a dump that looks right is
 * evidence the links are right. Not for hot paths.
 */
import { RECORD_ALIGN_BYTES } from "../constants.ts";
import { BLOCK_NONE, BLOCK_UNIT_ENTRIES, ENTRY_WORDS } from "./block_pool.ts";
import type { Tip } from "./tip.ts";

/** One partition's index chain: its blocks and the seqs its live entries point at. */
export interface PartitionDump {
  partition: string;
  blocks: number[];
  seqs: number[];
}

/** A readable snapshot of a tip. */
export interface TipDump {
  head: number;
  tail: number;
  firstSeq: number;
  nextSeq: number;
  bytesUsed: number;
  records: string[];
  /** Pages used and free, blocks in partition chains, live entries. */
  pool: { used: number; free: number; blocks: number; entriesLive: number };
  partitions: PartitionDump[];
}

/** Dumps `tip`: records as "offset:seq:topic:payloadBytes" from oldest to newest. */
export function dumpTip(tip: Tip): TipDump {
  const ring = tip.ring;
  const records: string[] = [];
  for (let seq = ring.firstSeq, at = ring.tail; seq < ring.nextSeq; seq++, at = ring.after(at)) {
    records.push(
      `${at}:${ring.seqAt(at)}:${tip.topics.topicName(ring.topicAt(at))}:${ring.payloadLengthAt(at)}`,
    );
  }
  const partitions: PartitionDump[] = [];
  const indexes = tip.indexes;
  for (let p = 0; p < tip.topics.partitionCount; p++) {
    if (indexes.headBlockOf(p) === BLOCK_NONE) continue;
    const blocks: number[] = [];
    const seqs: number[] = [];
    let entry = indexes.headEntryOf(p);
    for (
      let block = indexes.headBlockOf(p);
      block !== BLOCK_NONE;
      block = tip.pool.next[block], entry = 0
    ) {
      blocks.push(block);
      for (const count = indexes.countOf(p, block); entry < count; entry++) {
        const word = (block * BLOCK_UNIT_ENTRIES + entry) * ENTRY_WORDS;
        const seq = tip.pool.firstSeq[block] + tip.pool.entries[word + 1];
        // The entry's seq and the record it points at must agree.
        seqs.push(ring.seqAt(tip.pool.entries[word] * RECORD_ALIGN_BYTES) === seq ? seq : -seq);
      }
    }
    partitions.push({ partition: tip.topics.partitionName(p), blocks, seqs });
  }
  return {
    head: ring.head,
    tail: ring.tail,
    firstSeq: ring.firstSeq,
    nextSeq: ring.nextSeq,
    bytesUsed: ring.bytesUsed,
    records,
    pool: {
      used: tip.pool.pagesUsed,
      free: tip.pool.pagesFree,
      blocks: tip.pool.blocksUsed,
      entriesLive: indexes.entriesLiveCount,
    },
    partitions,
  };
}
