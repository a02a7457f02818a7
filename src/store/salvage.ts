/**
 * salvage: `aria repair`'s check of the closed files the manifest names — each packed segment
 * image (its header, records and index image), each `.seg` and its `.idx`, each subtree store
 * (`.sto`, its head, records and `.idx`) — record by record, and the rewrite of a damaged one.
 *
 *   damaged file ──check──▶ intact records, damaged regions [from, to) with their neighbours' seqs
 *                 ──────▶ regions copied into damaged/ (durably, before anything changes)
 *                 ──────▶ intact records rewritten into a new file (a pack, or a subtree store
 *                          with the same head) under a fresh id; the manifest entry switched
 *
 * Lost seqs: those between the intact neighbours of a damaged region (the file's first seq and
 * last seq at its ends). Which of them were this file's partition's is not known, so the range is
 * an upper bound. A damaged index alone is rebuilt from the records: nothing is lost.
 *
 * Memory: a whole file is checked streaming (a read chunk); a damaged one is read whole to be
 * salvaged (repair needs as much memory as the largest damaged file).
 *
 * Not here: files missing altogether (recovery.ts drops them and reports their seqs), journals,
 * the manifest. Runs only under repair: an ordinary open checks sizes alone (checkClosedSizes),
 * and a read finds a bad checksum (ARIA_ERR_STORE_CORRUPT).
 * Invariant: the old file is never written; it goes (as an orphan) only once no entry names it,
 * after its damaged bytes are durable in damaged/.
 */
import type { Crc32 } from "./crc32.ts";
import { type Disk, type DiskFile, readFully } from "./disk.ts";
import { decodeFileHeader, FILE_HEADER_FIXED_BYTES } from "./file_header.ts";
import { SEGMENT_DIR, indexPath, packPath, subtreeStorePath } from "./layout.ts";
import type { ManifestState } from "./manifest.ts";
import { PackWriter } from "./pack_file.ts";
import { checkRecord, recordSeq, recordTopic } from "./record.ts";
import { scanRecords } from "./scan.ts";
import { rebuildSegmentIndex } from "./segment_file.ts";
import { decodeSegmentIndex, type SegmentMeta } from "./segment_index.ts";
import {
  dataBaseOf,
  decodeSubtreeStoreHead,
  indexSpanOf,
  isSubtreeStore,
  rebuildSubtreeStoreIndex,
  recordSpanOf,
  SubtreeStoreBuilder,
  type SubtreeStoreMeta,
} from "./subtree_store_file.ts";

/** What a salvage needs from the recovery that runs it. */
export type SalvageRun = {
  disk: Disk;
  crc32: Crc32;
  intervalBytes: number;
  /** Damage in `file` (open as `handle`) over bytes [from, to): reported, copied into damaged/. */
  damaged: (
    handle: DiskFile,
    file: string,
    from: number,
    to: number,
    what: string,
  ) => Promise<void>;
  /** Seqs `first`..`last` of `file` are lost. */
  lose: (first: number, last: number, file: string) => void;
  /** Files rebuilt (an index), for the report. */
  filesRebuilt: string[];
};

/** A damaged region of a file: bytes [from, to) (file offsets), between seqs `after` and `before`. */
type Region = { from: number; to: number; after: number; before: number; what: string };

/** What the check of one closed file found. */
type Checked = {
  /** The file's bytes read for the check, from file offset `base`. */
  bytes: Uint8Array;
  view: DataView;
  base: number;
  /** Bytes of the file. */
  size: number;
  /** Intact records: offsets in `bytes`, lengths. */
  kept: { at: number; length: number }[];
  regions: Region[];
  /** The index (image or `.idx`) is unreadable or does not match: rebuilt, nothing lost. */
  indexBad: string | null;
};

/**
 * Checks every closed file `state` names and salvages the damaged ones (see the head comment),
 * taking fresh ids from `state.maxSegmentId`. Whether `state` changed (the manifest is then
 * rewritten).
 */
