/**
 * manifest: keeping the MANIFEST file — replaying it at open, appending (and syncing) records as
 * segments close or retire, and rewriting it whole (into MANIFEST.tmp, then an atomic rename)
 * when it was rebuilt or has grown far past the live set. The codec is manifest_codec.ts.
 *
 * An append the disk has no room for (ENOSPC, EDQUOT) is cut back (MANIFEST truncated to its
 * length before it, fsynced) before its error goes to the caller, which may try it again; a
 * rewrite that fails before its rename removes MANIFEST.tmp and keeps the old file.
 *
 * Invariant: a segment is live exactly when the durable manifest holds its ADD and no REMOVE;
 * a subtree store is live exactly when a durable SWAP added it and no later SWAP removed it (a
 * SWAP also removes the segments it replaced, in the same record: the split's one switch).
 */
import { MANIFEST_RECORDS_COMPACT_MIN } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { StoreContext } from "./context.ts";
import { type DiskFile, isOutOfSpace } from "./disk.ts";
import { decodeFileHeader, encodeFileHeader } from "./file_header.ts";
import { MANIFEST_PATH, MANIFEST_TMP_PATH, StoreError } from "./layout.ts";
import {
  MANIFEST_ADD,
  MANIFEST_JOURNAL,
  MANIFEST_REMOVE,
  MANIFEST_SPLIT,
  MANIFEST_SWAP,
  MANIFEST_TOPICS,
  MANIFEST_WATERMARK,
  type ManifestRecord,
  type SplitSummary,
  type TopicCount,
  decodeManifestRecords,
  encodeManifestRecords,
} from "./manifest_codec.ts";
import type { SegmentMeta } from "./segment_index.ts";
import type { SubtreeStoreMeta } from "./subtree_store_file.ts";

/** The manifest replayed: live segments, per-partition sorted-through seqs, the largest id seen. */
export type ManifestState = {
  live: Map<number, SegmentMeta>;
  /** Live subtree stores by id (ids are shared with segments). */
  subtrees: Map<number, SubtreeStoreMeta>;
  sortedThrough: Map<string, number>;
  maxSegmentId: number;
  records: number;
  /** What the last split did (null: no split has switched). */
  lastSplit: SplitSummary | null;
  /** Per-topic messages and record bytes of closed files by id (files closed before TOPICS records have none). */
  counts: Map<number, readonly TopicCount[]>;
  /**
   * Journal generations started and not retired, with their first seqs, from JOURNAL records:
   * what recovery checks the journal directory against (empty: a directory written before them,
   * or a manifest rebuilt from files, which has nothing to check against).
   */
  journals: Map<number, number>;
};

/** Why the manifest could not be used as is (then the store rebuilds it from segment files). */
export type ManifestLoad =
  | { ok: true; state: ManifestState; bytes: number; cutBytes: number }
  | { ok: false; exists: boolean; offset: number; problem: string };

/** Reads and replays MANIFEST. */
export async function loadManifest(context: StoreContext): Promise<ManifestLoad> {
  const names = await context.disk.list("");
  if (!names.includes(MANIFEST_PATH))
    return { ok: false, exists: false, offset: 0, problem: "missing" };
  const file = await context.disk.open(MANIFEST_PATH, "read");
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await file.size());
    let filled = 0;
    while (filled < bytes.length) {
      const read = await file.read(filled, bytes.subarray(filled));
      if (read === 0) break;
      filled += read;
    }
    bytes = bytes.subarray(0, filled);
  } finally {
    await file.close();
  }
  const header = decodeFileHeader(bytes, "manifest", context.crc32);
  if (typeof header === "string") return { ok: false, exists: true, offset: 0, problem: header };
  const decoded = decodeManifestRecords(bytes.subarray(header.bytes), context.crc32);
  if (decoded.unknownKind !== undefined) {
    // Cutting it as a torn tail would orphan every file listed after it (and the next open
    // would remove them): refuse instead, changing nothing.
    throw new StoreError(
      "ARIA_ERR_STORE_FORMAT",
      `"${MANIFEST_PATH}" holds a record of kind ${decoded.unknownKind} at offset ${header.bytes + decoded.validBytes}, which this build does not know (a newer build wrote it); nothing was changed: open the directory with that build`,
    );
  }
  let validBytes = bytes.length;
  if (decoded.problem !== null) {
    validBytes = header.bytes + decoded.validBytes;
    // A torn last append (a crash before its sync) has nothing valid after it: cut it. A valid
    // record further on means the damage is in the middle: the caller rebuilds from segments.
    for (let at = validBytes + 1; at < bytes.length; at++) {
      if (decodeManifestRecords(bytes.subarray(at), context.crc32).records.length > 0) {
        return { ok: false, exists: true, offset: validBytes, problem: decoded.problem };
      }
    }
  }
  const state: ManifestState = {
    live: new Map(),
    subtrees: new Map(),
    sortedThrough: new Map(),
    maxSegmentId: 0,
    records: decoded.records.length,
    lastSplit: null,
    counts: new Map(),
    journals: new Map(),
  };
  for (const record of decoded.records) applyRecord(state, record);
  return { ok: true, state, bytes: validBytes, cutBytes: bytes.length - validBytes };
}

