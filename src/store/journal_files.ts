/**
 * journal_files: where journal files come from and where they go. A new generation written by
 * the store is first staged (`<gen>.next`: header, then records) and renamed to `<gen>.wal` once
 * the journal before it is sealed durably (stageJournalFile, promoteJournalFile), so writes need
 * not stop for the seal's fsync. Under `always`, a drained
 * journal (every record in a segment) is kept as a spare instead of removed, and a new
 * generation takes a spare when there is one, renames it and writes its header over the old
 * one; its records then overwrite blocks the file system has already allocated and written:
 *
 *   drained 0007.wal ──rename──▶ 000c.spare ──rename──▶ 0010.next (new header; records overwrite) ──rename──▶ 0010.wal
 *
 * Why: an fdatasync after appending to a file also commits the file's new size and newly
 * allocated blocks (a commit of the file system's journal); after overwriting written blocks it
 * flushes the data alone. A publisher that waits for every acknowledgement pays one such round
 * trip per group commit, and the overwrite is the shorter one (the machine's figures:
 * docs/benchmarks.md#machine). RocksDB's recycle_log_file_num and PostgreSQL's recycled WAL
 * segments do the same.
 *
 * A recycled file holds the old generation's bytes after the new records. Recovery reads the
 * newest journal up to its first record that is not the next seq (the old records' seqs are all
 * lower) and cuts there, as it cuts a torn tail. A journal is truncated to its records when it is
 * sealed (before the next generation exists) and at a clean close, so only the newest journal
 * after a crash has such a tail.
 *
 * Spares are not named as journals: a spare recovery finds is kept as a spare (up to
 * JOURNAL_SPARES_MAX) or removed, never replayed.
 *
 * Also the journal list's lifecycle: a generation starts (startJournal: its file, then its entry
 * in `context.journal.generations`) and drained ones leave it, oldest first
 * (dropDrainedJournals). Not here: writing records (journal_writer.ts) and replaying them at
 * open (recovery.ts).
 */
import { JOURNAL_SPARES_MAX } from "../constants.ts";
import type { JournalInfo, StoreContext } from "./context.ts";
import type { DiskFile } from "./disk.ts";
import { encodeJournalHeader, encodeSyncSlot, JOURNAL_HEADER_BYTES } from "./file_header.ts";
import { JOURNAL_DIR, journalPath, sparePath, stagedPath } from "./layout.ts";
import { appendManifestLocked } from "./manifest.ts";
import { MANIFEST_JOURNAL } from "./manifest_codec.ts";

/**
 * Records in the manifest (durably) that generation `info` got its name or is being retired:
 * the evidence recovery checks the journal directory against, so that a journal deleted by hand
 * is found missing instead of taken for one that never was (docs/storage.md, recovery). Nothing
 * while the manifest is not open.
 */
export function recordJournal(
  context: StoreContext,
  event: "started" | "retired",
  info: { gen: number; firstSeq: number },
): Promise<void> {
  return context.manifest.locked(async () => {
    if (context.manifest.file === null) return;
    await appendManifestLocked(context, [
      { kind: MANIFEST_JOURNAL, event, gen: info.gen, firstSeq: info.firstSeq },
    ]);
  });
}

/**
 * Whether drained journals are kept as spares: under `always` only. Under `interval` and `never`
 * an fsync is rare and the page-cache copy is what a write costs, and writes into a recycled
 * file copied slower (docs/storage.md, recycled journals).
 */
export function keepsSpares(context: StoreContext): boolean {
  return context.options.fsync === "always";
}

/**
 * Creates journal `gen` starting at `firstSeq`, durably (file, header, directory entry), and
 * lists it in `context.journal.generations`; `recycle`: see createJournalFile.
 */
export async function startJournal(
  context: StoreContext,
  gen: number,
  firstSeq: number,
  recycle = true,
): Promise<JournalInfo> {
  await createJournalFile(context, gen, firstSeq, recycle);
  const info: JournalInfo = {
    gen,
    path: journalPath(gen),
    firstSeq,
    bytes: JOURNAL_HEADER_BYTES,
    pendingRecords: 0,
    created: true,
  };
  context.journal.generations.push(info);
  await recordJournal(context, "started", info);
  return info;
}

/**
 * Retires journals, oldest first, whose records are all in segments (never the newest one): kept
 * as spares or removed. Only once the next journal has its name: until then the writer may still
 * be sealing this one (a sort that began before a roll can drain it meanwhile).
 */
export async function dropDrainedJournals(context: StoreContext): Promise<void> {
  while (
    context.journal.generations.length > 1 &&
    context.journal.generations[0].pendingRecords === 0 &&
    context.journal.generations[1].created
  ) {
    const info = context.journal.generations.shift() as JournalInfo;
    try {
      await retireJournalFile(context, info);
    } catch (error) {
      // Not retired (its manifest record found no room, say): it stays listed, for the next try.
      context.journal.generations.unshift(info);
      throw error;
    }
  }
}

/**
 * Creates the file of journal generation `gen` starting at `firstSeq`, durably (header,
 * directory entry), from a spare when there is one and `recycle` allows.
 */
export async function createJournalFile(
  context: StoreContext,
  gen: number,
  firstSeq: number,
  recycle = true,
): Promise<void> {
  const recycled = await writeJournalHeader(
    context,
    journalPath(gen),
    gen,
    firstSeq,
    recycle,
    true,
  );
  if (!recycled) await context.disk.syncDir(JOURNAL_DIR);
}

/**
 * Creates generation `gen`'s file under its staged name (`<gen>.next`), from a spare when there
 * is one, with its header written but nothing durable yet: the writer goes on writing records
 * into it while the generation before is sealed (promoteJournalFile). Recovery never replays a
 * staged file unless its records continue the newest journal's, so a crash before the promotion
 * loses only records no `always` commit was waiting on (docs/storage.md, journal rolls).
 */
