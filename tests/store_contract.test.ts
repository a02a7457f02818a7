/**
 * The store contract, run against every implementation: the real store on real files (BunDisk),
 * the same store on the simulated disk (SimDisk), and the reference model. Each case drives the
 * subject and checks it against the model; the last one is a property over random operations.
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { executeSplit } from "../src/split/executor.ts";
import { inProcessRunner, storeHost } from "../src/split/in_process.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import {
  crc32,
  type Disk,
  DiskError,
  type DiskFile,
  type LayoutSwap,
  type RetainResult,
  Store,
  StoreError,
  type StoreOptions,
} from "../src/store/mod.ts";
import { decodeFileHeader } from "../src/store/file_header.ts";
import { recordSeq, recordTime } from "../src/store/record.ts";
import { decodeSegmentIndex } from "../src/store/segment_index.ts";
import { fcParams } from "../src/testing/fc_params.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import {
  ModelStore,
  type Plain,
  SMALL_LIMITS,
  TOPICS,
  payloadOf,
  plain,
  tempDir,
} from "./fixtures/store_helpers.ts";
import { wrapDisk, wrapFile } from "./fixtures/disk_wrappers.ts";
import { packedImages, packIds } from "./fixtures/packs.ts";
import { packPath } from "../src/store/layout.ts";

type From = { seq: number } | { afterSeq: number } | { timeUs: number };

/** What the contract needs of an implementation. */
interface Subject {
  append(seq: number, timeUs: number, topic: string, payload: Uint8Array): void;
  commit(): Promise<void>;
  read(filter: Filter, from: From, batchBytesMax?: number): Promise<Plain[]>;
  readNewest(maxBytes: number): Promise<Plain[]>;
  restart(): Promise<void>;
  nextSeq(): number;
  close(): Promise<void>;
}

class StoreSubject implements Subject {
  private constructor(
    private store: Store,
    private readonly disk: Disk,
    private readonly options: StoreOptions,
  ) {}

  static async open(disk: Disk, options: StoreOptions): Promise<StoreSubject> {
    const { store } = await Store.open(disk, options);
    return new StoreSubject(store, disk, options);
  }

  append(seq: number, timeUs: number, topic: string, payload: Uint8Array): void {
    this.store.append(seq, timeUs, topic, payload);
  }
  commit(): Promise<void> {
    return this.store.commit();
  }
  private reads = 0;
  /**
   * Every other read borrows (payloads are views, valid until the next batch): each batch is
   * copied out at once, and a batch's payloads are checked again after the next batch is read,
   * so a borrowed buffer refilled too early shows up as a difference.
   */
  async read(filter: Filter, from: From, batchBytesMax?: number): Promise<Plain[]> {
    const borrow = this.reads++ % 2 === 1;
    const reader = this.store.read(filter, from, { batchBytesMax, borrow });
    const out: Plain[] = [];
    let previous: { copy: Plain[]; batch: { payload: Uint8Array }[] } | null = null;
    for (;;) {
      const batch = await reader.nextBatch();
      if (!borrow && previous !== null) {
        for (const [i, message] of previous.batch.entries()) {
          expect([...message.payload]).toEqual(previous?.copy[i].payload as number[]);
        }
      }
      if (batch.length === 0) return out;
      const copy = batch.map(plain);
      out.push(...copy);
      previous = { copy, batch };
    }
  }
  async readNewest(maxBytes: number): Promise<Plain[]> {
    return (await this.store.readNewest(maxBytes, { bytesOf: (m) => m.payload.length })).map(plain);
  }
  async restart(): Promise<void> {
    await this.store.close({ sort: false });
    const { recovery, store } = await Store.open(this.disk, this.options);
    expect(recovery.problems).toEqual([]);
    this.store = store;
  }
  nextSeq(): number {
    return this.store.nextSeq;
  }
  close(): Promise<void> {
    return this.store.close();
  }
}

class ModelSubject implements Subject {
  readonly model = new ModelStore();
  append(seq: number, timeUs: number, topic: string, payload: Uint8Array): void {
    this.model.append(seq, timeUs, topic, payload);
  }
  async commit(): Promise<void> {}
  async read(filter: Filter, from: From): Promise<Plain[]> {
    return this.model.read(filter, from);
  }
  async readNewest(maxBytes: number): Promise<Plain[]> {
    const out: Plain[] = [];
    let bytes = 0;
    for (let i = this.model.messages.length - 1; i >= 0; i--) {
      bytes += this.model.messages[i].payload.length;
      if (bytes > maxBytes) break;
      out.unshift(this.model.messages[i]);
    }
    return out;
  }
  async restart(): Promise<void> {}
  nextSeq(): number {
    return this.model.nextSeq;
  }
  async close(): Promise<void> {}
}

const dirs: (() => void)[] = [];
afterAll(() => {
  for (const remove of dirs) remove();
});

const implementations: [string, (options: StoreOptions) => Promise<Subject>][] = [
  [
    "store on real files",
    (options) => {
      const dir = tempDir();
      dirs.push(dir.remove);
      return StoreSubject.open(new BunDisk(dir.path), { ...options, crc32: nativeCrc32 });
    },
  ],
  [
    "store on the simulated disk",
    (options) => StoreSubject.open(new SimDisk({ seed: 11 }), options),
  ],
  ["reference model", async () => new ModelSubject()],
];

const FILTERS = [
  ["**"],
  ["app/orders/**"],
  ["app/users"],
  ["solo", "ops/**"],
  ["nothing/here"],
  ["app/**"],
  ["app/users/eu/1", "ops/x/y/z"],
];

async function publish(
  subject: Subject,
  model: ModelStore,
  count: number,
  options: { commitEvery?: number; timeStepUs?: number } = {},
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const seq = model.nextSeq;
    const timeUs = 1_000_000 + seq * (options.timeStepUs ?? 1000);
    const topic = TOPICS[(seq * 7) % TOPICS.length];
    subject.append(seq, timeUs, topic, payloadOf(seq));
    model.append(seq, timeUs, topic, payloadOf(seq));
    if (seq % (options.commitEvery ?? 10) === 0) await subject.commit();
  }
  await subject.commit();
}