function applyRecord(state: ManifestState, record: ManifestRecord): void {
  if (record.kind === MANIFEST_ADD) {
    const segment = record.segment;
    state.live.set(segment.id, segment);
    state.maxSegmentId = Math.max(state.maxSegmentId, segment.id);
    raise(state.sortedThrough, segment.partition, segment.lastSeq);
  } else if (record.kind === MANIFEST_REMOVE) {
    state.live.delete(record.id);
    state.counts.delete(record.id);
  } else if (record.kind === MANIFEST_TOPICS) {
    state.counts.set(record.id, record.topics);
  } else if (record.kind === MANIFEST_WATERMARK) {
    raise(state.sortedThrough, record.partition, record.seq);
  } else if (record.kind === MANIFEST_SWAP) {
    for (const id of record.removed) {
      state.live.delete(id);
      state.subtrees.delete(id);
      state.counts.delete(id);
    }
    for (const subtree of record.added) {
      state.subtrees.set(subtree.id, subtree);
      state.maxSegmentId = Math.max(state.maxSegmentId, subtree.id);
      raise(state.sortedThrough, subtree.partition, subtree.lastSeq);
    }
    // A split's SWAP (a retention's adds nothing); the SPLIT record after it, when there is one,
    // says the rest.
    if (record.added.length > 0) state.lastSplit = splitOfSubtreeStores(record.added);
  } else if (record.kind === MANIFEST_SPLIT) {
    state.lastSplit = record.split;
  } else if (record.kind === MANIFEST_JOURNAL) {
    if (record.event === "started") state.journals.set(record.gen, record.firstSeq);
    else state.journals.delete(record.gen);
  }
}

/**
 * The last split as its subtree stores alone tell it (no SPLIT record: a build before it, a SPLIT
 * lost with a torn tail, a manifest rebuilt from files): the newest generation among `subtrees`,
 * its subtree stores and bytes; null without subtree stores.
 */
export function splitOfSubtreeStores(subtrees: Iterable<SubtreeStoreMeta>): SplitSummary | null {
  let generation = -1;
  let storesWritten = 0;
  let storeBytes = 0;
  for (const subtree of subtrees) {
    if (subtree.generation > generation) {
      generation = subtree.generation;
      storesWritten = 0;
      storeBytes = 0;
    }
    if (subtree.generation === generation) {
      storesWritten++;
      storeBytes += subtree.bytes;
    }
  }
  if (generation < 0) return null;
  return {
    generation,
    storesWritten,
    storeBytes,
    finishedUs: null,
    durationUs: null,
    algorithm: null,
    plan: null,
  };
}

function raise(map: Map<string, number>, key: string, value: number): void {
  if ((map.get(key) ?? 0) < value) map.set(key, value);
}

/** Opens MANIFEST for appending after its `bytes` valid bytes. */
export async function openManifestForAppend(
  context: StoreContext,
  bytes: number,
  records: number,
): Promise<void> {
  const manifest = context.manifest;
  manifest.file = await context.disk.open(MANIFEST_PATH, "write");
  manifest.bytes = bytes;
  manifest.records = records;
}

/** Appends `records` and syncs: once this resolves they are in force. */
export function appendManifest(
  context: StoreContext,
  records: readonly ManifestRecord[],
): Promise<void> {
  if (records.length === 0) return Promise.resolve();
  return context.manifest.locked(() => appendNow(context, records));
}

/** Appends and syncs `records`; the caller already holds `context.locked`. */
export async function appendManifestLocked(
  context: StoreContext,
  records: readonly ManifestRecord[],
): Promise<void> {
  await appendNow(context, records);
}