export async function stageJournalFile(
  context: StoreContext,
  gen: number,
  firstSeq: number,
): Promise<void> {
  await writeJournalHeader(context, stagedPath(gen), gen, firstSeq, true, false);
}

/**
 * Gives staged journal `info` its name once `previous` is sealed: the sealed journal is durable
 * first, then the staged file (header and records so far), then the rename and its directory
 * entry. So a `.wal` newer than another always follows a whole, durable journal: only the newest
 * can have a torn tail.
 */
export async function promoteJournalFile(
  context: StoreContext,
  previous: JournalInfo,
  info: JournalInfo,
): Promise<void> {
  await sealJournalFile(context, previous);
  const path = journalPath(info.gen);
  await context.files.with(info.path, async (file) => {
    await file.sync();
    // Inside `with` the handle stays cached under the staged path while the name changes, so a
    // reader that opens the staged path meanwhile gets it instead of a missing file; `renamed`
    // then moves it (and sends the staged path on to the new one).
    await context.disk.rename(info.path, path);
    context.files.renamed(info.path, path);
  });
  info.path = path;
  await context.disk.syncDir(JOURNAL_DIR);
  // Named first: a manifest rewrite meanwhile lists it (a record twice says the same).
  info.created = true;
  await recordJournal(context, "started", info);
}

/** Writes generation `gen`'s header at `path` (a spare renamed there, or a new file); whether a spare was taken. */
async function writeJournalHeader(
  context: StoreContext,
  path: string,
  gen: number,
  firstSeq: number,
  recycle: boolean,
  durable: boolean,
): Promise<boolean> {
  // The header and two empty synced-point slots in one write (a recycled file's old slots name
  // another generation, so a torn write cannot make them count).
  const header = encodeJournalHeader(gen, firstSeq, context.crc32);
  const spare = recycle ? context.journal.spares.pop() : undefined;
  // A spare that went missing (removed by hand, say) only means a new file.
  const recycled =
    spare !== undefined &&
    (await context.disk.rename(spare.path, path).then(
      () => true,
      () => false,
    ));
  if (recycled) {
    // Every older name of the file (the journal it was, the spare) must be gone for good before
    // its bytes change: else a crash can leave an old journal's name on this generation's header
    // (the simulator found it, seed 72). A crash between here and the header's fsync leaves a
    // newest journal (or a staged file) whose header names another generation: recovery removes it.
    await context.disk.syncDir(JOURNAL_DIR);
  }
  const file: DiskFile = await context.disk.open(path, recycled ? "write" : "create");
  try {
    await file.write(0, header);
    if (durable) await file.sync();
  } finally {
    await file.close();
  }
  return recycled;
}

/** Truncates journal `info`'s file to its records (a recycled file is longer) and fsyncs it. */
export async function sealJournalFile(context: StoreContext, info: JournalInfo): Promise<void> {
  await context.files.with(info.path, async (file) => {
    if ((await file.size()) > info.bytes) await file.truncate(info.bytes);
    await file.sync();
  });
}

/**
 * Takes a drained journal out of the journal list's files: kept as a spare while fewer than
 * JOURNAL_SPARES_MAX are kept and it is at least half a journal long (a short one would save
 * little), removed otherwise. Its records are all in segments, so losing either to a crash loses
 * nothing: the file reappears as a drained journal and goes again.
 */
export async function retireJournalFile(context: StoreContext, info: JournalInfo): Promise<void> {
  // Before the file goes: a crash between leaves a retired journal's file, replayed as drained.
  await recordJournal(context, "retired", info);
  await context.files.drop(info.path);
  if (
    keepsSpares(context) &&
    context.journal.spares.length < JOURNAL_SPARES_MAX &&
    info.bytes >= context.options.journalBytesMax / 2
  ) {
    const spare = sparePath(context.journal.nextSpareId++);
    await context.disk.rename(info.path, spare);
    context.journal.spares.push({ path: spare, bytes: info.bytes });
    return;
  }
  await context.disk.remove(info.path);
}

/**
 * The newest journal's synced point, written into its header's slots (file_header.ts) so that
 * recovery can tell a torn tail (past it) from damage (before it). The writer calls `synced` with
 * the file right after an fsync of it completed, before it acknowledges what that fsync covered:
 * the slot (in turn) claims exactly what is durable. The write goes to the page cache and the
 * next fsync makes it durable, so after a process kill (page cache kept) the claim covers every
 * acknowledged record; after a power loss the durable claim may lag by the last group commit
 * (the slot written after the last fsync). No fsync of its own: one 16-byte write into the
 * file's first page, which the next fdatasync writes beside the records (docs/storage.md).
 */
export class SyncSlots {
  private gen = -1;
  /** What the slots of journal `gen` claim. */
  private claimed = 0;
  private written = 0;

  constructor(private readonly context: StoreContext) {}

  /**
   * Records that an fsync of `journal` (open as `file`) completed over its first `bytes` bytes:
   * writes a slot claiming them when that is more than claimed. Resolves once the slot is
   * written (at once with `writeNow`): only then may what the fsync covered be acknowledged.
   */
  synced(file: DiskFile, journal: JournalInfo, bytes: number): Promise<void> | void {
    if (journal.gen !== this.gen) {
      this.gen = journal.gen;
      this.claimed = 0;
    }
    if (bytes <= this.claimed) return;
    this.claimed = bytes;
    const slot = encodeSyncSlot(journal.gen, this.written++, bytes, this.context.crc32);
    if (file.writeNow === undefined) return file.write(slot.position, slot.bytes);
    file.writeNow(slot.position, slot.bytes);
  }
}
