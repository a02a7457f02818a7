/**
 * recovery: what Store.open does before the first append — bring the data directory to a state
 * the store can trust, and say what it did.
 *
 * 1. Manifest: replay it (a torn last append is cut); if it is missing or damaged in the middle
 *    while segment files exist, rebuild it from the segment files, checking every record.
 * 2. Segments: a live segment or subtree store without its file (its pack, its own `.seg`, its
 *    `.sto`) is damage: with repair it is dropped and its seqs reported lost; without its index,
 *    the index is rebuilt (a packed one carries its index in the pack). A file shorter than its
 *    manifest entries is damage (one size per file: no checksum at an ordinary open; reads check
 *    them). With repair every closed file is checked record by record and a damaged one rewritten
 *    from its intact records (salvage.ts). Files no live segment owns (an interrupted close or
 *    retention) are removed — a pack once no live segment lies in it.
 * 3. Journals, oldest first: records already in a segment of their partition are skipped (so a
 *    crash between "segment in force" and "journal dropped" never duplicates), the rest become
 *    pending. The first bad record of the newest journal is a torn tail: the file is cut there.
 *    A bad record anywhere else, or a seq that does not continue, is corruption in the middle.
 *    A staged next generation (`<gen>.next`, written while the newest was being sealed) is
 *    adopted as the newest when its records continue that journal's, else removed.
 *    A journal the manifest's JOURNAL records name (started, not retired) whose file is gone is
 *    damage too: its seqs are reported lost and never given again (missingJournals).
 * 4. A fresh journal generation starts at the next seq (its header records it durably, so seqs
 *    are never reused even when every older journal is dropped), then drained journals go.
 *
 * Corruption in the middle is never skipped silently: it is listed with file and offset, and
 * open fails with ARIA_ERR_STORE_CORRUPT unless `repair` is set (then it is skipped, and reported).
 */
import { JOURNAL_SPARES_MAX, STORE_RECORD_HEADER_BYTES } from "../constants.ts";
import type { StoreContext, JournalInfo } from "./context.ts";
import type { Crc32 } from "./crc32.ts";
import type { Disk, DiskFile } from "./disk.ts";
import { type FileHeader, decodeFileHeader, decodeSyncedBytes } from "./file_header.ts";
import { dropDrainedJournals, keepsSpares, startJournal } from "./journal_files.ts";
import { MANIFEST_JOURNAL, type ManifestRecord } from "./manifest_codec.ts";
import {
  DAMAGED_DIR,
  JOURNAL_DIR,
  damagedPath,
  MANIFEST_PATH,
  SEGMENT_DIR,
  StoreError,
  indexPath,
  journalPath,
  packPath,
  parseFileName,
  segmentPath,
  sparePath,
  stagedPath,
  subtreeStorePath,
} from "./layout.ts";
import {
  type ManifestState,
  loadManifest,
  appendManifest,
  openManifestForAppend,
  rewriteManifest,
  splitOfSubtreeStores,
} from "./manifest.ts";
import { recordSeq, recordTime, recordTopic } from "./record.ts";
import { countRecordsAfter, type ScanResult, scanRecords } from "./scan.ts";
import { scanPack } from "./pack_file.ts";
import { rebuildSegmentIndex } from "./segment_file.ts";
import { decodeSegmentIndex, type SegmentMeta } from "./segment_index.ts";
import { type SalvageRun, salvageClosedFiles } from "./salvage.ts";
import {
  dataPathOf,
  indexSpanOf,
  isSubtreeStore,
  rebuildSubtreeStoreIndex,
  recordSpanOf,
  type SubtreeStoreMeta,
} from "./subtree_store_file.ts";

/** A problem found at open: where, what, what the store did, and whether data was lost. */
export type RecoveryProblem = {
  file: string;
  offset: number;
  problem: string;
  action: string;
  dataLost: boolean;
};

/** Damaged bytes moved aside: from `file` bytes [offset, offset + bytes), copied into `to`. */
export type MovedRegion = { file: string; offset: number; bytes: number; to: string };

/** An inclusive range of seqs whose records are lost, and the file they were in. */
export type LostSeqs = { first: number; last: number; file: string };

/** What Store.open found and did. */
export type RecoveryReport = {
  nextSeq: number;
  journalsReplayed: number;
  /** Staged journals (a roll's next generation, written while the one before was sealed) given their name: their records continued the newest journal's. */
  journalsAdopted: number;
  /** Journal records restored as not yet sorted into segments. */
  recordsReplayed: number;
  segments: number;
  /** Torn tails cut: file, offset of the cut, bytes dropped, valid-looking records found after it. */
  cuts: { file: string; offset: number; bytesCut: number; recordsAfterCut: number }[];
  filesRebuilt: string[];
  filesRemoved: string[];
  manifestRebuilt: boolean;
  problems: RecoveryProblem[];
  /** Inclusive seq ranges whose records are not in the store after a repair open (empty otherwise). */
  lostSeqs: LostSeqs[];
  /** With repair: damaged bytes copied into `damaged/` (the files they came from are then retired). */
  damaged: MovedRegion[];
};

const HEADER_PROBE_BYTES = 512;

/** Records a problem found at open: `action` is what repair does (without it, open refuses). */
type ProblemSink = (file: string, offset: number, what: string, action: string) => void;

/** What the phases of one recovery share. */
type Recovery = {
  context: StoreContext;
  disk: Disk;
  report: RecoveryReport;
  problem: ProblemSink;
  /** The largest seq seen or possibly written anywhere (records, headers, damaged regions). */
  maxSeq: number;
  /** Changes made only once the open is sure to go ahead (a refusal changes nothing). */
  later: (() => Promise<void>)[];
  /** The journals the manifest's JOURNAL records name as started (gen → first seq). */
  started: Map<number, number>;
};

/** The ids of the files in the segment directory, by kind. */
type DataFiles = {
  segmentIds: Set<number>;
  indexIds: Set<number>;
  subtreeIds: Set<number>;
  packIds: Set<number>;
};

