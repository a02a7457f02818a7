/**
 * store/read: the disk reader — a filter's messages in seq order by an n-way merge over the
 * partitions it touches, layered one concept per file (as TigerBeetle's lsm/ iterators):
 *
 *   store_reader.ts     StoreReader: batches, the merge over partition reads (src/merge heaps)
 *   partition_read.ts   one partition: its lanes merged by seq, rebuilt on layout changes
 *   lane.ts             one run of files (+ journal records): the record walk, the hot path
 *   lane_read_ahead.ts  when a lane reads ahead; the regions it would take from a span read
 *   lane_buffer.ts      the bytes a lane holds; performs its reads, maps and index loads
 *   span_read.ts        one read (or mapping) for many lanes' back-to-back regions of a pack
 *   file_access.ts      read a chunk, map cached pages (through the store's open-file LRU)
 *   index_cache.ts      load a file's sparse index into the store's index cache
 *   buffer_pool.ts      a borrowing reader's power-of-two buffers, lent for one batch
 *   file_meta.ts        what the reader asks of a file's metadata (packed, small, records CRC)
 *
 * Public surface: StoreReader and its ReadFrom / ReadOptions.
 */
export { type ReadFrom, type ReadOptions, StoreReader } from "./store_reader.ts";
