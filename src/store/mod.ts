/**
 * store: Aria's durable storage — a write-ahead journal with group commit, sorted in the
 * background into closed per-partition segments with sparse seq/time indexes, a manifest of the
 * segments in force, crash recovery, a filtered n-way-merge disk reader and retention.
 * Design and byte layouts: docs/storage.md.
 *
 * The whole API:
 *   const { store, recovery } = await Store.open(disk, { fsync: "always" });
 *   store.append(seq, timeUs, topic, payload);   // sync, buffers; seq === store.nextSeq
 *   await store.commit();                        // durable under the policy (group commit)
 *   const reader = store.read(filter, { seq } | { afterSeq } | { timeUs });
 *   const batch = await reader.nextBatch();      // seq order; [] = caught up; or `for await`
 *   await store.readNewest(ringBytes);           // refill the tip after a restart
 *   await store.retain({ ageUs, bytes }, nowUs); store.maintain(nowUs); store.stats();
 *   store.layout(); store.reserveIds(n); await store.switchLayout({ removed, added });  // split
 *   store.openData(); await store.seal();        // what is still open; close it now (split --seal)
 *   store.lastSplit();                           // what the last split did, from the manifest
 *   store.topicVolumes(); await store.countFiles(); // per-topic counts held; measure old files once
 *   await store.close();
 * All file access goes through `Disk` (disk.ts): BunDisk in src/runtime, SimDisk in src/testing.
 */
export {
  Store,
  type LayoutSwap,
  type OpenData,
  type PartitionLayout,
  type RetainResult,
  type SealResult,
  type SplitDetails,
  type StoreStats,
  type TopicVolume,
} from "./store.ts";
export type { SplitSummary, TopicCount } from "./manifest_codec.ts";
export { SubtreeStoreBuilder, type SubtreeStoreMeta } from "./subtree_store_file.ts";
export type { SegmentMeta } from "./segment_index.ts";
export type { FsyncPolicy, StoreOptions } from "./context.ts";
export { type Disk, DiskError, type DiskFile, type OpenMode } from "./disk.ts";
export { StoreError, type StoreErrorCode } from "./layout.ts";
export type { ReadFrom, ReadOptions, StoreReader } from "./read/mod.ts";
export type { StoredMessage } from "./record.ts";
export type { LostSeqs, RecoveryProblem, RecoveryReport } from "./recovery.ts";
export { type MovedRegion, type RepairOptions, type RepairReport, repairStore } from "./repair.ts";
export { crc32, type Crc32 } from "./crc32.ts";