async function appendNow(context: StoreContext, records: readonly ManifestRecord[]): Promise<void> {
  const manifest = context.manifest;
  const file = manifest.file;
  assert(file !== null, "manifest: not open");
  const bytes = encodeManifestRecords(records, context.crc32);
  try {
    await file.write(manifest.bytes, bytes);
    await file.sync();
  } catch (error) {
    if (isOutOfSpace(error)) await cutBack(file, manifest.bytes, error as Error);
    throw error;
  }
  manifest.bytes += bytes.length;
  manifest.records += records.length;
}

/**
 * After an append that failed for lack of space: cuts MANIFEST back to `bytes`, its length before
 * the append, and fsyncs it, so that no part of the append can take effect (a record written but
 * not synced could otherwise reach the disk later, or survive a crash, and put in force a pack the
 * sorter removed); the append can then be tried again at the same place. A cut that fails throws
 * an error that is not a lack of space: the caller fails the store, as only the next open can tell
 * where the manifest ends.
 */
async function cutBack(file: DiskFile, bytes: number, cause: Error): Promise<void> {
  try {
    await file.truncate(bytes);
    await file.sync();
  } catch (error) {
    throw new StoreError(
      "ARIA_ERR_STORE_IO",
      `"${MANIFEST_PATH}": an append failed (${cause.message}) and cutting it back to ${bytes} bytes failed too: ${(error as Error).message}`,
    );
  }
}

/** Rewrites MANIFEST from the live state in `context` (tmp file, sync, rename, directory sync). */
export function rewriteManifest(context: StoreContext): Promise<void> {
  return context.manifest.locked(() => rewriteNow(context));
}

async function rewriteNow(context: StoreContext): Promise<void> {
  const records: ManifestRecord[] = [];
  // Each file's counts before the record that puts it in force, as the sorter and a switch write them.
  for (const [id, topics] of context.inForce.fileCounts)
    records.push({ kind: MANIFEST_TOPICS, id, topics });
  const subtrees: SubtreeStoreMeta[] = [];
  for (const log of context.partitions.list) subtrees.push(...log.subtreeStores);
  if (subtrees.length > 0) records.push({ kind: MANIFEST_SWAP, removed: [], added: subtrees });
  for (const log of context.partitions.list) {
    for (const segment of log.segments) records.push({ kind: MANIFEST_ADD, segment });
    if (log.sortedThrough > 0)
      records.push({ kind: MANIFEST_WATERMARK, partition: log.name, seq: log.sortedThrough });
  }
  // The journals in force (named: a staged one's record follows its promotion).
  for (const journal of context.journal.generations)
    if (journal.created)
      records.push({
        kind: MANIFEST_JOURNAL,
        event: "started",
        gen: journal.gen,
        firstSeq: journal.firstSeq,
      });
  // Last: its SWAP above would otherwise stand for the last split (replay reads them in order).
  if (context.manifest.lastSplit !== null)
    records.push({ kind: MANIFEST_SPLIT, split: context.manifest.lastSplit });
  const header = encodeFileHeader(
    { kind: "manifest", id: 0, firstSeq: 0, name: "" },
    context.crc32,
  );
  const body = encodeManifestRecords(records, context.crc32);
  try {
    const tmp: DiskFile = await context.disk.open(MANIFEST_TMP_PATH, "create");
    try {
      await tmp.write(0, header);
      await tmp.write(header.length, body);
      await tmp.sync();
    } finally {
      await tmp.close();
    }
  } catch (error) {
    // The old MANIFEST is untouched and stays in use: a half-written tmp goes (the next open
    // would remove it too), so that a full disk gets its space back.
    await context.disk.remove(MANIFEST_TMP_PATH).catch(() => {});
    throw error;
  }
  if (context.manifest.file !== null) await context.manifest.file.close();
  context.manifest.file = null;
  await context.disk.rename(MANIFEST_TMP_PATH, MANIFEST_PATH);
  await context.disk.syncDir("");
  await openManifestForAppend(context, header.length + body.length, records.length);
}

/**
 * Rewrites the manifest when it holds many more records than the live set needs. A rewrite the
 * disk has no room for leaves the old manifest in use and is tried again after the next sort.
 */
export async function compactManifestMaybe(context: StoreContext): Promise<void> {
  let live = 0;
  for (const log of context.partitions.list)
    live += log.segments.length + log.subtreeStores.length + 1;
  live += context.inForce.fileCounts.size;
  live += context.journal.generations.length;
  if (
    context.manifest.records > MANIFEST_RECORDS_COMPACT_MIN &&
    context.manifest.records > 2 * live
  ) {
    try {
      await rewriteManifest(context);
    } catch (error) {
      if (!isOutOfSpace(error)) throw error;
    }
  }
}
