/**
 * Journal rolls (src/store/journal_files.ts, stageJournalFile / promoteJournalFile): the next
 * generation is written under its staged name (`<gen>.next`) while the journal before it is
 * sealed, and gets its journal name only once that one is durable. Here: writes go on while a
 * seal's fsync is held; a process killed meanwhile loses nothing written (recovery adopts the
 * staged file); after a power loss the staged file counts only when its records continue the
 * journal before it; stray staged files go.
 */
import { describe, expect, test } from "bun:test";
import type { Disk, DiskFile } from "../src/store/disk.ts";
import { FILE_HEADER_FIXED_BYTES, encodeFileHeader } from "../src/store/file_header.ts";
import { StoreContext, resolveOptions } from "../src/store/context.ts";
import { journalPath, stagedPath } from "../src/store/layout.ts";
import { dropDrainedJournals } from "../src/store/journal_files.ts";
import { SpareFiller } from "../src/store/spare_filler.ts";
import { type FsyncPolicy, Store } from "../src/store/mod.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { renameSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import {
  SMALL_LIMITS,
  TOPICS,
  payloadOf,
  readSeqs,
  seqRange,
  tempDir,
  withSync,
} from "./fixtures/store_helpers.ts";

/**
 * A view of `sim` whose fsyncs of journals (`.wal`) wait while `hold` is on and a staged file
 * exists: the seal of the journal before a staged one is held until `release`.
 */
function gated(sim: SimDisk): {
  disk: Disk;
  hold: () => void;
  release: () => void;
  held: () => number;
} {
  const view = sim.view();
  let gate: Promise<void> | null = null;
  let open: () => void = () => {};
  let held = 0;
  const staged = () => sim.paths().some((path) => path.endsWith(".next"));
  const wrap = (file: DiskFile): DiskFile =>
    withSync(file, async (sync) => {
      if (gate !== null && file.path.endsWith(".wal") && staged()) {
        held++;
        await gate;
      }
      return sync();
    });
  return {
    disk: { ...view, open: async (path, mode, hints) => wrap(await view.open(path, mode, hints)) },
    hold: () => {
      gate = new Promise((resolve) => {
        open = resolve;
      });
    },
    release: () => {
      gate = null;
      open();
    },
    held: () => held,
  };
}

const stagedFiles = (sim: SimDisk) => sim.paths().filter((path) => path.endsWith(".next"));