export async function salvageClosedFiles(run: SalvageRun, state: ManifestState): Promise<boolean> {
  let changed = false;
  const badPacks = await damagedPackHeaders(run, state);
  const files: (SegmentMeta | SubtreeStoreMeta)[] = [...state.live.values()];
  files.push(...state.subtrees.values());
  for (const meta of files) {
    const path = recordSpanOf(meta).path;
    // Its pack's header is damaged: reads do not need it, a manifest rebuilt from the files
    // does. Every image of the pack is rewritten (nothing lost).
    const moved = !isSubtreeStore(meta) && meta.pack !== undefined && badPacks.has(meta.pack.pack);
    const handle = await run.disk.open(path, "read");
    try {
      // Most files are whole: checked streaming, in bounded memory. A damaged one is read whole.
      if (!moved && (await isIntact(run, handle, meta))) continue;
      const checked = await checkFile(run, handle, meta);
      if (checked.regions.length === 0 && checked.indexBad === null && !moved) continue;
      for (const region of checked.regions) {
        const detail = `${region.what}; ${describeLost(region)}`;
        // Bytes past the end of a file cut short are not there to copy.
        const { from, to } = region;
        await run.damaged(
          handle,
          path,
          Math.min(from, checked.size),
          Math.min(to, checked.size),
          detail,
        );
        run.lose(region.after + 1, region.before - 1, path);
      }
      const packed = !isSubtreeStore(meta) && meta.pack !== undefined;
      if (checked.regions.length === 0 && !packed) {
        // The records are whole: only the `.idx` is bad. Set aside, then written anew.
        await rebuildIndex(run, meta, checked.indexBad as string);
        continue;
      }
      if (checked.regions.length === 0 && packed && checked.indexBad !== null) {
        const { position, bytes } = indexSpanOf(meta);
        const what = `index image: ${checked.indexBad}`;
        const end = Math.min(position + bytes, checked.size);
        await run.damaged(handle, path, Math.min(position, end), end, what);
      }
      await replace(run, state, meta, checked);
      changed = true;
    } finally {
      await handle.close();
    }
  }
  return changed;
}

/**
 * The packs holding segments in force whose own file header is damaged (or names another pack),
 * each header's bytes copied into damaged/ first.
 */
async function damagedPackHeaders(run: SalvageRun, state: ManifestState): Promise<Set<number>> {
  const bad = new Set<number>();
  const packs = new Set<number>();
  for (const meta of state.live.values()) if (meta.pack !== undefined) packs.add(meta.pack.pack);
  for (const id of packs) {
    const path = packPath(id);
    const handle = await run.disk.open(path, "read");
    try {
      const head = new Uint8Array(FILE_HEADER_FIXED_BYTES);
      const read = await readFully(handle, 0, head);
      const header = decodeFileHeader(head.subarray(0, read), "pack", run.crc32);
      const problem =
        typeof header === "string" ? header : header.id === id ? null : `names pack ${header.id}`;
      if (problem === null) continue;
      const what = `pack header: ${problem}; its images rewritten, no record lost`;
      await run.damaged(handle, path, 0, read, what);
      bad.add(id);
    } finally {
      await handle.close();
    }
  }
  return bad;
}

function describeLost(region: Region): string {
  if (region.before - region.after <= 1) return "no record lost";
  return `seqs ${region.after + 1}..${region.before - 1} at most lost`;
}

/**
 * Whether `meta`'s head, records (each checked, in seq order within its first..last, of its
 * topics for a store) and index are whole: one streaming scan, no more memory than a read chunk.
 */
async function isIntact(
  run: SalvageRun,
  handle: DiskFile,
  meta: SegmentMeta | SubtreeStoreMeta,
): Promise<boolean> {
  const span = recordSpanOf(meta);
  const base = dataBaseOf(meta);
  const head = new Uint8Array(span.dataStart - base);
  if ((await readFully(handle, base, head)) < head.length) return false;
  if (checkHead(meta, head, run.crc32) !== null) return false;
  const topics = isSubtreeStore(meta) ? new Set(meta.topics) : null;
  let last = meta.firstSeq - 1;
  const scan = await scanRecords(
    handle,
    span.dataStart,
    run.crc32,
    (bytes, view, at) => {
      const seq = recordSeq(view, at);
      if (seq <= last || seq > meta.lastSeq) return "record out of place";
      if (topics !== null && !topics.has(recordTopic(bytes, view, at))) return "foreign topic";
      last = seq;
      return undefined;
    },
    { end: span.end },
  );
  if (scan.problem !== null || scan.end !== span.end || last !== meta.lastSeq) return false;
  return (await checkIndex(run, handle, meta)) === null;
}