/** The manifest recovery goes on from, and how it is put back in force. */
type ManifestInForce = {
  state: ManifestState;
  /** Written anew at the end (rebuilt, or a file in it dropped); else appended to. */
  rewrite: boolean;
  /** Bytes of the loaded manifest kept (where appends go on), 0 when rebuilt. */
  bytes: number;
};

/** Recovers `context` from its disk; throws StoreError ARIA_ERR_STORE_CORRUPT on unrepaired corruption. */
export async function recover(context: StoreContext): Promise<RecoveryReport> {
  const { disk } = context;
  const repair = context.options.repair;
  const report = emptyReport();
  const problem: ProblemSink = (file, offset, what, action) => {
    report.problems.push({
      file,
      offset,
      problem: what,
      action: repair ? action : "refused to open",
      dataLost: true,
    });
  };
  const run: Recovery = {
    context,
    disk,
    report,
    problem,
    maxSeq: 0,
    later: [],
    started: new Map(),
  };
  await disk.mkdir(JOURNAL_DIR);
  await disk.mkdir(SEGMENT_DIR);

  // 1. Manifest.
  const files = await listDataFiles(disk);
  const manifest = await loadOrRebuildManifest(run, files);
  run.started = manifest.state.journals;
  // 2. Segments and subtree stores against the files present (with repair, checked record by
  // record and the damaged ones rewritten), then in the partitions.
  if (await dropMissingFiles(run, manifest.state, files)) manifest.rewrite = true;
  if (repair) {
    raiseMaxSegmentId(manifest.state, files);
    if (await salvageClosedFiles(salvageRun(run), manifest.state)) manifest.rewrite = true;
  } else {
    await checkClosedSizes(run, manifest.state);
  }
  const orphans = orphanFiles(manifest.state, files);
  let nextSeq = installFiles(context, manifest.state, report);
  // 3. Journals.
  const journals = await sortJournalDir(run);
  nextSeq = await replayJournals(run, journals, nextSeq);
  missingJournals(run, manifest.state.journals, journals.gens);
  nextSeq = Math.max(nextSeq, run.maxSeq + 1);
  if (report.problems.some((p) => p.dataLost) && !repair) {
    await context.files.closeAll();
    throw new StoreError("ARIA_ERR_STORE_CORRUPT", corruptMessage(report));
  }
  // 4. Torn tails cut, manifest in force, then orphans gone, fresh journal, drained journals
  // dropped.
  for (const change of run.later) await change();
  // The manifest in force before the orphans go: a file a repair rewrote (salvage.ts) is named by
  // the old manifest until the rewrite; removed first, a crash between would lose its records.
  if (manifest.rewrite) await rewriteManifest(context);
  else await openManifestForAppend(context, manifest.bytes, manifest.state.records);
  await removeOrphans(run, orphans);
  await reconcileJournalRecords(context, manifest.state.journals);
  context.journal.nextSeq = nextSeq;
  context.journal.writtenSeq =
    context.journal.syncedSeq =
    context.journal.committedSeq =
      nextSeq - 1;
  const gens = journals.gens;
  const gen = (gens.length > 0 ? gens[gens.length - 1] : 0) + 1;
  await startJournal(context, gen, nextSeq);
  await dropDrainedJournals(context);
  report.nextSeq = nextSeq;
  return report;
}

function emptyReport(): RecoveryReport {
  return {
    nextSeq: 1,
    journalsReplayed: 0,
    journalsAdopted: 0,
    recordsReplayed: 0,
    segments: 0,
    cuts: [],
    filesRebuilt: [],
    filesRemoved: [],
    manifestRebuilt: false,
    problems: [],
    lostSeqs: [],
    damaged: [],
  };
}

/** The segment directory's files by kind (names that are none of them are left alone). */
async function listDataFiles(disk: Disk): Promise<DataFiles> {
  const files: DataFiles = {
    segmentIds: new Set(),
    indexIds: new Set(),
    subtreeIds: new Set(),
    packIds: new Set(),
  };
  for (const name of await disk.list(SEGMENT_DIR)) {
    const parsed = parseFileName(name);
    if (parsed?.kind === "segment") files.segmentIds.add(parsed.n);
    else if (parsed?.kind === "index") files.indexIds.add(parsed.n);
    else if (parsed?.kind === "store") files.subtreeIds.add(parsed.n);
    else if (parsed?.kind === "pack") files.packIds.add(parsed.n);
  }
  return files;
}

/**
 * Phase 1: the manifest as loaded (a torn last append cut, the rest made durable), or, when it is
 * missing or damaged, rebuilt from the data files (whose rebuilt indexes join `files.indexIds`).
 */
async function loadOrRebuildManifest(run: Recovery, files: DataFiles): Promise<ManifestInForce> {
  const { context, disk, report } = run;
  const dataFiles = files.segmentIds.size + files.subtreeIds.size + files.packIds.size;
  const loaded = await loadManifest(context);
  // A manifest that does not name files whose records are nowhere else lost records (cut, say,
  // to a length that looks like a torn append): trusted, it would have those files removed.
  const unheld = loaded.ok ? await unheldOrphans(run, loaded.state, files) : [];
  if (loaded.ok && unheld.length > 0) {
    report.problems.push({
      file: MANIFEST_PATH,
      offset: loaded.bytes,
      problem: `does not name ${unheld.join(", ")}, whose records are nowhere else (records lost from the manifest)`,
      action: "rebuilt from the files",
      dataLost: false,
    });
  } else if (loaded.ok) {
    // What was read may sit only in the page cache (an append whose fsync failed, then kill -9):
    // make it durable before trusting it, as journals are below. Otherwise the journals its ADD
    // records drain are dropped, and a power loss then takes the ADD and the records with it.
    const file = await disk.open(MANIFEST_PATH, "write");
    if (loaded.cutBytes > 0) await file.truncate(loaded.bytes);
    await file.sync();
    await file.close();
    if (loaded.cutBytes > 0) {
      report.cuts.push({
        file: MANIFEST_PATH,
        offset: loaded.bytes,
        bytesCut: loaded.cutBytes,
        recordsAfterCut: 0,
      });
    }
    return { state: loaded.state, rewrite: false, bytes: loaded.bytes };
  }
  if (!loaded.ok && loaded.exists && dataFiles > 0) {
    report.problems.push({
      file: MANIFEST_PATH,
      offset: loaded.offset,
      problem: loaded.problem,
      action: "rebuilt from segment files",
      dataLost: false,
    });
  }
  const state = await rebuildFromSegments(context, files, report, run.problem);
  report.manifestRebuilt = dataFiles > 0;
  // The rebuild wrote fresh indexes for segment files of their own (a packed one's is in its pack).
  for (const segment of state.live.values())
    if (segment.pack === undefined) files.indexIds.add(segment.id);
  for (const id of state.subtrees.keys()) files.indexIds.add(id);
  return { state, rewrite: true, bytes: 0 };
}