/** Appends from `store.nextSeq` until a staged journal exists and its seal is held, then `more` messages, committing each; the seqs acknowledged. */
async function rollHeld(
  sim: SimDisk,
  store: Store,
  gate: ReturnType<typeof gated>,
  more: number,
  policy: FsyncPolicy,
): Promise<number> {
  gate.hold();
  let acknowledged = store.nextSeq - 1;
  const commits: Promise<void>[] = [];
  const append = () => {
    const seq = store.nextSeq;
    store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
    commits.push(store.commit().then(() => void (acknowledged = Math.max(acknowledged, seq))));
  };
  while (gate.held() === 0) {
    expect(store.nextSeq).toBeLessThan(5000);
    append();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  for (let i = 0; i < more; i++) {
    append();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  expect(stagedFiles(sim).length).toBe(1);
  if (policy === "interval") await Promise.all(commits);
  return acknowledged;
}

describe("journal rolls", () => {
  test("writes go on into the staged generation while the journal before it is sealed; under always nothing there is acknowledged until it has its name", async () => {
    for (const fsync of ["interval", "always"] as const) {
      const sim = new SimDisk({ seed: 21 });
      const gate = gated(sim);
      const { store } = await Store.open(gate.disk, { ...SMALL_LIMITS, fsync });
      const acknowledged = await rollHeld(sim, store, gate, 10, fsync);
      const staged = stagedFiles(sim)[0];
      // The records after the roll are in the staged file already: under interval all ten and
      // more, under always the first write's (the flush loop then waits for the seal).
      expect((sim.snapshot(staged) as Uint8Array).length).toBeGreaterThan(
        fsync === "interval" ? 300 : FILE_HEADER_FIXED_BYTES,
      );
      // Under interval a commit resolves once written; under always it waits for the seal.
      if (fsync === "interval") expect(acknowledged).toBe(store.nextSeq - 1);
      else expect(acknowledged).toBeLessThan(store.nextSeq - 10);
      gate.release();
      await store.sync(); // waits for the seal and the rename
      expect(stagedFiles(sim)).toEqual([]);
      expect(sim.paths()).toContain(staged.replace(/\.next$/, ".wal"));
      expect(await readSeqs(store)).toEqual(seqRange(store.nextSeq - 1));
      await store.close();
    }
  });

  test("a process killed while a journal is sealed loses nothing written: recovery adopts the staged generation", async () => {
    for (const fsync of ["interval", "always", "never"] as const) {
      const sim = new SimDisk({ seed: 22 });
      const gate = gated(sim);
      const { store } = await Store.open(gate.disk, { ...SMALL_LIMITS, fsync });
      const acknowledged = await rollHeld(
        sim,
        store,
        gate,
        10,
        fsync === "always" ? "always" : "interval",
      );
      // Under interval and never every append was written (its commit resolved); under always
      // the flush loop waits for the seal with later appends still in memory.
      const written = fsync === "always" ? acknowledged : store.nextSeq - 1;
      sim.kill();
      const { store: reopened, recovery } = await Store.open(sim.view(), {
        ...SMALL_LIMITS,
        fsync,
      });
      expect(recovery.problems).toEqual([]);
      expect(recovery.journalsAdopted).toBe(1);
      expect(stagedFiles(sim)).toEqual([]);
      // Everything the killed store wrote is back: the page cache held both journals whole.
      expect(reopened.nextSeq - 1).toBeGreaterThanOrEqual(written);
      expect(await readSeqs(reopened)).toEqual(seqRange(reopened.nextSeq - 1));
      await reopened.close();
    }
  });

  test("after a power loss while a journal is sealed, the staged generation counts only when its records continue the journal before it", async () => {
    const outcomes = { adopted: 0, removed: 0, lost: 0 };
    for (const fsync of ["always", "interval"] as const) {
      for (let seed = 1; seed <= 12; seed++) {
        const sim = new SimDisk({ seed: 100 + seed });
        const gate = gated(sim);
        const { store } = await Store.open(gate.disk, { ...SMALL_LIMITS, fsync });
        const acknowledged = await rollHeld(sim, store, gate, 10, fsync);
        const staged = stagedFiles(sim)[0];
        sim.crash({ mode: seed % 2 === 0 ? "subset" : "prefix" });
        // The staged file's name may not have reached the disk (its creation is not synced).
        const present = sim.paths().includes(staged);
        const { store: reopened, recovery } = await Store.open(sim.view(), {
          ...SMALL_LIMITS,
          fsync,
        });
        expect(recovery.problems).toEqual([]);
        expect(stagedFiles(sim)).toEqual([]);
        if (recovery.journalsAdopted === 1) outcomes.adopted++;
        else if (present) {
          expect(recovery.filesRemoved).toContain(staged);
          outcomes.removed++;
        } else outcomes.lost++;
        const seqs = await readSeqs(reopened);
        expect(seqs).toEqual(seqRange(reopened.nextSeq - 1));
        if (fsync === "always") expect(seqs.length).toBeGreaterThanOrEqual(acknowledged);
        // The store goes on after either outcome: new appends roll and read back.
        const next = reopened.nextSeq;
        for (let seq = next; seq < next + 60; seq++)
          reopened.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
        await reopened.commit();
        expect(await readSeqs(reopened)).toEqual(seqRange(next + 59));
        await reopened.close();
      }
    }
    // Both branches ran: a seal lost with the power (a hole before the staged records) and one
    // that had reached the disk.
    expect(outcomes.adopted).toBeGreaterThan(0);
    expect(outcomes.removed).toBeGreaterThan(0);
  });

  test("staged files that do not follow the newest journal, or whose header is not theirs, are removed at open", async () => {
    const sim = new SimDisk({ seed: 23 });
    const { store } = await Store.open(sim.view(), SMALL_LIMITS);
    for (let seq = 1; seq <= 40; seq++)
      store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
    await store.commit();
    await store.close({ sort: false });
    const newestGen = () =>
      Math.max(
        ...sim
          .paths()
          .filter((p) => p.endsWith(".wal"))
          .map((p) => Number.parseInt(p.slice("journal/".length), 16)),
      );
    let newest = newestGen();
    const disk = sim.view();
    const put = async (path: string, bytes: Uint8Array) => {
      const file = await disk.open(path, "create");
      await file.write(0, bytes);
      await file.sync();
      await file.close();
    };
    // Not the generation after the newest journal.
    await put(
      stagedPath(newest + 5),
      encodeFileHeader({ kind: "journal", id: newest + 5, firstSeq: 41, name: "" }, nativeCrc32),
    );
    // The next generation, but its header names another one.
    await put(
      stagedPath(newest + 1),
      encodeFileHeader({ kind: "journal", id: newest + 7, firstSeq: 41, name: "" }, nativeCrc32),
    );
    await disk.syncDir("journal");
    const { store: reopened, recovery } = await Store.open(sim.view(), SMALL_LIMITS);
    expect(recovery.problems).toEqual([]);
    expect(recovery.journalsAdopted).toBe(0);
    expect(recovery.filesRemoved).toEqual(
      expect.arrayContaining([stagedPath(newest + 5), stagedPath(newest + 1)]),
    );
    expect(stagedFiles(sim)).toEqual([]);
    expect(await readSeqs(reopened)).toEqual(seqRange(40));
    await reopened.close({ sort: false });
    newest = newestGen();
    // A staged next generation whose first seq is not the one after the newest journal's last record.
    await put(
      stagedPath(newest + 1),
      encodeFileHeader({ kind: "journal", id: newest + 1, firstSeq: 45, name: "" }, nativeCrc32),
    );
    await disk.syncDir("journal");
    const third = await Store.open(sim.view(), SMALL_LIMITS);
    expect(third.recovery.problems).toEqual([]);
    expect(third.recovery.journalsAdopted).toBe(0);
    expect(third.recovery.filesRemoved).toContain(stagedPath(newest + 1));
    expect(third.store.nextSeq).toBe(41);
    await third.store.close();
  });

  test("on the real disk, a staged newest generation whose records continue the journal before it is adopted and read back", async () => {
    const dir = tempDir();
    try {
      const { store } = await Store.open(new BunDisk(dir.path), {
        ...SMALL_LIMITS,
        fsync: "interval",
      });
      for (let seq = 1; seq <= 200; seq++)
        store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
      await store.commit();
      await store.close({ sort: false });
      // The state a process kill leaves during a promotion: the newest generation still under its staged name.
      const journals = readdirSync(join(dir.path, "journal"))
        .filter((name) => name.endsWith(".wal"))
        .sort();
      expect(journals.length).toBeGreaterThanOrEqual(2);
      const newest = journals[journals.length - 1];
      renameSync(
        join(dir.path, "journal", newest),
        join(dir.path, "journal", newest.replace(/\.wal$/, ".next")),
      );
      const { store: reopened, recovery } = await Store.open(new BunDisk(dir.path), {
        ...SMALL_LIMITS,
        fsync: "interval",
      });
      expect(recovery.problems).toEqual([]);
      expect(recovery.journalsAdopted).toBe(1);
      expect(readdirSync(join(dir.path, "journal"))).toContain(newest);
      expect(await readSeqs(reopened)).toEqual(seqRange(200));
      await reopened.close();
    } finally {
      dir.remove();
    }
  });

  test("a drained journal is retired only once the next one has its name (until then its seal may be under way)", async () => {
    const sim = new SimDisk({ seed: 24 });
    await sim.mkdir("journal");
    const context = new StoreContext(sim.view(), resolveOptions({ fsync: "interval" }));
    for (const gen of [1, 2, 3]) {
      const file = await sim.open(gen === 3 ? stagedPath(gen) : journalPath(gen), "create");
      await file.close();
    }
    const info = (gen: number, created: boolean) => ({
      gen,
      path: created ? journalPath(gen) : stagedPath(gen),
      firstSeq: gen * 10,
      bytes: 64,
      pendingRecords: 0,
      created,
    });
    context.journal.generations.push(info(1, true), info(2, true), info(3, false));
    await dropDrainedJournals(context);
    // Journal 1 goes (journal 2 has its name); journal 2 stays while journal 3 is staged.
    expect(context.journal.generations.map((journal) => journal.gen)).toEqual([2, 3]);
    expect(sim.paths().filter((path) => path.startsWith("journal/"))).toEqual([
      journalPath(2),
      stagedPath(3),
    ]);
    context.journal.generations[1].created = true;
    await dropDrainedJournals(context);
    expect(context.journal.generations.map((journal) => journal.gen)).toEqual([3]);
  });

  test("under always a spare is zero-filled a piece per small group commit, and the next generation takes it", async () => {
    const sim = new SimDisk({ seed: 25 });
    const { store } = await Store.open(sim.view(), {
      ...SMALL_LIMITS,
      journalBytesMax: 64 * 1024,
      journalRetainedBytesMax: 1 << 30,
      fsync: "always",
    });
    const append = async (seq: number) => {
      store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
      await store.commit();
    };
    await append(1);
    await new Promise((resolve) => setTimeout(resolve, 0));
    // One 64 KiB piece after the first commit made a whole spare of the journal's size; no journal has drained.
    const spares = sim.paths().filter((path) => path.endsWith(".spare"));
    expect(spares.length).toBe(1);
    const spare = sim.snapshot(spares[0]) as Uint8Array;
    expect(spare.length).toBe(64 * 1024);
    expect(spare.every((byte) => byte === 0)).toBe(true);
    expect(store.stats().spareJournalBytes).toBe(64 * 1024);
    // Appends up to the roll: the staged generation is that spare renamed.
    let seq = 2;
    while (sim.paths().filter((path) => path.endsWith(".wal")).length < 2) await append(seq++);
    expect(sim.paths()).not.toContain(spares[0]);
    expect(await readSeqs(store)).toEqual(seqRange(seq - 1));
    await store.close();
  });

  test("the filler: no piece under interval or for a large commit; a partial spare is handed over; stop leaves the file", async () => {
    for (const fsync of ["interval", "never"] as const) {
      const sim = new SimDisk({ seed: 26 });
      const { store } = await Store.open(sim.view(), { ...SMALL_LIMITS, fsync });
      for (let seq = 1; seq <= 50; seq++)
        store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
      await store.commit();
      await store.close({ sort: false });
      expect(sim.paths().filter((path) => path.endsWith(".spare"))).toEqual([]);
    }
    const sim = new SimDisk({ seed: 27 });
    await sim.mkdir("journal");
    const context = new StoreContext(
      sim.view(),
      resolveOptions({ fsync: "always", journalBytesMax: 1 << 20 }),
    );
    const filler = new SpareFiller(context);
    const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
    filler.step(300 * 1024); // a large commit: nothing
    await settle();
    expect(sim.paths()).toEqual([]);
    filler.step(1000);
    await settle();
    filler.step(70_000); // rounded up to 128 KiB
    await settle();
    expect(filler.fillingBytes).toBe(192 * 1024);
    const partial = await filler.handOver();
    expect(partial?.bytes).toBe(192 * 1024);
    expect((sim.snapshot(partial?.path as string) as Uint8Array).length).toBe(192 * 1024);
    expect(filler.fillingBytes).toBe(0);
    filler.step(1000); // a new spare
    await settle();
    const paths = sim.paths();
    expect(paths.length).toBe(2);
    await filler.stop();
    filler.step(1000); // stopped: nothing more
    await settle();
    expect(sim.paths()).toEqual(paths);
  });

  test("a journal write ends on a page boundary (zeros after the records): a kill leaves them to be cut as a torn tail, a seal or a clean close cuts them", async () => {
    for (const ending of ["kill", "close"] as const) {
      const sim = new SimDisk({ seed: 28 });
      const { store } = await Store.open(sim.view(), {
        ...SMALL_LIMITS,
        journalBytesMax: 1 << 20,
        fsync: "interval",
      });
      for (let seq = 1; seq <= 30; seq++)
        store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq));
      await store.commit();
      const journal = sim.paths().find((path) => path.endsWith(".wal")) as string;
      const bytes = sim.snapshot(journal) as Uint8Array;
      const recordsEnd = store.stats().journalBytes;
      expect(recordsEnd % 4096).not.toBe(0);
      expect(bytes.length).toBe(Math.ceil(recordsEnd / 4096) * 4096);
      expect(bytes.subarray(recordsEnd).every((byte) => byte === 0)).toBe(true);
      if (ending === "kill") sim.kill();
      else await store.close({ sort: false });
      const { store: reopened, recovery } = await Store.open(sim.view(), {
        ...SMALL_LIMITS,
        journalBytesMax: 1 << 20,
        fsync: "interval",
      });
      expect(recovery.problems).toEqual([]);
      const cut = recovery.cuts.find((c) => c.file === journal);
      if (ending === "kill")
        expect(cut).toEqual({
          file: journal,
          offset: recordsEnd,
          bytesCut: bytes.length - recordsEnd,
          recordsAfterCut: 0,
        });
      else expect(cut).toBeUndefined();
      expect(await readSeqs(reopened)).toEqual(seqRange(30));
      await reopened.close();
    }
  });
});