/** Checks the head, records and index of `meta` in `handle`. */
async function checkFile(
  run: SalvageRun,
  handle: DiskFile,
  meta: SegmentMeta | SubtreeStoreMeta,
): Promise<Checked> {
  const { crc32 } = run;
  const span = recordSpanOf(meta);
  const base = dataBaseOf(meta);
  const index = indexSpanOf(meta);
  const wanted = (index.bytes >= 0 ? index.position + index.bytes : span.end) - base;
  const size = await handle.size();
  const bytes = new Uint8Array(Math.max(0, Math.min(wanted, size - base)));
  await readFully(handle, base, bytes);
  const view = new DataView(bytes.buffer);
  const checked: Checked = { bytes, view, base, size, kept: [], regions: [], indexBad: null };
  const headEnd = span.dataStart - base;
  const headProblem = checkHead(meta, bytes.subarray(0, Math.min(headEnd, bytes.length)), crc32);
  if (headProblem !== null) {
    const before = meta.firstSeq;
    checked.regions.push({
      from: base,
      to: base + headEnd,
      after: before - 1,
      before,
      what: headProblem,
    });
  }
  const topics = isSubtreeStore(meta) ? new Set(meta.topics) : null;
  const end = Math.min(span.end - base, bytes.length);
  let at = headEnd;
  let last = meta.firstSeq - 1;
  let badFrom = -1;
  let what = "";
  while (at < end) {
    const length = checkRecord(bytes, view, at, end, crc32);
    const seq = length > 0 ? recordSeq(view, at) : 0;
    const fits =
      length > 0 &&
      seq > last &&
      seq <= meta.lastSeq &&
      (topics === null || topics.has(recordTopic(bytes, view, at)));
    if (fits) {
      if (badFrom >= 0) {
        checked.regions.push({
          from: base + badFrom,
          to: base + at,
          after: last,
          before: seq,
          what,
        });
        badFrom = -1;
      }
      checked.kept.push({ at, length });
      last = seq;
      at += length;
      continue;
    }
    if (badFrom < 0) {
      badFrom = at;
      what = length > 0 ? "record out of place" : "record damaged (bad length or checksum)";
    }
    at++;
  }
  const expectedEnd = span.end - base;
  if (badFrom >= 0 || end < expectedEnd) {
    const from = badFrom >= 0 ? badFrom : end;
    const cut = end < expectedEnd ? `file ends early (${base + end} of ${span.end} bytes)` : "";
    checked.regions.push({
      from: base + from,
      to: base + end,
      after: last,
      before: meta.lastSeq + 1,
      what: badFrom >= 0 ? what + (cut === "" ? "" : `; ${cut}`) : cut,
    });
  }
  checked.indexBad = await checkIndex(run, handle, meta);
  return checked;
}

/** What is wrong with the head of `meta`'s image (`bytes`), or null. */
function checkHead(
  meta: SegmentMeta | SubtreeStoreMeta,
  bytes: Uint8Array,
  crc32: Crc32,
): string | null {
  if (isSubtreeStore(meta)) {
    const head = decodeSubtreeStoreHead(bytes, crc32);
    if (head === "short") return "store head cut short";
    if (typeof head === "string") return head;
    return head.id === meta.id ? null : `header names store ${head.id}`;
  }
  const header = decodeFileHeader(bytes, "segment", crc32);
  if (typeof header === "string") return header;
  return header.id === meta.id && header.name === meta.partition
    ? null
    : `header names segment ${header.id} of "${header.name}"`;
}

/** What is wrong with the index of `meta` (its pack's index image, or its `.idx`), or null. */
async function checkIndex(
  run: SalvageRun,
  handle: DiskFile,
  meta: SegmentMeta | SubtreeStoreMeta,
): Promise<string | null> {
  const span = indexSpanOf(meta);
  let bytes: Uint8Array;
  if (span.bytes >= 0) {
    bytes = new Uint8Array(span.bytes);
    if ((await readFully(handle, span.position, bytes)) < span.bytes)
      return "index image cut short";
  } else {
    const file = await run.disk.open(span.path, "read").catch(() => null);
    if (file === null) return "index file missing";
    try {
      bytes = new Uint8Array(await file.size());
      await readFully(file, 0, bytes);
    } finally {
      await file.close();
    }
  }
  const index = decodeSegmentIndex(bytes, run.crc32);
  if (typeof index === "string") return index;
  const got = index.meta;
  const same =
    got.id === meta.id &&
    got.firstSeq === meta.firstSeq &&
    got.lastSeq === meta.lastSeq &&
    got.records === meta.records &&
    got.bytes === meta.bytes;
  return same ? null : "index does not match the manifest's entry";
}