/**
 * The data files `state` does not name whose records are not provably held elsewhere: a packed
 * segment is held when its partition is sorted past it (a later file holds it, or retention
 * removed it on purpose) or the journals still hold it (it starts at or after the oldest
 * journal's first seq: a close that never took effect); a subtree store when every file the
 * manifest names is present (an interrupted split's output: the segments it would replace are
 * live; or an older generation's). A legacy `.seg` is never provably held (reading it to tell
 * would write its index). Empty when the manifest names every file it should.
 */
async function unheldOrphans(
  run: Recovery,
  state: ManifestState,
  files: DataFiles,
): Promise<string[]> {
  const { context, disk } = run;
  const packsInForce = new Set<number>();
  let missing = false;
  for (const segment of state.live.values()) {
    if (segment.pack !== undefined) packsInForce.add(segment.pack.pack);
    const present =
      segment.pack === undefined
        ? files.segmentIds.has(segment.id)
        : files.packIds.has(segment.pack.pack);
    if (!present) missing = true;
  }
  for (const subtree of state.subtrees.values())
    if (!files.subtreeIds.has(subtree.id)) missing = true;
  const unheld: string[] = [];
  let journalStart: number | null = null;
  const heldByJournals = async (firstSeq: number): Promise<boolean> => {
    journalStart ??= await oldestJournalStart(run);
    return firstSeq >= journalStart;
  };
  for (const id of [...files.packIds].sort((a, b) => a - b)) {
    if (packsInForce.has(id)) continue;
    const scan = await scanPack(disk, id, {
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
    });
    for (const segment of scan.segments) {
      const through = state.sortedThrough.get(segment.partition) ?? 0;
      if (segment.lastSeq <= through || (await heldByJournals(segment.firstSeq))) continue;
      unheld.push(packPath(id));
      break;
    }
  }
  for (const id of files.segmentIds)
    if (!state.live.has(id) || state.live.get(id)?.pack !== undefined) unheld.push(segmentPath(id));
  if (missing)
    for (const id of files.subtreeIds)
      if (!state.subtrees.has(id)) unheld.push(subtreeStorePath(id));
  return unheld;
}

