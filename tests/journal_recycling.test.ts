/**
 * Journal recycling (src/store/journal_files.ts): drained journals become spares, new
 * generations are spares renamed and overwritten, and the older bytes a recycled journal holds
 * past its records are never read as records — not after a crash, not after a clean close, not
 * when spares are found at open.
 */
import { describe, expect, test } from "bun:test";
import { JOURNAL_SPARES_MAX } from "../src/constants.ts";
import type { Disk } from "../src/store/disk.ts";
import { journalPath, sparePath } from "../src/store/layout.ts";
import { Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import {
  SMALL_LIMITS,
  TOPICS,
  payloadOf,
  readSeqs,
  seqRange,
  withSync,
} from "./fixtures/store_helpers.ts";

/** A view of `disk` that notes each journal file created and each rename. */
function watched(disk: SimDisk): { disk: Disk; created: string[]; renames: [string, string][] } {
  const view = disk.view();
  const created: string[] = [];
  const renames: [string, string][] = [];
  return {
    created,
    renames,
    disk: {
      ...view,
      open: (path, mode) => {
        if (mode === "create" && path.startsWith("journal/")) created.push(path);
        return view.open(path, mode);
      },
      rename: (from, to) => {
        renames.push([from, to]);
        return view.rename(from, to);
      },
    },
  };
}

async function appendCommitted(store: Store, from: number, count: number): Promise<void> {
  for (let seq = from; seq < from + count; seq++) {
    store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
    if (seq % 10 === 0) await store.commit();
  }
  await store.commit();
}

/**
 * The journal paths whose generation was a spare taken over: a spare is renamed to the
 * generation's staged name (`.next`), which is renamed to its journal name once the journal
 * before it is sealed.
 */
function takenOver(renames: [string, string][]): string[] {
  return renames
    .filter(([from, to]) => from.endsWith(".spare") && to.endsWith(".next"))
    .map(([, to]) => to.replace(/\.next$/, ".wal"));
}

/** The newest journal generation's path among `disk`'s files. */
function newestJournal(disk: SimDisk): string {
  return disk
    .paths()
    .filter((p) => p.endsWith(".wal"))
    .sort()
    .at(-1) as string;
}

describe("journal recycling", () => {
  test("drained journals become spares and new generations take them: once there are spares no journal file is created", async () => {
    const sim = new SimDisk({ seed: 3 });
    const { disk, created, renames } = watched(sim);
    const { store } = await Store.open(disk, SMALL_LIMITS);
    await appendCommitted(store, 1, 300);
    await store.idle();
    const retired = renames.filter(([from, to]) => from.endsWith(".wal") && to.endsWith(".spare"));
    const taken = takenOver(renames);
    expect(retired.length).toBeGreaterThan(0);
    expect(taken.length).toBeGreaterThan(0);
    // Each staged generation got its journal name.
    for (const path of taken.slice(0, -1))
      expect(renames).toContainEqual([path.replace(/\.wal$/, ".next"), path]);
    // Every generation after the first spare appeared was a spare renamed, not a new file (the
    // files created beside them are spares the filler zero-fills: spare_filler.ts).
    const firstTaken = Number.parseInt(taken[0].slice("journal/".length), 16);
    const generations = created.filter((path) => !path.endsWith(".spare"));
    expect(
      generations.filter((path) => Number.parseInt(path.slice("journal/".length), 16) > firstTaken),
    ).toEqual([]);
    const spares = sim.paths().filter((p) => p.endsWith(".spare"));
    expect(spares.length).toBeLessThanOrEqual(JOURNAL_SPARES_MAX);
    // Their bytes count in the store's stats (aria_disk_bytes{kind="journal_spare"}).
    expect(store.stats().spareJournalBytes).toBe(
      spares.reduce((sum, p) => sum + (sim.snapshot(p) as Uint8Array).length, 0),
    );
    // Appends after the recycling read back whole, through the journals and the segments.
    await appendCommitted(store, 301, 100);
    expect(await readSeqs(store)).toEqual(seqRange(400));
    // A sorting close starts an empty generation in a new file: it takes no spare.
    const sparesBefore = sim.paths().filter((p) => p.endsWith(".spare")).length;
    await store.close();
    expect(created.at(-1)).toBe(newestJournal(sim));
    expect(sim.paths().filter((p) => p.endsWith(".spare")).length).toBeGreaterThanOrEqual(
      sparesBefore,
    );
  });

  test("under interval and never, drained journals are deleted and spares found at open removed", async () => {
    for (const fsync of ["interval", "never"] as const) {
      const sim = new SimDisk({ seed: 4 });
      const { store } = await Store.open(sim.view(), SMALL_LIMITS);
      await appendCommitted(store, 1, 300);
      await store.idle();
      await store.close({ sort: false });
      const spares = sim.paths().filter((p) => p.endsWith(".spare"));
      expect(spares.length).toBeGreaterThan(0); // kept under always, the default
      const { disk, renames } = watched(sim);
      const { store: reopened, recovery } = await Store.open(disk, { ...SMALL_LIMITS, fsync });
      expect(recovery.filesRemoved).toEqual(spares);
      await appendCommitted(reopened, 301, 300);
      await reopened.idle();
      expect(sim.paths().filter((p) => p.endsWith(".spare"))).toEqual([]);
      // The only journal renames: staged generations given their names, no spare involved.
      const journalRenames = renames.filter(
        ([from, to]) => from.startsWith("journal/") || to.startsWith("journal/"),
      );
      expect(journalRenames.length).toBeGreaterThan(0);
      for (const [from, to] of journalRenames) expect(from.replace(/\.next$/, ".wal")).toBe(to);
      expect(await readSeqs(reopened)).toEqual(seqRange(600));
      await reopened.close();
    }
  });

  test("after a power loss, a recycled newest journal is cut at its records' end: every acknowledged message stays, the older bytes are not replayed", async () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const sim = new SimDisk({ seed });
      const { disk, renames } = watched(sim);
      const { store } = await Store.open(disk, SMALL_LIMITS);
      await appendCommitted(store, 1, 200);
      // Append until the newest journal is a spare taken over, and write a little into it.
      let next = 201;
      while (!takenOver(renames).includes(newestJournal(sim))) {
        expect(next).toBeLessThan(2000);
        await appendCommitted(store, next, 5);
        next += 5;
      }
      await appendCommitted(store, next, 3);
      const acknowledged = next + 2;
      const newest = newestJournal(sim);
      expect(store.stats().nextSeq).toBe(acknowledged + 1);
      sim.crash({ mode: seed % 2 === 0 ? "subset" : "prefix" });
      const reopened = await Store.open(sim.view(), SMALL_LIMITS);
      const cut = reopened.recovery.cuts.find((c) => c.file === newest);
      expect(cut).toBeDefined();
      expect(cut?.bytesCut).toBeGreaterThan(0);
      expect(cut?.recordsAfterCut).toBe(0);
      expect(reopened.recovery.problems).toEqual([]);
      expect(reopened.recovery.nextSeq).toBe(acknowledged + 1);
      expect(await readSeqs(reopened.store)).toEqual(seqRange(acknowledged));
      await reopened.store.close();
    }
  });

  test("a power loss at a recycled journal's first fsync leaves no old journal name on the new header", async () => {
    // The spare is renamed to the new generation's staged name, its header written, its records
    // written; its first fsync comes when the journal before it is sealed. Before the directory
    // fsync that follows the spare's rename was added, the simulator found an old journal's name
    // there (the spare's retiring rename lost, the new header kept), which open refused.
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const sim = new SimDisk({ seed });
      const view = sim.view();
      let acknowledged = 0;
      let taken = "";
      let crashed = false;
      const disk: Disk = {
        ...view,
        rename: async (from, to) => {
          await view.rename(from, to);
          if (from.endsWith(".spare")) taken = to;
        },
        open: async (path, mode) => {
          const file = await view.open(path, mode);
          // Every open of the spare just taken over (its header's, then the writer's).
          if (path !== taken || crashed) return file;
          return withSync(file, async (sync) => {
            await sync();
            crashed = true;
            sim.crash({ mode: seed % 2 === 0 ? "subset" : "prefix" });
            throw new Error("power lost");
          });
        },
      };
      const { store } = await Store.open(disk, SMALL_LIMITS);
      for (let seq = 1; seq < 2000 && !crashed; seq++) {
        store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
        if (seq % 10 === 0) {
          const ok = await store.commit().then(
            () => true,
            () => false,
          );
          if (ok) acknowledged = seq;
        }
      }
      expect(crashed).toBe(true);
      const reopened = await Store.open(sim.view(), SMALL_LIMITS);
      expect(reopened.recovery.problems).toEqual([]);
      const seqs = await readSeqs(reopened.store);
      expect(seqs.length).toBeGreaterThanOrEqual(acknowledged);
      expect(seqs).toEqual(seqRange(seqs.length));
      await reopened.store.close();
    }
  });

  test("a clean close cuts a recycled newest journal's older bytes, so the next open has nothing to cut", async () => {
    const sim = new SimDisk({ seed: 11 });
    const { store } = await Store.open(sim.view(), SMALL_LIMITS);
    await appendCommitted(store, 1, 250);
    await store.close({ sort: false });
    const { store: again, recovery } = await Store.open(sim.view(), SMALL_LIMITS);
    expect(recovery.cuts).toEqual([]);
    expect(recovery.problems).toEqual([]);
    expect(await readSeqs(again)).toEqual(seqRange(250));
    await again.close();
  });

  test("spares found at open stay spares up to the limit, the rest are removed, and none is replayed even when it holds valid records", async () => {
    const sim = new SimDisk({ seed: 12 });
    const { store } = await Store.open(sim.view(), SMALL_LIMITS);
    await appendCommitted(store, 1, 40);
    const journalBytes = sim.snapshot(journalPath(1)) as Uint8Array;
    await store.close();
    // Spares holding a copy of journal 1 (valid records of seqs 1..): as a drained journal kept.
    const names = Array.from({ length: JOURNAL_SPARES_MAX + 2 }, (_, i) => sparePath(1000 + i));
    const write = sim.view();
    for (const name of names) {
      const file = await write.open(name, "create");
      await file.write(0, journalBytes);
      await file.sync();
      await file.close();
    }
    await write.syncDir("journal");
    // With the one the close may have left (journal 1 drained), lowest numbers first.
    const spares = sim.paths().filter((p) => p.endsWith(".spare"));
    expect(spares.length).toBeGreaterThan(JOURNAL_SPARES_MAX);
    const { store: reopened, recovery } = await Store.open(sim.view(), SMALL_LIMITS);
    expect(recovery.problems).toEqual([]);
    expect(recovery.recordsReplayed).toBe(0);
    // The first JOURNAL_SPARES_MAX stay, the rest go; the last kept became the generation recovery starts.
    expect(recovery.filesRemoved).toEqual(spares.slice(JOURNAL_SPARES_MAX));
    const left = spares.slice(0, JOURNAL_SPARES_MAX - 1);
    expect(sim.paths().filter((p) => p.endsWith(".spare"))).toEqual(left);
    expect(reopened.stats().spareJournalBytes).toBe(
      left.reduce((sum, p) => sum + (sim.snapshot(p) as Uint8Array).length, 0),
    );
    await appendCommitted(reopened, 41, 20);
    expect(await readSeqs(reopened)).toEqual(seqRange(60));
    await reopened.close();
    const { store: last, recovery: lastRecovery } = await Store.open(sim.view(), SMALL_LIMITS);
    expect(lastRecovery.problems).toEqual([]);
    expect(await readSeqs(last)).toEqual(seqRange(60));
    await last.close();
  });
});