for (const [name, make] of implementations) {
  describe(`store contract: ${name}`, () => {
    test("an empty store starts at seq 1 and reads nothing", async () => {
      const subject = await make(SMALL_LIMITS);
      expect(subject.nextSeq()).toBe(1);
      expect(await subject.read(Filter.of("**"), { seq: 1 })).toEqual([]);
      await subject.close();
    });

    test("reads every filter in seq order, from seqs and times, across rolls and sorts", async () => {
      const subject = await make(SMALL_LIMITS);
      const model = new ModelStore();
      await publish(subject, model, 400);
      for (const texts of FILTERS) {
        const filter = Filter.of(...texts);
        expect(await subject.read(filter, { seq: 1 })).toEqual(model.read(filter, { seq: 1 }));
        expect(await subject.read(filter, { seq: 173 })).toEqual(model.read(filter, { seq: 173 }));
        expect(await subject.read(filter, { afterSeq: 399 })).toEqual(
          model.read(filter, { afterSeq: 399 }),
        );
        expect(await subject.read(filter, { timeUs: 1_250_500 })).toEqual(
          model.read(filter, { timeUs: 1_250_500 }),
        );
      }
      await subject.close();
    });

    test("a read resumed after its last seq continues with no gap and no duplicate", async () => {
      const subject = await make(SMALL_LIMITS);
      const model = new ModelStore();
      await publish(subject, model, 300);
      const filter = Filter.of("app/**");
      const whole = model.read(filter, { seq: 1 });
      const first = (await subject.read(filter, { seq: 1 })).slice(0, 77);
      const rest = await subject.read(filter, { afterSeq: first[first.length - 1].seq });
      expect([...first, ...rest]).toEqual(whole);
      await subject.close();
    });

    test("data, next seq and reads survive a restart; appends continue after it", async () => {
      const subject = await make(SMALL_LIMITS);
      const model = new ModelStore();
      await publish(subject, model, 250);
      await subject.restart();
      expect(subject.nextSeq()).toBe(251);
      await publish(subject, model, 120);
      await subject.restart();
      expect(await subject.read(Filter.of("**"), { seq: 1 })).toEqual(
        model.read(Filter.of("**"), { seq: 1 }),
      );
      await subject.close();
    });

    test("readNewest returns the newest messages that fit, oldest first", async () => {
      const subject = await make(SMALL_LIMITS);
      const model = new ModelStore();
      await publish(subject, model, 300);
      await subject.restart();
      const newest = await subject.readNewest(500);
      expect(newest.length).toBeGreaterThan(10);
      expect(newest[newest.length - 1].seq).toBe(300);
      const expected = model.messages.slice(model.messages.length - newest.length);
      expect(newest).toEqual(expected);
      const bytes = newest.reduce((sum, m) => sum + m.payload.length, 0);
      expect(bytes).toBeLessThanOrEqual(500);
      expect(
        bytes + model.messages[model.messages.length - newest.length - 1].payload.length,
      ).toBeGreaterThan(500);
      await subject.close();
    });

    test("random appends, commits, restarts and reads agree with the model", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({
                kind: fc.constant("publish" as const),
                count: fc.integer({ min: 1, max: 60 }),
                commitEvery: fc.integer({ min: 1, max: 20 }),
              }),
              fc.record({ kind: fc.constant("restart" as const) }),
              fc.record({
                kind: fc.constant("read" as const),
                filter: fc.constantFrom(...FILTERS),
                fromSeq: fc.integer({ min: 1, max: 400 }),
                batch: fc.integer({ min: 40, max: 400 }),
              }),
            ),
            { minLength: 1, maxLength: 10 },
          ),
          async (ops) => {
            const subject = await make(SMALL_LIMITS);
            const model = new ModelStore();
            for (const op of ops) {
              if (op.kind === "publish")
                await publish(subject, model, op.count, { commitEvery: op.commitEvery });
              else if (op.kind === "restart") await subject.restart();
              else {
                const filter = Filter.of(...op.filter);
                expect(await subject.read(filter, { seq: op.fromSeq }, op.batch)).toEqual(
                  model.read(filter, { seq: op.fromSeq }),
                );
              }
            }
            expect(subject.nextSeq()).toBe(model.nextSeq);
            await subject.close();
          },
        ),
        fcParams({ runs: 25 }),
      );
    });
  });
}