/** The first seq of the oldest journal whose header reads (Infinity without one). */
async function oldestJournalStart(run: Recovery): Promise<number> {
  const gens: number[] = [];
  for (const name of await run.disk.list(JOURNAL_DIR)) {
    const parsed = parseFileName(name);
    if (parsed?.kind === "journal") gens.push(parsed.n);
  }
  gens.sort((a, b) => a - b);
  for (const gen of gens) {
    const file = await run.disk.open(journalPath(gen), "read");
    try {
      const header = await readJournalHeader(file, run.context.crc32);
      if (typeof header !== "string" && header.id === gen) return header.firstSeq;
    } finally {
      await file.close();
    }
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * Phase 2a: a live segment or subtree store whose file is missing is dropped; a missing index is
 * rebuilt (the file dropped if unreadable). Whether anything was dropped (the manifest is then
 * rewritten).
 */
async function dropMissingFiles(
  run: Recovery,
  state: ManifestState,
  files: DataFiles,
): Promise<boolean> {
  const { disk } = run;
  const indexOptions = {
    intervalBytes: run.context.options.indexIntervalBytes,
    crc32: run.context.crc32,
  };
  const droppedSegments = await dropMissing(run, files.indexIds, {
    files: state.live,
    present: (segment) =>
      segment.pack === undefined
        ? files.segmentIds.has(segment.id)
        : files.packIds.has(segment.pack.pack),
    kind: "segment",
    holding: (segment) => `"${segment.partition}"`,
    rebuildIndex: (id) => rebuildSegmentIndex(disk, id, indexOptions),
  });
  const droppedStores = await dropMissing(run, files.indexIds, {
    files: state.subtrees,
    present: (subtree) => files.subtreeIds.has(subtree.id),
    kind: "store",
    holding: (subtree) => `${subtree.topics.length} topics of "${subtree.partition}"`,
    rebuildIndex: (id) => rebuildSubtreeStoreIndex(disk, id, indexOptions),
  });
  return droppedSegments || droppedStores;
}

/** dropMissingFiles for one kind of file; whether one was dropped. */
async function dropMissing<M extends SegmentMeta | SubtreeStoreMeta>(
  run: Recovery,
  indexIds: Set<number>,
  of: {
    files: Map<number, M>;
    present: (file: M) => boolean;
    kind: "segment" | "store";
    holding: (file: M) => string;
    rebuildIndex: (id: number) => Promise<unknown>;
  },
): Promise<boolean> {
  let dropped = false;
  for (const file of [...of.files.values()]) {
    const id = file.id;
    const packed = !isSubtreeStore(file) && file.pack !== undefined;
    if (!of.present(file)) {
      run.problem(
        dataPathOf(file),
        0,
        `${of.kind} file missing (seqs ${file.firstSeq}..${file.lastSeq} of ${of.holding(file)})`,
        "dropped from the manifest, its seqs reported lost",
      );
      // Which seqs of the range were this file's is not known: the whole range, an upper bound.
      lose(run, file.firstSeq, file.lastSeq, dataPathOf(file));
      of.files.delete(id);
      dropped = true;
    } else if (!packed && !indexIds.has(id)) {
      const rebuilt = await of.rebuildIndex(id);
      // With repair, salvageClosedFiles keeps the records that are intact and rebuilds the index.
      if (typeof rebuilt === "string" && run.context.options.repair) continue;
      if (typeof rebuilt === "string") {
        run.problem(
          dataPathOf(file),
          0,
          `index missing and ${of.kind} unreadable: ${rebuilt}`,
          "dropped from the manifest",
        );
        of.files.delete(id);
        dropped = true;
      } else {
        run.report.filesRebuilt.push(indexPath(id));
      }
    }
  }
  return dropped;
}

/** Raises `state.maxSegmentId` past every file present: ids a salvage takes are fresh. */
function raiseMaxSegmentId(state: ManifestState, files: DataFiles): void {
  for (const ids of [files.segmentIds, files.indexIds, files.subtreeIds, files.packIds])
    for (const id of ids) state.maxSegmentId = Math.max(state.maxSegmentId, id);
}

/** What salvage.ts needs of this recovery. */
function salvageRun(run: Recovery): SalvageRun {
  return {
    disk: run.disk,
    crc32: run.context.crc32,
    intervalBytes: run.context.options.indexIntervalBytes,
    damaged: (handle, file, from, to, what) => damaged(run, handle, file, from, to, what),
    lose: (first, last, file) => lose(run, first, last, file),
    filesRebuilt: run.report.filesRebuilt,
  };
}

/**
 * Phase 2a without repair: every closed file the manifest names is at least as long as its
 * entries say (one size per file: an open stays cheap; checksums are checked as records are read,
 * and by `aria repair`). A shorter one is damage: the open refuses, naming it.
 */
async function checkClosedSizes(run: Recovery, state: ManifestState): Promise<void> {
  const needed = new Map<string, number>();
  const files: (SegmentMeta | SubtreeStoreMeta)[] = [...state.live.values()];
  files.push(...state.subtrees.values());
  for (const meta of files) {
    const span = recordSpanOf(meta);
    const index = indexSpanOf(meta);
    const end = index.bytes >= 0 ? index.position + index.bytes : span.end;
    needed.set(span.path, Math.max(needed.get(span.path) ?? 0, end));
  }
  for (const [path, bytes] of needed) {
    const size = await sizeOf(run.disk, path);
    if (size < bytes)
      run.problem(
        path,
        size,
        `file ends early: ${size} bytes, the manifest's entries need ${bytes}`,
        "its intact records rewritten, the seqs after the cut reported lost",
      );
  }
}

/**
 * Phase 2b: files no live segment or subtree store owns (an interrupted close, retention or split),
 * to be removed once open is sure to go ahead. Also raises `state.maxSegmentId` past every file
 * present.
 */
function orphanFiles(state: ManifestState, files: DataFiles): string[] {
  const { segmentIds, indexIds, subtreeIds, packIds } = files;
  const orphans: string[] = [];
  const packsInForce = new Set<number>();
  for (const segment of state.live.values())
    if (segment.pack !== undefined) packsInForce.add(segment.pack.pack);
  for (const id of new Set([...segmentIds, ...indexIds, ...subtreeIds, ...packIds])) {
    state.maxSegmentId = Math.max(state.maxSegmentId, id);
    if (packIds.has(id) && !packsInForce.has(id)) orphans.push(packPath(id));
    const owned =
      (state.live.has(id) && state.live.get(id)?.pack === undefined) || state.subtrees.has(id);
    if (owned) continue;
    if (segmentIds.has(id)) orphans.push(segmentPath(id));
    if (subtreeIds.has(id)) orphans.push(subtreeStorePath(id));
    if (indexIds.has(id)) orphans.push(indexPath(id));
  }
  return orphans;
}

/**
 * Phase 2c: the live segments and subtree stores into their partitions, with what they hold per
 * topic, their sorted-through seqs, the newest publish time and the next file id. The next seq
 * they imply (journal replay below may raise it).
 */
function installFiles(context: StoreContext, state: ManifestState, report: RecoveryReport): number {
  const live = [...state.live.values()].sort((a, b) => a.firstSeq - b.firstSeq);
  for (const segment of live) {
    context.partitions.log(segment.partition).segments.push(segment);
    context.inForce.hold(segment);
  }
  for (const subtree of [...state.subtrees.values()].sort((a, b) => a.id - b.id)) {
    const log = context.partitions.log(subtree.partition);
    log.subtreeStores.push(subtree);
    log.sortedThrough = Math.max(log.sortedThrough, subtree.lastSeq);
  }
  report.segments += state.subtrees.size;
  // A manifest rebuilt from files has no SPLIT record: the subtree stores in force say what they
  // can.
  context.manifest.lastSplit = state.lastSplit ?? splitOfSubtreeStores(state.subtrees.values());
  // What the closed files hold per topic, from their TOPICS records (no file is read); files
  // without one (closed by an earlier build, or a manifest rebuilt from files) are counted later.
  for (const file of [...live, ...state.subtrees.values()]) {
    const counts = state.counts.get(file.id);
    // Counts that do not add up to the file's records are not trusted: measured again.
    if (
      counts === undefined ||
      counts.reduce((sum, count) => sum + count.messages, 0) !== file.records
    )
      context.inForce.uncounted.add(file.id);
    else context.inForce.count(file.id, counts, true);
  }
  for (const [name, seq] of state.sortedThrough) context.partitions.log(name).sortedThrough = seq;
  for (const segment of live) {
    const log = context.partitions.log(segment.partition);
    log.sortedThrough = Math.max(log.sortedThrough, segment.lastSeq);
  }
  // The newest publish time so far (journal replay below may raise it): the broker's times go
  // on from it after a restart, whatever the clock says.
  for (const file of [...live, ...state.subtrees.values()])
    context.journal.newestTimeUs = Math.max(context.journal.newestTimeUs, file.lastTimeUs);
  context.inForce.nextSegmentId = state.maxSegmentId + 1;
  report.segments += live.length;
  let nextSeq = 1;
  for (const log of context.partitions.list) nextSeq = Math.max(nextSeq, log.sortedThrough + 1);
  return nextSeq;
}

/** The journal directory sorted out: generations to replay, and the staged one that may follow. */
type JournalDir = {
  /** Journal generations, oldest first (an adopted staged one is appended during replay). */
  gens: number[];
  /** The staged generation right after the newest journal, or -1. */
  stagedNext: number;
};

/**
 * Phase 3a: lists the journal directory. Staged files other than the generation after the newest
 * journal are removed; spares (no records) are kept as spares up to JOURNAL_SPARES_MAX, the rest
 * removed (journal_files.ts).
 */
async function sortJournalDir(run: Recovery): Promise<JournalDir> {
  const { context, disk, report } = run;
  const gens: number[] = [];
  const spares: number[] = [];
  const staged: number[] = [];
  for (const name of await disk.list(JOURNAL_DIR)) {
    const parsed = parseFileName(name);
    if (parsed?.kind === "journal") gens.push(parsed.n);
    if (parsed?.kind === "spare") spares.push(parsed.n);
    if (parsed?.kind === "staged") staged.push(parsed.n);
  }
  gens.sort((a, b) => a - b);
  // A staged journal (journal_files.ts) is replayed only if it is the generation after the
  // newest and its records continue that journal's: see adoptStaged.
  const stagedNext =
    gens.length > 0 && staged.includes(gens[gens.length - 1] + 1) ? gens[gens.length - 1] + 1 : -1;
  for (const n of staged) {
    if (n === stagedNext) continue;
    await disk.remove(stagedPath(n));
    report.filesRemoved.push(stagedPath(n));
  }
  spares.sort((a, b) => a - b);
  for (const [i, n] of spares.entries()) {
    if (i < JOURNAL_SPARES_MAX && keepsSpares(context)) {
      context.journal.spares.push({ path: sparePath(n), bytes: await sizeOf(disk, sparePath(n)) });
    } else {
      await disk.remove(sparePath(n));
      report.filesRemoved.push(sparePath(n));
    }
  }
  context.journal.nextSpareId = Math.max(0, ...spares, ...gens) + 1;
  return { gens, stagedNext };
}

/**
 * Phase 3b: replays the journals oldest first, then adopts or removes the staged generation after
 * the newest. The next seq: past `nextSeq`, every journal's records and every seq a damaged
 * region may have held.
 */
async function replayJournals(
  run: Recovery,
  journals: JournalDir,
  nextSeq: number,
): Promise<number> {
  const { gens } = journals;
  let { stagedNext } = journals;
  let expected = 0;
  let previous = "";
  for (let i = 0; i < gens.length; i++) {
    const gen = gens[i];
    const isLast = i === gens.length - 1;
    const missing = i > 0 && gen > gens[i - 1] + 1 ? journalPath(gens[i - 1] + 1) : previous;
    const after = await replayJournal(run, gen, { isLast, expected, minSeq: nextSeq, missing });
    if (after === null) continue;
    expected = after;
    previous = journalPath(gen);
    nextSeq = Math.max(nextSeq, expected);
    if (isLast && stagedNext === gen + 1) {
      // The newest journal's seal was under way: the staged generation after it counts when its
      // records continue this one's (then nothing was lost between them; after a process kill
      // the page cache holds both whole), else its records follow a hole and go.
      if (await adoptStaged(run.context, gen + 1, expected, run.report)) gens.push(gen + 1);
      stagedNext = -1;
    }
  }
  if (stagedNext >= 0) await removeAsCut(run.disk, stagedPath(stagedNext), run.report);
  return Math.max(nextSeq, run.maxSeq + 1);
}

/** Where journal `gen` stands among the others: see replayJournal. */
type JournalPosition = {
  isLast: boolean;
  /** The seq its first record must have (the previous journal's end), 0 for the first one. */
  expected: number;
  /** Records below this seq are an older generation's (a recycled file's), never this one's. */
  minSeq: number;
  /** The file to name when seqs are missing before it (a missing generation, or the previous journal). */
  missing: string;
};

/**
 * Replays journal `gen` into the partitions and lists it; the seq after its last good record, or
 * null when it holds nothing to replay (a newest journal whose header is bad with nothing valid
 * after it is removed, as a creation a crash cut short — unless the manifest records it started:
 * then it is damage, every seq it could hold lost; an older one is a problem).
 *
 * A bad region is a **torn tail** only in the newest journal, with no valid record after it
 * (nothing with a continuing or later seq), and past the synced point its header's slots claim
 * (file_header.ts; a version-1 journal claims none). Anything else is **damage**: a problem
 * (open refuses) naming file and offset. With `repair`, each damaged region's bytes are copied
 * into `damaged/`, replay resyncs on the next valid record with a continuing or later seq, and
 * the seqs between are reported lost; a damaged tail of the newest journal may have held seqs up
 * to what the journal could hold, all reported lost and all skipped (a seq is never reused).
 */
async function replayJournal(
  run: Recovery,
  gen: number,
  position: JournalPosition,
): Promise<number | null> {
  const { context, disk, report } = run;
  const { isLast, expected } = position;
  const path = journalPath(gen);
  const file = await disk.open(path, "write");
  try {
    const fileBytes = await file.size();
    const probe = new Uint8Array(HEADER_PROBE_BYTES);
    const probed = probe.subarray(0, await file.read(0, probe));
    const header = decodeFileHeader(probed, "journal", context.crc32);
    const floor = Math.max(expected, position.minSeq) - 1;
    let start: number;
    let firstSeq: number;
    let synced = 0;
    if (typeof header === "string" || header.id !== gen || header.bytes > fileBytes) {
      const what =
        typeof header === "string"
          ? header
          : header.id !== gen
            ? `header names generation ${header.id}`
            : "file header cut short";
      const after = await countRecordsAfter(file, 0, floor, context.crc32);
      const started = run.started.get(gen);
      if (after.records === 0 && isLast && started !== undefined) {
        // The manifest records this journal started, which it does only once the file and its
        // header are durable: a bad header now is damage, not a creation cut short, and the
        // journal may have held acknowledged records. Every seq it could have held is lost.
        await damaged(run, file, path, 0, fileBytes, `${what}; the manifest records it started`);
        lose(run, started, started - 1 + journalCapacity(context), path);
        run.later.push(() => removeAsCut(disk, path, report));
        return null;
      }
      if (after.records === 0 && isLast) {
        // A journal whose creation was cut short by a crash: it never held an acknowledged
        // record (nothing valid follows its header). Removed once the open is sure to go ahead.
        run.later.push(() => removeAsCut(disk, path, report));
        return null;
      }
      if (after.records === 0) {
        // A sealed journal whose header is gone and no record of it reads: its bytes go to
        // damaged/ and the file goes (left, every open would refuse it again). The seqs it held
        // are reported lost by the next journal (from the seq this one started at, when the
        // manifest records it, else from where the journal before ended).
        await damaged(run, file, path, 0, fileBytes, `${what}; no valid record follows`);
        run.later.push(() => removeAsCut(disk, path, report));
        // Returned as where this journal ended: the next one's lost seqs are named after it.
        return (expected !== 0 ? expected : started) ?? null;
      }
      // Valid records follow a bad header: damage, never a creation cut short.
      await damaged(run, file, path, 0, after.firstOffset, `${what}; valid records follow`);
      start = after.firstOffset;
      firstSeq = after.firstSeq;
      if (expected !== 0 && firstSeq > expected) lose(run, expected, firstSeq - 1, path);
    } else {
      start = header.bytes;
      firstSeq = header.firstSeq;
      synced = decodeSyncedBytes(probed, gen, context.crc32);
      run.maxSeq = Math.max(run.maxSeq, firstSeq - 1);
      if (expected !== 0 && firstSeq !== expected) {
        run.problem(
          path,
          0,
          `journal starts at seq ${firstSeq}, expected ${expected}`,
          "continued at the journal's first seq",
        );
        if (firstSeq > expected) lose(run, expected, firstSeq - 1, position.missing || path);
      }
    }
    const info: JournalInfo = {
      gen,
      path,
      firstSeq,
      bytes: start,
      pendingRecords: 0,
      created: true,
    };
    let next = firstSeq;
    for (;;) {
      const replayed = await replayRecords(context, file, info, report, next);
      const scan = replayed.scan;
      next = replayed.next;
      info.bytes = scan.end;
      run.maxSeq = Math.max(run.maxSeq, next - 1);
      if (scan.problem === null) break;
      const bad = scan.end;
      const after = await countRecordsAfter(
        file,
        bad,
        Math.max(next, position.minSeq) - 1,
        context.crc32,
      );
      // Records after the bad region all past the synced point: unsynced writes that a crash
      // (a power loss) kept out of order; no `always` commit had waited on them.
      if (isLast && bad >= synced && (after.records === 0 || after.firstOffset >= synced)) {
        // Cut once the open is sure to go ahead: a refusal changes nothing.
        run.later.push(() => truncateDurably(disk, path, bad));
        report.cuts.push({
          file: path,
          offset: bad,
          bytesCut: scan.fileBytes - bad,
          recordsAfterCut: after.records,
        });
        break;
      }
      if (after.records > 0) {
        await damaged(run, file, path, bad, after.firstOffset, scan.problem);
        if (after.firstSeq > next) lose(run, next, after.firstSeq - 1, path);
        run.maxSeq = Math.max(run.maxSeq, after.lastSeq);
        next = after.firstSeq;
        info.bytes = after.firstOffset;
        continue;
      }
      await damaged(run, file, path, bad, scan.fileBytes, scan.problem);
      if (isLast) {
        // Seqs after the damage may have been written (and acknowledged): none is ever reused.
        const most = Math.max(scan.fileBytes, synced, context.options.journalBytesMax);
        const bound = next - 1 + Math.ceil((most - bad) / STORE_RECORD_HEADER_BYTES);
        lose(run, next, bound, path);
        run.maxSeq = Math.max(run.maxSeq, bound);
      }
      break;
    }
    // What a restart reads back may sit only in the page cache: make it durable before trusting it.
    await file.sync();
    context.journal.generations.push(info);
    report.journalsReplayed++;
    return next;
  } finally {
    await file.close().catch(() => {});
  }
}

/**
 * Phase 3c: journals the manifest's JOURNAL records name (started, not retired) whose files are
 * gone, before the oldest journal present or after the newest (a gap between two present ones
 * is found by replay: the seqs do not continue). A journal is recorded retired before its file
 * goes, once its records are all in closed files, so one that is not is damage: a problem naming the file ("missing"), and with repair its seqs are reported lost:
 * from its first seq to the next generation's first seq - 1, or for the newest, as many seqs as
 * a journal could hold (none is ever given again). Without JOURNAL records (a directory written
 * before them, a manifest rebuilt from files) there is nothing to check.
 */
function missingJournals(run: Recovery, evidence: Map<number, number>, gens: number[]): void {
  if (evidence.size === 0) return;
  const { context } = run;
  const present = new Set(gens);
  const firstOf = new Map(evidence);
  for (const info of context.journal.generations)
    if (!firstOf.has(info.gen)) firstOf.set(info.gen, info.firstSeq);
  const known = [...firstOf.keys()].sort((a, b) => a - b);
  const oldest = gens.length > 0 ? gens[0] : Number.POSITIVE_INFINITY;
  const newest = gens.length > 0 ? gens[gens.length - 1] : Number.NEGATIVE_INFINITY;
  const capacity = journalCapacity(context);
  for (const [gen, first] of [...evidence].sort((a, b) => a[0] - b[0])) {
    if (present.has(gen) || (gen > oldest && gen < newest)) continue;
    const later = known.find((g) => g > gen);
    const last = later === undefined ? first - 1 + capacity : (firstOf.get(later) as number) - 1;
    if (last < first) continue;
    const path = journalPath(gen);
    run.problem(
      path,
      0,
      `journal missing: the manifest lists generation ${gen} from seq ${first}, and its records are not all in closed files`,
      "its seqs reported lost (never given again)",
    );
    lose(run, first, last, path);
  }
}

/**
 * Phase 4b: the manifest's JOURNAL records brought in line with the journals replayed (one
 * append): a missing one (reported above, or a newest one removed as a creation cut short) is
 * retired, one without a record (a staged one adopted) started. So the next open checks against
 * what this one left.
 */
async function reconcileJournalRecords(
  context: StoreContext,
  evidence: Map<number, number>,
): Promise<void> {
  const records: ManifestRecord[] = [];
  const replayed = new Map(context.journal.generations.map((info) => [info.gen, info.firstSeq]));
  for (const [gen, firstSeq] of evidence)
    if (!replayed.has(gen))
      records.push({ kind: MANIFEST_JOURNAL, event: "retired", gen, firstSeq });
  for (const [gen, firstSeq] of replayed)
    if (evidence.get(gen) !== firstSeq)
      records.push({ kind: MANIFEST_JOURNAL, event: "started", gen, firstSeq });
  await appendManifest(context, records);
}

/** The most records a journal can hold (each at least a record header): a bound on its seqs. */
function journalCapacity(context: StoreContext): number {
  return Math.ceil(context.options.journalBytesMax / STORE_RECORD_HEADER_BYTES);
}

/** Seqs `first`..`last` of `file` are lost (reported; with repair, skipped). */
function lose(run: Recovery, first: number, last: number, file: string): void {
  if (last < first) return;
  run.report.lostSeqs.push({ first, last, file });
  run.maxSeq = Math.max(run.maxSeq, last);
}

/**
 * Damage in `file` (open as `handle`) over bytes [from, to): a problem; with repair, the bytes
 * are copied into `damaged/` (durably) before anything changes the file.
 */
async function damaged(
  run: Recovery,
  handle: DiskFile,
  file: string,
  from: number,
  to: number,
  what: string,
): Promise<void> {
  const detail = `${what} (bytes ${from}..${to})`;
  run.problem(file, from, detail, "bytes moved to damaged/, the records after them kept");
  if (!run.context.options.repair || to <= from) return;
  const to_ = damagedPath(file, from, to - from);
  run.report.damaged.push({ file, offset: from, bytes: to - from, to: to_ });
  const bytes = new Uint8Array(to - from);
  let filled = 0;
  while (filled < bytes.length) {
    const read = await handle.read(from + filled, bytes.subarray(filled));
    if (read === 0) break;
    filled += read;
  }
  await run.disk.mkdir(DAMAGED_DIR);
  const copy = await run.disk.open(to_, "create");
  try {
    await copy.write(0, bytes.subarray(0, filled));
    await copy.sync();
  } finally {
    await copy.close();
  }
  await run.disk.syncDir(DAMAGED_DIR);
}

/**
 * The records of journal `info` from `bytes` on, expecting seq `first`, until the first bad one
 * or one whose seq does not continue: those past their partition's sorted-through seq become
 * pending (counted per topic and in `info`). The scan's result and the seq after the last good
 * record.
 */
async function replayRecords(
  context: StoreContext,
  file: DiskFile,
  info: JournalInfo,
  report: RecoveryReport,
  first: number,
): Promise<{ scan: ScanResult; next: number }> {
  const gen = info.gen;
  let expected = first;
  const scan = await scanRecords(
    file,
    info.bytes,
    context.crc32,
    (bytes, view, at, length, position) => {
      const seq = recordSeq(view, at);
      if (seq !== expected) return `record has seq ${seq}, expected ${expected}`;
      const timeUs = recordTime(view, at);
      const held = context.partitions.topicHeld(recordTopic(bytes, view, at));
      const log = held.log;
      if (seq > log.sortedThrough) {
        held.messages++;
        held.bytes += length;
        log.addPending(seq, timeUs, gen, position, length);
        info.pendingRecords++;
        report.recordsReplayed++;
      }
      context.journal.newestTimeUs = Math.max(context.journal.newestTimeUs, timeUs);
      expected++;
      return undefined;
    },
  );
  return { scan, next: expected };
}

/** Phase 4a: removes the orphan files (phase 2b), and syncs the directory when there were any. */
async function removeOrphans(run: Recovery, orphans: string[]): Promise<void> {
  for (const path of orphans) {
    await run.disk.remove(path);
    run.report.filesRemoved.push(path);
  }
  if (orphans.length > 0) await run.disk.syncDir(SEGMENT_DIR);
}

/**
 * Gives staged generation `gen` its journal name when its header is whole, names `gen` and
 * starts at `expected` (the seq after the newest journal's last record, already durable): the
 * staged file is made durable, renamed, the directory entry synced. Else it is removed
 * (removeAsCut). Whether it was adopted.
 */
async function adoptStaged(
  context: StoreContext,
  gen: number,
  expected: number,
  report: RecoveryReport,
): Promise<boolean> {
  const disk = context.disk;
  const from = stagedPath(gen);
  const file = await disk.open(from, "write");
  let adopted = false;
  try {
    const header = await readJournalHeader(file, context.crc32);
    adopted = typeof header !== "string" && header.id === gen && header.firstSeq === expected;
    if (adopted) await file.sync();
  } finally {
    await file.close().catch(() => {});
  }
  if (!adopted) {
    await removeAsCut(disk, from, report);
    return false;
  }
  await disk.rename(from, journalPath(gen));
  await disk.syncDir(JOURNAL_DIR);
  report.journalsAdopted++;
  return true;
}

/** Cuts the file at `path` to `size` bytes, durably. */
async function truncateDurably(disk: Disk, path: string, size: number): Promise<void> {
  const file = await disk.open(path, "write");
  try {
    await file.truncate(size);
    await file.sync();
  } finally {
    await file.close();
  }
}

/** Removes the journal (or staged file) at `path`, reported as a cut at 0: it holds no record that counts. */
async function removeAsCut(disk: Disk, path: string, report: RecoveryReport): Promise<void> {
  report.cuts.push({
    file: path,
    offset: 0,
    bytesCut: await sizeOf(disk, path),
    recordsAfterCut: 0,
  });
  await disk.remove(path);
  report.filesRemoved.push(path);
}

/** The header of the journal open as `file` (decoded from its first bytes), or what is wrong with it. */
async function readJournalHeader(file: DiskFile, crc32: Crc32): Promise<FileHeader | string> {
  const probe = new Uint8Array(HEADER_PROBE_BYTES);
  return decodeFileHeader(probe.subarray(0, await file.read(0, probe)), "journal", crc32);
}

async function sizeOf(disk: Disk, path: string): Promise<number> {
  const file = await disk.open(path, "read");
  return file.size().finally(() => file.close());
}

async function rebuildFromSegments(
  context: StoreContext,
  ids: { segmentIds: Set<number>; subtreeIds: Set<number>; packIds: Set<number> },
  report: RecoveryReport,
  problem: ProblemSink,
): Promise<ManifestState> {
  const { segmentIds, subtreeIds, packIds } = ids;
  const state: ManifestState = {
    live: new Map(),
    subtrees: new Map(),
    sortedThrough: new Map(),
    maxSegmentId: 0,
    records: 0,
    lastSplit: null,
    counts: new Map(),
    journals: new Map(),
  };
  const found: SegmentMeta[] = [];
  for (const id of [...packIds].sort((a, b) => a - b)) {
    const scan = await scanPack(context.disk, id, {
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
    });
    for (const segment of scan.segments)
      state.maxSegmentId = Math.max(state.maxSegmentId, segment.id);
    found.push(...scan.segments);
    if (scan.problem !== null)
      problem(
        packPath(id),
        scan.offset,
        scan.problem,
        "rest of the pack left out of the rebuilt manifest",
      );
  }
  for (const id of [...segmentIds].sort((a, b) => a - b)) {
    state.maxSegmentId = Math.max(state.maxSegmentId, id);
    const meta = await rebuildSegmentIndex(context.disk, id, {
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
    });
    if (typeof meta === "string") {
      problem(segmentPath(id), 0, meta, "segment left out of the rebuilt manifest");
      continue;
    }
    report.filesRebuilt.push(indexPath(id));
    found.push(meta);
  }
  // Keep, per partition, segments that extend the covered range; overlaps come from a close
  // interrupted before it took effect, whose records the journal still holds.
  found.sort((a, b) => a.firstSeq - b.firstSeq || b.lastSeq - a.lastSeq);
  for (const meta of found) {
    const through = state.sortedThrough.get(meta.partition) ?? 0;
    if (meta.firstSeq <= through) continue;
    state.live.set(meta.id, meta);
    state.sortedThrough.set(meta.partition, meta.lastSeq);
  }
  await rebuildSubtreeStores(context, subtreeIds, state, report);
  return state;
}

/**
 * Subtree store files found without a usable manifest: per partition, each candidate layout is a
 * split generation's subtree stores with the segments after their last seq, or the segments alone;
 * the one holding the most records wins (a complete layout beats one a crash cut short; on a tie
 * the newest split), and the segments it replaces go. Each generation is weighed together with the
 * segments after it: weighed alone, a re-split that a crash cut short could win over the complete
 * split before it and the segments after that, and drop both.
 */
async function rebuildSubtreeStores(
  context: StoreContext,
  subtreeIds: Set<number>,
  state: ManifestState,
  report: RecoveryReport,
): Promise<void> {
  const byPartition = new Map<string, Map<number, SubtreeStoreMeta[]>>();
  for (const id of [...subtreeIds].sort((a, b) => a - b)) {
    state.maxSegmentId = Math.max(state.maxSegmentId, id);
    const meta = await rebuildSubtreeStoreIndex(context.disk, id, {
      intervalBytes: context.options.indexIntervalBytes,
      crc32: context.crc32,
    });
    // An unreadable subtree store is an interrupted split's: an orphan.
    if (typeof meta === "string") continue;
    report.filesRebuilt.push(indexPath(id));
    const generations = byPartition.get(meta.partition) ?? new Map<number, SubtreeStoreMeta[]>();
    byPartition.set(meta.partition, generations);
    generations.set(meta.generation, [...(generations.get(meta.generation) ?? []), meta]);
  }
  for (const [partition, generations] of byPartition) {
    const segments = [...state.live.values()].filter((segment) => segment.partition === partition);
    const recordsAfter = (last: number) =>
      segments.reduce((sum, segment) => sum + (segment.firstSeq > last ? segment.records : 0), 0);
    let best: SubtreeStoreMeta[] | null = null;
    let bestLast = 0;
    let bestRecords = recordsAfter(0);
    for (const generation of [...generations.keys()].sort((a, b) => b - a)) {
      const subtrees = generations.get(generation) as SubtreeStoreMeta[];
      const last = subtrees.reduce((most, subtree) => Math.max(most, subtree.lastSeq), 0);
      const records =
        subtrees.reduce((sum, subtree) => sum + subtree.records, 0) + recordsAfter(last);
      if (records > bestRecords || (records === bestRecords && best === null)) {
        best = subtrees;
        bestLast = last;
        bestRecords = records;
      }
    }
    if (best === null) continue;
    for (const segment of segments) if (segment.firstSeq <= bestLast) state.live.delete(segment.id);
    for (const subtree of best) {
      state.subtrees.set(subtree.id, subtree);
      if ((state.sortedThrough.get(partition) ?? 0) < subtree.lastSeq)
        state.sortedThrough.set(partition, subtree.lastSeq);
    }
  }
}

function corruptMessage(report: RecoveryReport): string {
  const lines = report.problems
    .filter((p) => p.dataLost)
    .map((p) => `  "${p.file}" at offset ${p.offset}: ${p.problem}`);
  return `Cannot open the data directory: ${lines.length} damaged place(s):\n${lines.join("\n")}\nNothing was changed. \`aria repair\` keeps every intact record, moves the damaged bytes into damaged/ and reports the seqs lost (--dry-run: the report alone).`;
}

/** Decodes an index file's bytes (re-exported for the reader's lazy index loads). */
export { decodeSegmentIndex };
