/** tip: the ring buffer, block pool, partition indexes, merge heaps and tip cursors. */
export { Tip, type TipOptions, type TipRead, type TipStats } from "./tip.ts";
export {
  type DataMessageWriter,
  type RecordSink,
  Ring,
  SEQ_CHECKPOINT_EVERY,
  type TipRecords,
} from "./ring.ts";
export { BlockPool, BLOCK_NONE } from "./block_pool.ts";
export { PartitionIndexes } from "./partition_index.ts";
export { IndexedCursor, LinearCursor, type ReadStrategy, type TipCursor } from "./tip_cursor.ts";
export { chooseReadStrategy, type ReadChoice, type ReadStrategyInput } from "./read_strategy.ts";
export { dumpTip, type PartitionDump, type TipDump } from "./tip_dump.ts";