describe("store on the simulated disk: limits and retention", () => {
  test("while reads ahead are in flight, each batch first awaits the pause yieldToEvents returns (their completions run between batches); otherwise it asks none", async () => {
    const sim = new SimDisk({ seed: 21 });
    let gate: Promise<void> | null = null;
    let open = () => {};
    const packs = secondPackReads(sim, () => gate);
    const disk = packs.disk;
    let asked = 0;
    let hold: (() => void) | null = null;
    const { store } = await Store.open(disk, {
      yieldToEvents: () => {
        asked++;
        return hold === null ? undefined : new Promise<void>((resolve) => (hold = resolve));
      },
    });
    await sortInTwoPacks(store); // the second pack is read ahead
    packs.packsWritten();
    gate = new Promise((resolve) => (open = resolve));
    const reader = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
    const first = await reader.nextBatch();
    expect(reader.readsAhead).toBeGreaterThan(0); // the second pack's read is held: in flight
    const before = asked;
    hold = () => {};
    let merged = false;
    const second = reader.nextBatch().then((batch) => ((merged = true), batch));
    for (let turn = 0; turn < 20; turn++) await Promise.resolve();
    expect(asked).toBe(before + 1);
    expect(merged).toBe(false); // the pause is awaited before the batch is merged
    const release = hold as () => void;
    hold = null;
    release();
    expect((await second)[0].seq).toBe(first[first.length - 1].seq + 1);
    open();
    const seen = [...first, ...(await second)].map((m) => m.seq);
    for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
      for (const m of batch) seen.push(m.seq);
    expect(seen).toEqual(Array.from({ length: 4000 }, (_, i) => i + 1));
    // A read with no reads ahead (one partition, one image per pack read by its lane) asks none.
    const counted = asked;
    const single = store.read(Filter.of("p7/x"), { seq: 1 });
    for (let batch = await single.nextBatch(); batch.length > 0; batch = await single.nextBatch())
      expect(batch[0].topic).toBe("p7/x");
    expect(asked).toBe(counted);
    await store.close();
  });

  test("a read resumes the last batch's merge while nothing changed, and positions every partition read again after a layout change, a new partition or a new limit", async () => {
    const sim = new SimDisk({ seed: 22 });
    const { store } = await Store.open(sim.view(), {});
    const topicOf = (seq: number) => `q${seq % 300}/x`;
    let last = 0;
    const publish = async (count: number) => {
      for (let k = 0; k < count; k++) {
        last++;
        store.append(last, last, topicOf(last), payloadOf(last, 40));
      }
      await store.commit();
    };
    await publish(6000);
    await store.sortAll();
    const reader = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
    const seen: number[] = [];
    const take = async (batches: number) => {
      for (let b = 0; b < batches; b++) {
        const batch = await reader.nextBatch();
        for (const m of batch) {
          expect(m.payload).toEqual(payloadOf(m.seq, 40));
          seen.push(m.seq);
        }
      }
    };
    await take(5);
    expect(reader.batchesResumed).toBe(4);
    // New messages (a new limit), then a sort (a layout change in every partition), then new
    // partitions: each makes the next batch position every partition read again; the read stays
    // exact.
    await publish(500);
    await take(1);
    expect(reader.batchesResumed).toBe(4);
    await take(2);
    expect(reader.batchesResumed).toBe(6);
    await store.sortAll();
    await take(1);
    expect(reader.batchesResumed).toBe(6);
    for (let k = 0; k < 50; k++) {
      last++;
      store.append(last, last, `fresh${k}/x`, payloadOf(last, 40));
    }
    await store.commit();
    await take(1);
    expect(reader.batchesResumed).toBe(6);
    await take(1);
    expect(reader.batchesResumed).toBe(7);
    for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
      for (const m of batch) seen.push(m.seq);
    expect(seen).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    await store.close({ sort: false });
  });

  test("payloads appended as ranges of larger arrays (short ones copied through DataViews, long ones as one view) read back exact, from the journal and from segments", async () => {
    const sim = new SimDisk({ seed: 21 });
    const { store } = await Store.open(sim.view(), {});
    const sizes = [0, 1, 7, 8, 9, 100, 127, 128, 129, 300, 1024];
    const expected: Uint8Array[] = [];
    let seq = 1;
    // Three "frames": the payloads lie at uneven offsets inside each, as in a PUBLISH frame.
    for (let frame = 0; frame < 3; frame++) {
      const bytes = new Uint8Array(4096 + 17).subarray(3 + frame);
      for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 13 + frame * 101) & 0xff;
      let at = 5;
      for (const size of sizes) {
        store.append(seq, seq, `r${seq % 3}/x`, bytes, at, size);
        expected.push(bytes.slice(at, at + size));
        seq++;
        at += size + 3;
      }
    }
    // And a whole array, the form a caller without a frame uses.
    const whole = Uint8Array.from({ length: 200 }, (_, i) => i);
    store.append(seq, seq, "r0/x", whole);
    expected.push(whole.slice());
    await store.commit();
    const readAll = async () => {
      const got: Uint8Array[] = [];
      const reader = store.read(Filter.of("**"), { seq: 1 });
      for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
        for (const m of batch) got.push(m.payload.slice());
      return got;
    };
    expect(await readAll()).toEqual(expected);
    await store.sortAll();
    expect(store.stats().pendingRecords).toBe(0);
    expect(await readAll()).toEqual(expected);
    await store.close({ sort: false });
  });

  test("a filter opens only the partitions it needs; open files stay within the LRU limit", async () => {
    const disk = new SimDisk({ seed: 5 });
    const { store } = await Store.open(disk, { ...SMALL_LIMITS, openFilesMax: 4 });
    for (let seq = 1; seq <= 2000; seq++)
      store.append(seq, seq, `p/${seq % 200}`, payloadOf(seq, 8));
    await store.commit();
    await store.idle();
    const reader = store.read(Filter.of("p/7"), { seq: 1 });
    const got: number[] = [];
    for await (const message of reader) got.push(message.seq);
    expect(got).toEqual(Array.from({ length: 10 }, (_, i) => 7 + 200 * i));
    expect(reader.partitionCount).toBe(1);
    let total = 0;
    for await (const _ of store.read(Filter.of("**"), { seq: 1 })) total++;
    expect(total).toBe(2000);
    expect(store.stats().openFiles).toBeLessThanOrEqual(4);
    await store.close();
  });

  test("whole-stream reads over segments larger than a read chunk (partition reads topped up at batch start) are exact", async () => {
    const disk = new SimDisk({ seed: 8 });
    const { store } = await Store.open(disk, {
      segmentBytesMax: 96 * 1024,
      readBufferBytes: 16 * 1024,
      readBatchBytesMax: 4096,
    });
    const topicOf = (seq: number) => TOPICS[(seq * 7) % 5];
    for (let seq = 1; seq <= 6000; seq++)
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 1 + (seq % 97)));
    await store.commit();
    await store.sortAll();
    // Several segments several read chunks (16 KiB) long; none past the segment size; nothing left unsorted.
    expect(store.stats().pendingRecords).toBe(0);
    const segments = store.layout().flatMap((partition) => partition.segments);
    expect(
      segments.filter((segment) => segment.bytes > 4 * 16 * 1024).length,
    ).toBeGreaterThanOrEqual(4);
    for (const segment of segments)
      expect(segment.bytes - (36 + segment.partition.length)).toBeLessThanOrEqual(96 * 1024);
    await expectWholeStream(store, 6000, topicOf, (seq) => payloadOf(seq, 1 + (seq % 97)));
    await store.close();
  });

  test("sortAll leaves nothing unsorted when a partition holds many segments' worth (each close stops at the segment size)", async () => {
    const disk = new SimDisk({ seed: 15 });
    const { store } = await Store.open(disk, { segmentBytesMax: 2048 });
    for (let seq = 1; seq <= 600; seq++)
      store.append(seq, seq, seq % 10 === 0 ? "other/x" : "hot/x", payloadOf(seq, 60));
    await store.commit();
    await store.sortAll();
    expect(store.stats().pendingRecords).toBe(0);
    const segments = store.layout().flatMap((partition) => partition.segments);
    expect(segments.length).toBeGreaterThan(10);
    for (const segment of segments)
      expect(segment.bytes - (36 + segment.partition.length)).toBeLessThanOrEqual(2048);
    await expectWholeStream(
      store,
      600,
      (seq) => (seq % 10 === 0 ? "other/x" : "hot/x"),
      (seq) => payloadOf(seq, 60),
    );
    await store.close();
  });

  test("the background sorter keeps closing a partition past the segment size until it is below it", async () => {
    const disk = new SimDisk({ seed: 16 });
    const { store } = await Store.open(disk, { segmentBytesMax: 2048, segmentAgeUsMax: 1e15 });
    for (let seq = 1; seq <= 600; seq++) store.append(seq, seq, "hot/x", payloadOf(seq, 60));
    await store.commit();
    await store.idle();
    // Records of ~100 bytes: fewer than a segment's worth may stay pending.
    expect(store.stats().pendingRecords).toBeLessThan(2048 / 90);
    await store.close();
  });

  test("whole-stream reads over many partitions of small segments (each next file read ahead at batch start) are exact", async () => {
    const disk = new SimDisk({ seed: 9 });
    const { store } = await Store.open(disk, {
      segmentBytesMax: 2048,
      readBufferBytes: 16 * 1024,
      readBatchBytesMax: 4096,
    });
    const topicOf = (seq: number) => `t${(seq * 13) % 150}/x/${seq % 3}`;
    for (let seq = 1; seq <= 12_000; seq++) {
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 1 + (seq % 61)));
      if (seq % 500 === 0) {
        await store.commit();
        await store.idle();
      }
    }
    await store.commit();
    await store.sortAll();
    // Every partition has several segments, each smaller than a read chunk: read whole, and the
    // next one read ahead while the head nears the end of the current one.
    expect(store.stats().segments).toBeGreaterThanOrEqual(150 * 2);
    await expectWholeStream(store, 12_000, topicOf, (seq) => payloadOf(seq, 1 + (seq % 61)));
    await store.close();
  });

  test("fsync always: a store that fails while a flush writes rejects that flush's commits (no endless sync loop)", async () => {
    const sim = new SimDisk({ seed: 10 });
    let failSegmentSyncs = false;
    let duringWrite: (() => Promise<void>) | null = null;
    // Journal writes run `duringWrite` first; segment fsyncs fail while `failSegmentSyncs` is set.
    const wrap = (file: DiskFile): DiskFile => ({
      path: file.path,
      read: (position, into) => file.read(position, into),
      size: () => file.size(),
      truncate: (size) => file.truncate(size),
      close: () => file.close(),
      sync: async () => {
        if (failSegmentSyncs && file.path.startsWith("segments/"))
          throw new DiskError("EIO", `fsync "${file.path}": injected`);
        await file.sync();
      },
      write: async (position, bytes) => {
        // A journal generation's write (not a spare's: spare_filler.ts writes those after commits).
        const journal = file.path.endsWith(".wal") || file.path.endsWith(".next");
        const hook = journal ? duringWrite : null;
        if (journal) duringWrite = null;
        if (hook !== null) await hook();
        await file.write(position, bytes);
      },
    });
    const disk: Disk = {
      open: async (path, mode) => wrap(await sim.open(path, mode)),
      list: (dir) => sim.list(dir),
      mkdir: (dir) => sim.mkdir(dir),
      remove: (path) => sim.remove(path),
      rename: (from, to) => sim.rename(from, to),
      syncDir: (dir) => sim.syncDir(dir),
    };
    const { store } = await Store.open(disk, { fsync: "always" });
    store.append(1, 1, "a/b", payloadOf(1, 8));
    await store.commit();
    // While the next flush writes, the sorter fails the store on a segment's fsync (as a disk
    // error there does); the flush then has written seq 2 but may sync nothing more.
    duringWrite = async () => {
      failSegmentSyncs = true;
      store.maintain(1e15); // every partition is old enough to close
      for (let i = 0; i < 1000 && store.failure === null; i++)
        await new Promise((resolve) => setTimeout(resolve, 1));
    };
    store.append(2, 2, "a/b", payloadOf(2, 8));
    const outcome = await Promise.race([
      store.commit().then(
        () => "committed",
        () => "rejected",
      ),
      new Promise((resolve) => setTimeout(() => resolve("no answer in 2 s"), 2000)),
    ]);
    expect(store.failure).not.toBeNull();
    expect(outcome).toBe("rejected");
    expect(store.committedSeq).toBe(1);
    // The flush that wrote seq 2 ends (it used to loop on a sync that a failed store skips: a
    // microtask loop no timer could interrupt, so this test then hung).
    await store.idle().catch(() => {});
    expect(store.committedSeq).toBe(1);
  });

  test("unsorted journal records stay under pendingRecordsMax: the partitions holding most are sorted first", async () => {
    const disk = new SimDisk({ seed: 7 });
    const limits = {
      journalBytesMax: 1 << 20,
      journalRetainedBytesMax: 4 << 20,
      segmentBytesMax: 1 << 20,
      segmentAgeUsMax: 1e12,
      pendingRecordsMax: 300,
    };
    const { store } = await Store.open(disk, limits);
    // "big" gets 3 of every 4 records: it is the one to sort when the limit is passed.
    const topicOf = (seq: number) => (seq % 4 === 0 ? `small/${seq % 3}` : "big");
    for (let seq = 1; seq <= 5000; seq++) {
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 8));
      if (seq % 50 === 0) {
        await store.commit();
        await store.idle();
        // A flush may add up to 50 records past the limit before the sorter looks.
        expect(store.stats().pendingRecords).toBeLessThanOrEqual(300 + 50);
      }
    }
    const stats = store.stats();
    expect(stats.segments).toBeGreaterThan(0);
    expect(stats.segmentsWritten).toBe(stats.segments);
    const seqs: number[] = [];
    for await (const message of store.read(Filter.of("**"), { seq: 1 })) {
      expect(message.topic).toBe(topicOf(message.seq));
      seqs.push(message.seq);
    }
    expect(seqs).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
    await store.close();
  });

  test("a sorter far behind makes the store backlogged; whenCaughtUp resolves once it is back within bounds", async () => {
    const disk = new SimDisk({ seed: 11 });
    const limits = {
      journalBytesMax: 16 << 10,
      journalRetainedBytesMax: 32 << 10,
      segmentBytesMax: 1 << 20,
      segmentAgeUsMax: 1e12,
      pendingRecordsMax: 200,
    };
    const { store } = await Store.open(disk, limits);
    expect(store.backlogged).toBe(false);
    await store.whenCaughtUp(); // at once
    // One burst with no await: nothing is sorted meanwhile, both bounds (2x the budgets) are passed.
    const topicOf = (seq: number) => `p/${seq % 7}`;
    for (let seq = 1; seq <= 3000; seq++) store.append(seq, seq, topicOf(seq), payloadOf(seq, 40));
    expect(store.backlogged).toBe(true);
    let caughtUp = false;
    const waiting = store.whenCaughtUp().then(() => {
      caughtUp = true;
    });
    await store.commit();
    await waiting;
    expect(caughtUp).toBe(true);
    expect(store.backlogged).toBe(false);
    const stats = store.stats();
    expect(stats.pendingRecords).toBeLessThanOrEqual(2 * 200);
    expect(stats.journalBytes).toBeLessThanOrEqual(2 * (32 << 10));
    // Backlogged again, then closed: a waiter is not left hanging.
    for (let seq = 3001; seq <= 6000; seq++)
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 40));
    expect(store.backlogged).toBe(true);
    const pending = store.whenCaughtUp();
    await store.close();
    await pending;
    expect(store.backlogged).toBe(false);
  });

  test("the active journal alone never makes the store backlogged (the sorter does not drain it by size)", async () => {
    const disk = new SimDisk({ seed: 13 });
    const { store } = await Store.open(disk, {
      journalBytesMax: 1 << 20,
      journalRetainedBytesMax: 8 << 10,
      segmentBytesMax: 1 << 20,
      segmentAgeUsMax: 1e12,
      pendingRecordsMax: 1 << 20,
    });
    for (let seq = 1; seq <= 1000; seq++)
      store.append(seq, seq, `p/${seq % 3}`, payloadOf(seq, 60));
    await store.commit();
    await store.idle();
    expect(store.stats().journals).toBe(1);
    expect(store.stats().journalBytes).toBeGreaterThan(4 * (8 << 10));
    expect(store.backlogged).toBe(false);
    await store.close();
  });

  test("a whole-stream read over many partitions reads each pack's neighbouring segments in one span read", async () => {
    const sim = new SimDisk({ seed: 13 });
    let packReads = 0;
    const disk = withPackReads(sim.view(), (read) => {
      packReads++;
      return read();
    });
    const { store } = await Store.open(disk, {});
    const topicOf = (seq: number) => `p${(seq * 7) % 400}/x/${seq % 2}`;
    for (let seq = 1; seq <= 8000; seq++)
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 1 + (seq % 53)));
    await store.commit();
    await store.sortAll();
    const segments = store.stats().segments;
    expect(segments).toBe(400);
    packReads = 0;
    await expectWholeStream(store, 8000, topicOf, (seq) => payloadOf(seq, 1 + (seq % 53)));
    // Two reads of the stream (copied, borrowed): a read per segment each would be 800.
    expect(packReads).toBeLessThanOrEqual(8);
    await store.close();
  });

  test("a packed image read whole is checked by one CRC over its records (the manifest's), not one per record; damage is still found record by record", async () => {
    const sim = new SimDisk({ seed: 15 });
    let crcCalls = 0;
    const counting = (bytes: Uint8Array, seed?: number) => (crcCalls++, crc32(bytes, seed));
    const topicOf = (seq: number) => `p${seq % 50}/x`;
    // Records past RANGE_JS_BYTES_MAX: each one's own check would call the store's crc32.
    const payload = (seq: number) => payloadOf(seq, 150 + (seq % 40));
    let opened = await Store.open(sim, { crc32: counting });
    for (let seq = 1; seq <= 3000; seq++) opened.store.append(seq, seq, topicOf(seq), payload(seq));
    await opened.store.commit();
    await opened.store.sortAll();
    const segments = opened.store.layout().flatMap((partition) => partition.segments);
    expect(segments.length).toBe(50);
    // The CRC the sorter kept is the CRC of the records as they lie in the pack, as a scan finds it.
    const images = await packedImages(sim, SMALL_LIMITS.indexIntervalBytes as number);
    for (const { meta, image } of images) {
      const kept = segments.find((segment) => segment.id === meta.id)?.pack?.recordsCrc;
      const records = image.subarray(imageHeaderBytes(image));
      expect(kept).toBe(crc32(records));
      expect(meta.pack?.recordsCrc).toBe(kept);
    }
    crcCalls = 0;
    await expectWholeStream(opened.store, 3000, topicOf, payload);
    // Two reads, a call per image each: 100; a call per record would be 6,000.
    expect(crcCalls).toBeLessThanOrEqual(2 * segments.length);
    await opened.store.close({ sort: false });
    // One payload byte changed: the image's CRC fails, the record checks find the record.
    const { path, meta, image } = images[0];
    const first = (meta.pack?.offset ?? 0) + imageHeaderBytes(image);
    const damaged = (sim.snapshot(path) as Uint8Array)[first + 40] ^ 0xff;
    sim.corrupt(path, first + 40, new Uint8Array([damaged]));
    opened = await Store.open(sim, { crc32: counting });
    const error = await expectWholeStream(opened.store, 3000, topicOf, payload).catch((e) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(error.message).toBe(`Cannot read "${path}": checksum mismatch at offset ${first}`);
    await opened.store.close({ sort: false });
  });

  test("reads ahead of the next packed images run beside the merge: a batch does not wait for them, a failed one is read again by its lanes, close waits for one in flight", async () => {
    const sim = new SimDisk({ seed: 16 });
    // Reads of the second pack (every partition's second image) can be held or made to fail.
    let secondPack = "";
    let gate: Promise<void> | null = null;
    let open = () => {};
    let failNext = false;
    let secondReads = 0;
    const disk = withPackReads(sim.view(), async (read, path) => {
      if (path !== secondPack) return read();
      secondReads++;
      if (failNext) {
        failNext = false;
        throw new DiskError("EIO", "read: injected");
      }
      if (gate !== null) await gate;
      return read();
    });
    const { store } = await Store.open(disk, {});
    await sortInTwoPacks(store);
    expect(store.stats().segments).toBe(80);
    secondPack = packPath(packIds(sim)[1]);
    const timeout = () =>
      new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 2000));
    const all = Array.from({ length: 4000 }, (_, i) => i + 1);
    const readRest = async (reader: ReturnType<Store["read"]>, seen: number[]) => {
      for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
        for (const m of batch) seen.push(m.seq);
      expect(seen).toEqual(all);
    };
    /** Two batches with the second pack held: both come from the first images while its reads wait. */
    const twoBatchesHeld = async (): Promise<{
      reader: ReturnType<Store["read"]>;
      seen: number[];
    }> => {
      gate = new Promise((resolve) => (open = resolve));
      const before = secondReads;
      const reader = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
      const seen: number[] = [];
      for (let k = 0; k < 2; k++) {
        const batch = await Promise.race([reader.nextBatch(), timeout()]);
        expect(batch).not.toBe("timeout");
        for (const m of batch as { seq: number }[]) seen.push(m.seq);
      }
      expect(seen.length).toBeGreaterThan(0);
      expect(secondReads).toBeGreaterThan(before);
      return { reader, seen };
    };
    let { reader, seen } = await twoBatchesHeld();
    open();
    gate = null;
    await readRest(reader, seen);
    // A read ahead that fails: its lanes read their next images themselves.
    failNext = true;
    await readRest(store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 }), []);
    expect(failNext).toBe(false);
    // Close waits for a read ahead in flight.
    ({ reader, seen } = await twoBatchesHeld());
    let closed = false;
    const closing = store.close().then(() => (closed = true));
    expect(
      await Promise.race([
        closing,
        new Promise((resolve) => setTimeout(() => resolve("waiting"), 100)),
      ]),
    ).toBe("waiting");
    expect(closed).toBe(false);
    open();
    await closing;
    expect(closed).toBe(true);
  });

  test("no read ahead starts while file removals wait for reads to end; they run once the reads in flight end", async () => {
    const sim = new SimDisk({ seed: 18 });
    let hold: Promise<void> | null = null;
    let release = () => {};
    // The first read of the second pack (the first reader's read ahead) is held.
    const packs = secondPackReads(sim, () => {
      const held = hold;
      hold = null;
      return held;
    });
    const disk = packs.disk;
    const limits = {
      journalBytesMax: 64 << 10,
      journalRetainedBytesMax: 256 << 10,
      segmentBytesMax: 1 << 20,
      segmentAgeUsMax: 1e12,
      pendingRecordsMax: 1 << 20,
    };
    const { store } = await Store.open(disk, limits);
    const topicOf = (seq: number) => `p${seq % 40}/x`;
    let seq = 0;
    const appendSorted = async (count: number) => {
      for (const end = seq + count; seq < end; )
        store.append(++seq, seq, topicOf(seq), payloadOf(seq, 30));
      await store.commit();
      await store.sortAll();
    };
    await appendSorted(2000);
    await appendSorted(2000);
    packs.packsWritten();
    const readAll = async (reader: ReturnType<Store["read"]>, seen: number[]) => {
      for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
        for (const m of batch) seen.push(m.seq);
      expect(seen).toEqual(Array.from({ length: seq }, (_, i) => i + 1));
    };
    hold = new Promise((resolve) => (release = resolve));
    const first = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
    const firstSeen = (await first.nextBatch()).map((m) => m.seq);
    expect(first.readsAhead).toBeGreaterThan(0);
    expect(hold === null).toBe(true);
    // More records sorted: removing the drained journals waits for the read ahead in flight.
    const journalsBefore = store.stats().journals;
    await appendSorted(6000);
    expect(store.stats().journals).toBeGreaterThan(journalsBefore);
    // Meanwhile another reader starts no read ahead of its own (its lanes read their next images
    // themselves), so a long read cannot hold the removals off.
    const second = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
    const secondSeen: number[] = [];
    for (let k = 0; k < 5; k++) for (const m of await second.nextBatch()) secondSeen.push(m.seq);
    expect(second.readsAhead).toBe(0);
    // The held read ends: the removals run, and reads ahead start again.
    release();
    await readAll(first, firstSeen);
    await store.idle();
    expect(store.stats().journals).toBeLessThanOrEqual(journalsBefore);
    await readAll(second, secondSeen);
    const third = store.read(Filter.of("**"), { seq: 1 }, { batchBytesMax: 4096 });
    await readAll(third, []);
    expect(third.readsAhead).toBeGreaterThan(0);
    await store.close();
  });

  test("a sparse reader reads small packed images without read-ahead (the random hint); a dense one with it", async () => {
    const sim = new SimDisk({ seed: 14 });
    const inner = sim.view();
    const hinted: boolean[] = [];
    const disk: Disk = {
      ...inner,
      open: (path, mode, hints) => (
        path.endsWith(".pak") && mode !== "create" && hinted.push(hints?.random === true),
        inner.open(path, mode)
      ),
    };
    const { store } = await Store.open(disk, {});
    const topicOf = (seq: number) => `p${seq % 40}/x`;
    for (let seq = 1; seq <= 4000; seq++) store.append(seq, seq, topicOf(seq), payloadOf(seq, 30));
    await store.commit();
    await store.sortAll();
    let read = 0;
    for await (const message of store.read(Filter.of("p7/**"), { seq: 1 }))
      read += message.seq % 40 === 7 ? 1 : 1000;
    expect(read).toBe(100);
    expect(hinted).toEqual([true]);
    hinted.length = 0;
    await expectWholeStream(store, 4000, topicOf, (seq) => payloadOf(seq, 30));
    expect(hinted).toEqual([false]);
    await store.close();
  });

  test("a backlog that clears only when a read lets drained journals go still wakes whenCaughtUp", async () => {
    const sim = new SimDisk({ seed: 12 });
    // Reads of segment files wait at a gate while it is closed: a read batch stays in flight.
    let open: () => void = () => {};
    let gate: Promise<void> | null = null;
    const disk = withPackReads(sim.view(), async (read) => {
      if (gate !== null) await gate;
      return read();
    });
    const limits = {
      journalBytesMax: 8 << 10,
      journalRetainedBytesMax: 16 << 10,
      segmentBytesMax: 1 << 20,
      segmentAgeUsMax: 1e12,
      pendingRecordsMax: 1 << 20,
    };
    const { store } = await Store.open(disk, limits);
    const topicOf = (seq: number) => `p/${seq % 5}`;
    for (let seq = 1; seq <= 200; seq++) store.append(seq, seq, topicOf(seq), payloadOf(seq, 40));
    await store.commit();
    await store.sortAll();
    gate = new Promise((resolve) => (open = resolve));
    const reading = store.read(Filter.of("**"), { seq: 1 }).nextBatch();
    // Past twice the retained-journal budget; the sorter drains the old journals, but their
    // deletion waits for the read in flight.
    for (let seq = 201; seq <= 2000; seq++)
      store.append(seq, seq, topicOf(seq), payloadOf(seq, 40));
    await store.commit();
    expect(store.backlogged).toBe(true);
    let caughtUp = false;
    const waiting = store.whenCaughtUp().then(() => {
      caughtUp = true;
    });
    await store.idle();
    expect(store.stats().pendingRecords).toBeLessThan(1800);
    expect(caughtUp).toBe(false);
    open();
    expect((await reading).length).toBeGreaterThan(0);
    await waiting;
    expect(store.backlogged).toBe(false);
    await store.close();
  });

  test("retention removes whole old segments by age and by bytes; reads skip to what remains", async () => {
    const disk = new SimDisk({ seed: 6 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    for (let seq = 1; seq <= 600; seq++)
      store.append(seq, seq * 1000, TOPICS[seq % 3], payloadOf(seq, 20));
    await store.commit();
    await store.sortAll();
    const before = store.stats();
    const byAge = await store.retain({ ageUs: 300_000 }, 600_000);
    expect(byAge.segmentsRemoved).toBeGreaterThan(0);
    const first = (await store.read(Filter.of("**"), { seq: 1 }).nextBatch())[0];
    expect(first.seq).toBeGreaterThan(1);
    expect(first.timeUs).toBeLessThan(300_000 + 20_000);
    const byBytes = await store.retain({ bytes: 2000 }, 600_000);
    expect(store.stats().segmentBytes).toBeLessThanOrEqual(2000);
    expect(byAge.bytesRemoved + byBytes.bytesRemoved + store.stats().segmentBytes).toBe(
      before.segmentBytes,
    );
    // Packs whose segments all went are deleted; the others stay whole.
    const inForce = new Set(
      store
        .layout()
        .flatMap((partition) => partition.segments.map((segment) => segment.pack?.pack ?? -1)),
    );
    expect(packIds(disk)).toEqual([...inForce].sort((a, b) => a - b));
    await store.close();
    const reopened = await Store.open(disk, SMALL_LIMITS);
    expect(reopened.recovery.problems).toEqual([]);
    expect(reopened.store.nextSeq).toBe(601);
    await reopened.store.close();
  });

  test("every index entry points at the record it names (records sorted in runs and one by one)", async () => {
    const disk = new SimDisk({ seed: 8 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    // A stretch of one partition alone (back-to-back journal records), then partitions interleaved.
    for (let seq = 1; seq <= 800; seq++) {
      store.append(
        seq,
        seq * 1000,
        seq <= 400 ? "app/orders/created" : TOPICS[seq % TOPICS.length],
        payloadOf(seq, 30 + (seq % 7)),
      );
    }
    await store.commit();
    await store.sortAll();
    let entries = 0;
    const images = await packedImages(disk, SMALL_LIMITS.indexIntervalBytes as number);
    expect(images.length).toBe(store.stats().segments);
    for (const { path, image: segment, index: indexBytes } of images) {
      const index = decodeSegmentIndex(indexBytes, crc32);
      if (typeof index === "string") throw new Error(`${path}: ${index}`);
      const view = new DataView(segment.buffer, segment.byteOffset, segment.length);
      // Times rise with seqs here, so an entry's running maximum time is its record's time.
      expect(index.meta.firstTimeUs).toBe(recordTime(view, index.positions[0]));
      for (let entry = 0; entry < index.seqs.length; entry++) {
        expect(recordSeq(view, index.positions[entry])).toBe(index.seqs[entry]);
        expect(index.maxTimes[entry]).toBe(recordTime(view, index.positions[entry]));
        entries++;
      }
    }
    expect(entries).toBeGreaterThan(20);
    await store.close();
  });

  test("retention removes a split's subtree stores too, whole, and the manifest keeps it so", async () => {
    const disk = new SimDisk({ seed: 7 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    // Old data split into stores (one per topic), then newer data in segments after them.
    for (let seq = 1; seq <= 600; seq++)
      store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq, 20));
    await store.commit();
    await store.sortAll();
    const report = await executeSplit(
      storeHost(store),
      inProcessRunner(disk, { crc32: nativeCrc32 }),
      disk,
      { plan: { algorithm: "adaptive", maxStores: 64 }, workers: 1, intervalBytes: 256 },
    );
    expect(report.switched).toBe(true);
    for (let seq = 601; seq <= 900; seq++)
      store.append(seq, seq * 1000, TOPICS[seq % TOPICS.length], payloadOf(seq, 20));
    await store.commit();
    await store.sortAll();
    const storesBefore = store.layout().flatMap((partition) => partition.stores);
    expect(storesBefore.length).toBeGreaterThan(0);
    const stored = () => disk.paths().filter((path) => path.endsWith(".sto")).length;
    expect(stored()).toBe(storesBefore.length);

    // Everything the stores hold is older than the age limit: they all go; the newer segments stay.
    const newestInStores = Math.max(...storesBefore.map((s) => s.lastTimeUs));
    const removed = await store.retain({ ageUs: 1_000_000 - newestInStores - 1 }, 1_000_000);
    expect(removed.storesRemoved).toBe(storesBefore.length);
    expect(stored()).toBe(0);
    expect(disk.paths().filter((path) => path.endsWith(".idx")).length).toBe(0);
    const remaining = async (s: Store) => {
      const seqs: number[] = [];
      for await (const message of s.read(Filter.of("**"), { seq: 1 })) seqs.push(message.seq);
      return seqs;
    };
    const after = await remaining(store);
    expect(after.length).toBeGreaterThan(0);
    expect(after[0]).toBeGreaterThan(Math.max(...storesBefore.map((s) => s.lastSeq)));
    expect(after).toEqual(after.toSorted((a, b) => a - b));
    expect(after[after.length - 1]).toBe(900);
    await store.close();
    const reopened = await Store.open(disk, SMALL_LIMITS);
    expect(reopened.recovery.problems).toEqual([]);
    expect(reopened.store.layout().flatMap((partition) => partition.stores)).toEqual([]);
    expect(await remaining(reopened.store)).toEqual(after);
    await reopened.store.close();
  });

  test("a split whose ids were reserved from a server that has restarted since is refused at the switch: no id shared, every message there", async () => {
    const disk = new SimDisk({ seed: 9 });
    const first = (await Store.open(disk.view(), SMALL_LIMITS)).store;
    const publish = async (store: Store, count: number) => {
      for (let i = 0; i < count; i++)
        store.append(
          store.nextSeq,
          1000 + store.nextSeq,
          ["app/o/a", "app/o/b", "ops/m/x"][store.nextSeq % 3],
          payloadOf(store.nextSeq, 20),
        );
      await store.commit();
      await store.sortAll();
    };
    await publish(first, 200);
    let second: Store | null = null;
    const host = {
      layout: async () => first.layout(),
      reserveIds: async (count: number) => {
        const reserved = first.reserveIds(count);
        // The server dies; a new one on the same directory sorts new data meanwhile (its own ids).
        disk.crash();
        second = (await Store.open(disk.view(), SMALL_LIMITS)).store;
        await publish(second, 400);
        return reserved;
      },
      switchLayout: (swap: LayoutSwap) => second!.switchLayout(swap),
    };
    // The split's own disk access outlives the crash (it is another process): each call through the machine's current life.
    const view = wrapDisk(() => disk.view());
    const outcome = await executeSplit(host, inProcessRunner(view, { crc32: nativeCrc32 }), view, {
      plan: { algorithm: "heuristic" },
      workers: 1,
      intervalBytes: 128,
    }).then(
      () => "switched",
      (error: Error) => error.message,
    );
    expect(outcome).toMatch(/never reserved/);
    const store = second! as Store;
    const ids = store
      .layout()
      .flatMap((partition) => [
        ...partition.stores.map((s) => s.id),
        ...partition.segments.map((s) => s.id),
      ]);
    expect(new Set(ids).size).toBe(ids.length);
    const seqs: number[] = [];
    for await (const message of store.read(Filter.of("**"), { seq: 1 })) seqs.push(message.seq);
    expect(seqs).toEqual(Array.from({ length: 600 }, (_, i) => 1 + i));
    await store.close();
  });

  test("a time read after the clock stepped back (times falling between segments) starts at the first record at or after the time", async () => {
    const { store } = await Store.open(new SimDisk({ seed: 1 }), SMALL_LIMITS);
    // Seqs 1–100 at 1001–1100, then 101–300 at 601–800: several segments each.
    for (let seq = 1; seq <= 300; seq++)
      store.append(seq, seq <= 100 ? 1000 + seq : 500 + seq, "app/o/a", payloadOf(seq, 10));
    await store.commit();
    await store.sortAll();
    expect(store.layout()[0].segments.length).toBeGreaterThan(4);
    const from = async (timeUs: number) => {
      const seqs: number[] = [];
      for await (const message of store.read(Filter.of("app/o/a"), { timeUs }))
        seqs.push(message.seq);
      return seqs;
    };
    expect(await from(1050)).toEqual(Array.from({ length: 251 }, (_, i) => 50 + i));
    expect(await from(700)).toEqual(Array.from({ length: 300 }, (_, i) => 1 + i));
    expect(await from(790)).toEqual(Array.from({ length: 300 }, (_, i) => 1 + i));
    expect(await from(1101)).toEqual([]);
    await store.close();
  });

  test("newestTimeUs: the newest time appended, and after a reopen the newest stored (all sorted, or some in the journal)", async () => {
    const disk = new SimDisk({ seed: 21 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    expect(store.newestTimeUs).toBe(0);
    for (let seq = 1; seq <= 50; seq++)
      store.append(seq, 1000 + seq, TOPICS[seq % TOPICS.length], payloadOf(seq, 10));
    expect(store.newestTimeUs).toBe(1050);
    await store.close(); // sorts everything
    const sorted = await Store.open(disk, SMALL_LIMITS);
    expect(sorted.store.newestTimeUs).toBe(1050);
    sorted.store.append(51, 2000, "solo", payloadOf(51, 10));
    await sorted.store.commit();
    await sorted.store.close({ sort: false });
    const replayed = await Store.open(disk, SMALL_LIMITS);
    expect(replayed.store.newestTimeUs).toBe(2000);
    await replayed.store.close();
  });

  test("a failure beside a flush (a staged journal's fsync) stops it where it is: nothing past the last acknowledged seq becomes visible, and sync() rejects", async () => {
    for (const fsync of ["interval", "always"] as const) {
      const inner = new SimDisk({ seed: 1 }).view();
      let failed = false;
      // Fails the fsync of the first staged journal (`.next`: the seal of the one before runs beside the writes).
      const disk = wrapDisk(inner, {
        open: async (path, mode, hints) => {
          const file = await inner.open(path, mode, hints);
          if (!path.endsWith(".next")) return file;
          return wrapFile(file, {
            sync: async () => {
              if (failed) return file.sync();
              failed = true;
              throw new DiskError("EIO", "injected");
            },
          });
        },
      });
      const { store } = await Store.open(disk, { ...SMALL_LIMITS, fsync });
      let next = 1;
      let acked = 0;
      await Promise.all(
        [0, 1, 2].map(async (p) => {
          while (next <= 250) {
            let last = 0;
            try {
              for (let k = 0; k < 1 + (next % 3) && next <= 250; k++) {
                last = next++;
                store.append(
                  last,
                  last * 1000,
                  TOPICS[(last * 5 + p) % TOPICS.length],
                  payloadOf(last),
                );
              }
              await store.commit();
              acked = Math.max(acked, last);
            } catch {
              return;
            }
          }
        }),
      );
      await store.idle().catch(() => {});
      expect(failed).toBe(true);
      expect(store.failure).not.toBeNull();
      expect(store.committedSeq).toBeLessThanOrEqual(acked);
      let last = 0;
      for await (const message of store.read(Filter.of("**"), { seq: 1 })) last = message.seq;
      expect(last).toBeLessThanOrEqual(acked);
      await expect(store.sync()).rejects.toThrow();
      await store.close();
    }
  });

  test("a journal record damaged on the disk before its sort fails the sort with file and offset (the segment's image CRC would vouch for it)", async () => {
    const sim = new SimDisk({ seed: 14 });
    const { store } = await Store.open(sim.view(), {
      ...SMALL_LIMITS,
      journalBytesMax: 64 * 1024,
      journalRetainedBytesMax: 1_000_000,
    });
    for (let seq = 1; seq <= 200; seq++)
      store.append(seq, seq, TOPICS[seq % TOPICS.length], payloadOf(seq, 40));
    await store.commit();
    const journal = sim
      .paths()
      .find((path) => path.startsWith("journal/") && path.endsWith(".wal")) as string;
    const bytes = sim.snapshot(journal) as Uint8Array;
    const at = Math.floor(bytes.length / 2);
    sim.corrupt(journal, at, new Uint8Array([bytes[at] ^ 0x10]));
    const error = await store.sortAll().then(
      () => null,
      (e: Error) => e,
    );
    expect(error?.message).toContain(journal);
    expect(error?.message).toMatch(/(checksum mismatch|impossible record length) at offset \d+/);
    expect(store.failure).not.toBeNull();
    await store.close();
  });

  test("close() with a read batch in flight lets the batch finish before the files close", async () => {
    const sim = new SimDisk({ seed: 33 });
    {
      const { store } = await Store.open(sim.view(), SMALL_LIMITS);
      for (let seq = 1; seq <= 400; seq++)
        store.append(seq, seq, TOPICS[seq % TOPICS.length], payloadOf(seq, 30));
      await store.commit();
      await store.close();
    }
    // Reads of packs wait at a gate, opened once the close has had every chance to close files.
    const inner = sim.view();
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const disk = wrapDisk(inner, {
      open: async (path, mode, hints) => {
        const file = await inner.open(path, mode, hints);
        if (!path.endsWith(".pak")) return file;
        return wrapFile(file, {
          read: async (position, into) => {
            await gate;
            return file.read(position, into);
          },
        });
      },
    });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    const reader = store.read(Filter.of("**"), { seq: 1 });
    const batch = reader.nextBatch(); // waiting at the gate
    const closing = store.close({ sort: false });
    for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
    open();
    const messages = await batch;
    expect(messages.length).toBeGreaterThan(0);
    expect(messages.map((m) => m.seq)).toEqual(
      Array.from({ length: messages.length }, (_, i) => i + 1),
    );
    await closing;
    await expect(reader.nextBatch()).rejects.toThrow(/closed/);
  });

  test("a removal deferred behind a read that fails leaves its files to the next open: neither the read nor the retention fails", async () => {
    const sim = new SimDisk({ seed: 12 });
    const inner = sim.view();
    let failRemoves = false;
    const disk = wrapDisk(inner, {
      remove: async (path) => {
        if (failRemoves) throw new DiskError("EIO", `remove "${path}": injected`);
        return inner.remove(path);
      },
    });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    for (let seq = 1; seq <= 400; seq++) {
      store.append(
        seq,
        seq <= 200 ? seq : 1_000_000 + seq,
        TOPICS[seq % TOPICS.length],
        payloadOf(seq, 20),
      );
      if (seq % 200 === 0) await store.commit().then(() => store.sortAll());
    }
    const packs = () => sim.paths().filter((path) => path.endsWith(".pak")).length;
    const before = packs();
    failRemoves = true;
    const reader = store.read(Filter.of("**"), { seq: 1 });
    // The batch is in flight (awaiting its reads) when retention releases the old files.
    const batch = reader.nextBatch();
    const retained = await store.retain({ ageUs: 500_000 }, 1_000_000);
    expect(retained.segmentsRemoved).toBeGreaterThan(0);
    expect((await batch).length).toBeGreaterThan(0);
    failRemoves = false;
    expect(packs()).toBe(before);
    await store.close({ sort: false });
    const reopened = await Store.open(disk, SMALL_LIMITS);
    expect(reopened.recovery.problems).toEqual([]);
    expect(packs()).toBeLessThan(before);
    const seqs: number[] = [];
    for await (const message of reopened.store.read(Filter.of("**"), { seq: 1 }))
      seqs.push(message.seq);
    expect(seqs[seqs.length - 1]).toBe(400);
    expect(seqs[0]).toBeGreaterThan(1);
    await reopened.store.close();
  });

  test("appends and their flush during sortAll do not start a second sort beside it: no store failure, no overlapping segments", async () => {
    const limits = {
      ...SMALL_LIMITS,
      journalRetainedBytesMax: 1_000_000,
      segmentBytesMax: 600,
      segmentAgeUsMax: 1e15,
      readBatchBytesMax: 256,
    };
    for (const seed of [1, 2, 3]) {
      const disk = new SimDisk({ seed });
      const { store } = await Store.open(disk, limits);
      let seq = 1;
      // Below every trigger: nothing closes in the background.
      for (; seq <= 60; seq++)
        store.append(seq, seq, TOPICS[(seq * 7 + seed) % 5], payloadOf(seq, 30));
      await store.commit();
      await store.idle();
      const sorting = store.sortAll();
      // sortAll is in its first run (awaiting I/O): a burst, whose flush pokes the sorter.
      for (let i = 0; i < 6; i++) await Promise.resolve();
      for (let k = 0; k < 12; k++, seq++) store.append(seq, seq, TOPICS[k % 2], payloadOf(seq, 30));
      await store.commit();
      await sorting;
      await store.idle();
      expect(store.failure).toBeNull();
      await store.close();
      const reopened = await Store.open(disk, limits);
      expect(reopened.recovery.problems).toEqual([]);
      for (const partition of reopened.store.layout()) {
        for (let i = 1; i < partition.segments.length; i++)
          expect(partition.segments[i].firstSeq).toBeGreaterThan(partition.segments[i - 1].lastSeq);
      }
      const seqs: number[] = [];
      for await (const message of reopened.store.read(Filter.of("**"), { seq: 1 }))
        seqs.push(message.seq);
      expect(seqs).toEqual(Array.from({ length: seq - 1 }, (_, i) => i + 1));
      await reopened.store.close();
    }
  });

  test("retention while a split's switch is under way removes only what is still in force: a pack shared with a live segment stays", async () => {
    const disk = new SimDisk({ seed: 3 });
    const { store } = await Store.open(disk, {});
    // One sort batch, one pack: app/orders' segment (older), then ops/metrics'.
    for (let seq = 1; seq <= 100; seq++)
      store.append(
        seq,
        seq * 1000,
        seq > 50 ? "ops/metrics" : seq % 2 ? "app/orders/created" : "app/orders/paid",
        payloadOf(seq, 40),
      );
    await store.commit();
    await store.sortAll();
    const layout = store.layout();
    const orders = layout.find((partition) => partition.partition === "app/orders")!;
    const total = layout
      .flatMap((partition) => partition.segments)
      .reduce((sum, segment) => sum + segment.bytes, 0);
    let retained: Promise<RetainResult> | null = null;
    // The split of app/orders, with the maintenance timer's retention (by bytes: app/orders'
    // segment, the oldest, is its victim) starting while the switch is under way.
    const host = {
      layout: async () =>
        store.layout().filter((partition) => partition.partition === "app/orders"),
      reserveIds: async (count: number) => store.reserveIds(count),
      switchLayout: (swap: LayoutSwap) => {
        const switching = store.switchLayout(swap);
        retained = store.retain({ bytes: total - orders.segments[0].bytes }, 10_000_000);
        return switching;
      },
    };
    const report = await executeSplit(host, inProcessRunner(disk, { crc32: nativeCrc32 }), disk, {
      plan: { algorithm: "adaptive", maxStores: 64 },
      workers: 1,
      intervalBytes: 256,
    });
    expect(report.switched).toBe(true);
    // Retention chose after the switch: the segment it had replaced is not among what it removed
    // (before, it was, and its pack was released a second time and deleted under ops/metrics).
    const removed = await retained!;
    expect(removed.segmentsRemoved).toBe(0);
    await store.idle();
    const read = async (s: Store, filter: string) => {
      const seqs: number[] = [];
      for await (const message of s.read(Filter.of(filter), { seq: 1 })) seqs.push(message.seq);
      return seqs;
    };
    expect(await read(store, "ops/**")).toEqual(Array.from({ length: 50 }, (_, i) => 51 + i));
    const live = await read(store, "**");
    expect(live.slice(-50)).toEqual(Array.from({ length: 50 }, (_, i) => 51 + i));
    await store.close({ sort: false });
    const reopened = await Store.open(disk, {});
    expect(reopened.recovery.problems).toEqual([]);
    expect(await read(reopened.store, "**")).toEqual(live);
    await reopened.store.close();
  });

  test("a retention whose manifest fsync fails stops the store; after a restart the manifest is whole, the retention in force or not", async () => {
    const disk = new SimDisk({ seed: 9 });
    const { store } = await Store.open(disk, {});
    for (let seq = 1; seq <= 180; seq++) {
      store.append(seq, seq <= 90 ? seq : 1_000_000 + seq, TOPICS[seq % 3], payloadOf(seq, 30));
      if (seq % 90 === 0) await store.commit().then(() => store.sortAll());
    }
    disk.failNextSyncs(1);
    await expect(store.retain({ ageUs: 500_000 }, 1_000_000)).rejects.toThrow();
    // Had it gone on, the next ADD would have been written over the REMOVEs whose bytes the
    // failed fsync may or may not have kept, leaving records the next open takes for damage.
    expect(store.failure).not.toBeNull();
    expect(() => store.append(181, 2_000_000, "solo", payloadOf(181, 30))).toThrow();
    disk.kill();
    const reopened = await Store.open(disk, {});
    expect(reopened.recovery.problems).toEqual([]);
    expect(reopened.recovery.manifestRebuilt).toBeFalsy();
    const seqs: number[] = [];
    for await (const message of reopened.store.read(Filter.of("**"), { seq: 1 }))
      seqs.push(message.seq);
    expect([1, 91]).toContain(seqs[0]);
    expect(seqs).toEqual(Array.from({ length: 181 - seqs[0] }, (_, i) => seqs[0] + i));
    await reopened.store.close();
  });

  test("retention of a few subtree stores, its SWAP the manifest's last record (shorter than an ADD), then a clean restart: the store opens", async () => {
    const disk = new SimDisk({ seed: 5 });
    const { store } = await Store.open(disk, SMALL_LIMITS);
    for (let seq = 1; seq <= 200; seq++)
      store.append(
        seq,
        seq * 1000,
        seq % 2 ? "app/orders/created" : "app/orders/paid",
        payloadOf(seq, 20),
      );
    await store.commit();
    await store.sortAll();
    const report = await executeSplit(
      storeHost(store),
      inProcessRunner(disk, { crc32: nativeCrc32 }),
      disk,
      { plan: { algorithm: "adaptive", maxStores: 64 }, workers: 1, intervalBytes: 256 },
    );
    expect(report.switched).toBe(true);
    for (let seq = 201; seq <= 260; seq++)
      store.append(seq, 10_000_000 + seq * 1000, "ops/metrics", payloadOf(seq, 20));
    await store.commit();
    await store.sortAll();
    const stores = store.layout().flatMap((partition) => partition.stores).length;
    expect(stores).toBeGreaterThan(0);
    expect(stores).toBeLessThanOrEqual(5);
    expect((await store.retain({ ageUs: 5_000_000 }, 10_000_000)).storesRemoved).toBe(stores);
    await store.close();
    const reopened = await Store.open(disk, SMALL_LIMITS);
    expect(reopened.recovery.problems).toEqual([]);
    const seqs: number[] = [];
    for await (const message of reopened.store.read(Filter.of("**"), { seq: 1 }))
      seqs.push(message.seq);
    expect(seqs).toEqual(Array.from({ length: 60 }, (_, i) => 201 + i));
    await reopened.store.close();
  });
});

/** Reads `**` from seq 1, copying and borrowing: exactly seqs 1..count with their topics and payloads. */
/**
 * Reads the whole stream twice (copied, then borrowed payloads) and checks every message. Each
 * read reads every stored byte at most once: a partition read topping up, or meeting a record cut
 * by its buffer's end, keeps the bytes it has instead of reading them again. (A span read over
 * neighbouring segments of a pack reads the index images between them too: those count as
 * stored bytes.)
 */
async function expectWholeStream(
  store: Store,
  count: number,
  topicOf: (seq: number) => string,
  payload: (seq: number) => Uint8Array,
): Promise<void> {
  for (const borrow of [false, true]) {
    const bytesBefore = store.stats().bytesRead;
    const reader = store.read(Filter.of("**"), { seq: 1 }, { borrow });
    let expected = 1;
    for (;;) {
      const batch = await reader.nextBatch();
      if (batch.length === 0) break;
      for (const message of batch) {
        expect(message.seq).toBe(expected);
        expect(message.topic).toBe(topicOf(expected));
        expect([...message.payload]).toEqual([...payload(expected)]);
        expected++;
      }
    }
    expect(expected).toBe(count + 1);
    let indexImageBytes = 0;
    for (const partition of store.layout())
      for (const segment of partition.segments) indexImageBytes += segment.pack?.indexBytes ?? 0;
    expect(store.stats().bytesRead - bytesBefore).toBeLessThanOrEqual(
      store.stats().segmentBytes + indexImageBytes,
    );
  }
}

/** Bytes of the file header at the start of a segment image (its records follow). */
function imageHeaderBytes(image: Uint8Array): number {
  const header = decodeFileHeader(image, "segment", crc32);
  if (typeof header === "string") throw new Error(header);
  return header.bytes;
}

/** `inner` with every read of a pack file going through `through` (which performs it by calling `read`). */
/**
 * `sim`'s disk whose reads of the second pack first await what `hold()` returns, if anything; the
 * second pack is the second one on disk when `packsWritten()` is called.
 */
function secondPackReads(
  sim: SimDisk,
  hold: () => Promise<void> | null,
): { disk: Disk; packsWritten: () => void } {
  let secondPack = "";
  const disk = withPackReads(sim.view(), async (read, path) => {
    if (path === secondPack) await hold();
    return read();
  });
  return { disk, packsWritten: () => (secondPack = packPath(packIds(sim)[1])) };
}

/** Seqs 1–4,000 over 40 partitions (`p<seq % 40>/x`, 30-byte payloads), sorted twice: each partition has an image in each of two packs. */
async function sortInTwoPacks(store: Store): Promise<void> {
  for (const [from, to] of [
    [1, 2000],
    [2001, 4000],
  ]) {
    for (let seq = from; seq <= to; seq++)
      store.append(seq, seq, `p${seq % 40}/x`, payloadOf(seq, 30));
    await store.commit();
    await store.sortAll();
  }
}

function withPackReads(
  inner: Disk,
  through: (read: () => Promise<number>, path: string) => Promise<number>,
): Disk {
  return {
    list: (dir) => inner.list(dir),
    mkdir: (dir) => inner.mkdir(dir),
    remove: (path) => inner.remove(path),
    rename: (from, to) => inner.rename(from, to),
    syncDir: (dir) => inner.syncDir(dir),
    open: async (path, mode) => {
      const file = await inner.open(path, mode);
      if (!path.endsWith(".pak")) return file;
      const wrapped: DiskFile = {
        path: file.path,
        read: (position, into) => through(() => file.read(position, into), path),
        write: (position, bytes) => file.write(position, bytes),
        size: () => file.size(),
        sync: () => file.sync(),
        truncate: (size) => file.truncate(size),
        close: () => file.close(),
      };
      return wrapped;
    },
  };
}