/** The `.idx` of `meta`, whose records are whole, set aside and written anew from them. */
async function rebuildIndex(
  run: SalvageRun,
  meta: SegmentMeta | SubtreeStoreMeta,
  problem: string,
): Promise<void> {
  const path = indexPath(meta.id);
  const file = await run.disk.open(path, "read").catch(() => null);
  if (file !== null) {
    try {
      await run.damaged(file, path, 0, await file.size(), `${problem}; rebuilt from the records`);
    } finally {
      await file.close();
    }
  }
  const options = { intervalBytes: run.intervalBytes, crc32: run.crc32 };
  const rebuilt = isSubtreeStore(meta)
    ? await rebuildSubtreeStoreIndex(run.disk, meta.id, options)
    : await rebuildSegmentIndex(run.disk, meta.id, options);
  if (typeof rebuilt === "string") throw new Error(`rebuilding ${path}: ${rebuilt}`);
  run.filesRebuilt.push(path);
}

/**
 * Writes the intact records of `meta` into a new file (a pack for a segment, a subtree store with
 * the same head for a store) under a fresh id, and puts it in `meta`'s place in `state` (nothing
 * in its place when no record is intact).
 */
async function replace(
  run: SalvageRun,
  state: ManifestState,
  meta: SegmentMeta | SubtreeStoreMeta,
  checked: Checked,
): Promise<void> {
  state.counts.delete(meta.id);
  if (isSubtreeStore(meta)) state.subtrees.delete(meta.id);
  else state.live.delete(meta.id);
  if (checked.kept.length === 0) return;
  const id = ++state.maxSegmentId;
  if (isSubtreeStore(meta)) {
    const written = await writeStore(run, id, meta, checked);
    state.subtrees.set(id, written);
  } else {
    const written = await writePack(run, id, meta, checked);
    state.live.set(written.id, written);
  }
  await run.disk.syncDir(SEGMENT_DIR);
}

/** Pack `id` holding one image: segment `id` with the records `checked` kept. */
async function writePack(
  run: SalvageRun,
  id: number,
  meta: SegmentMeta,
  checked: Checked,
): Promise<SegmentMeta> {
  const { bytes, view, kept } = checked;
  const firstSeq = recordSeq(view, kept[0].at);
  const writer = await PackWriter.create(run.disk, {
    id,
    firstSeq,
    intervalBytes: run.intervalBytes,
    crc32: run.crc32,
    expectedBytes: kept.reduce((sum, record) => sum + record.length, 0),
  });
  try {
    await writer.begin(id, meta.partition, firstSeq);
    for (const { at, length } of kept) await writer.addRecord(bytes, view, at, length);
    const written = await writer.end();
    const file = await writer.finish();
    try {
      await file.sync();
    } finally {
      await file.close();
    }
    return written;
  } catch (error) {
    await writer.abandon();
    throw error;
  }
}

/** Subtree store `id` (and its `.idx`): `meta`'s head, the records `checked` kept. */
async function writeStore(
  run: SalvageRun,
  id: number,
  meta: SubtreeStoreMeta,
  checked: Checked,
): Promise<SubtreeStoreMeta> {
  const { bytes, view, kept } = checked;
  const builder = new SubtreeStoreBuilder(
    {
      id,
      partition: meta.partition,
      label: meta.label,
      generation: meta.generation,
      topics: meta.topics,
    },
    { intervalBytes: run.intervalBytes, crc32: run.crc32 },
  );
  for (const { at, length } of kept) builder.add(bytes, view, at, length);
  const { chunks, index, meta: written } = builder.finish();
  await writeWhole(run.disk, subtreeStorePath(id), chunks);
  await writeWhole(run.disk, indexPath(id), [index]);
  return written;
}

/** Creates `path` holding `chunks` back to back, durably. */
async function writeWhole(disk: Disk, path: string, chunks: Uint8Array[]): Promise<void> {
  const file = await disk.open(path, "create");
  try {
    let position = 0;
    for (const chunk of chunks) {
      await file.write(position, chunk);
      position += chunk.length;
    }
    await file.sync();
  } finally {
    await file.close();
  }
}
