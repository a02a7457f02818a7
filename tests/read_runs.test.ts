/**
 * Runs of record tables (src/store/decoded_runs.ts): a merge over many partitions takes the
 * records of tabulated span images without going through their partition reads. What it
 * yields must be exactly what the per-record path yields — seq, time, topic and payload, copied
 * and borrowed — across batches that resume the merge, batches that rewind pending runs (a new
 * limit, a layout change, new partitions), time reads, filters, and damaged images (never
 * tabulated).
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import type { Disk } from "../src/store/disk.ts";
import { Store } from "../src/store/mod.ts";
import type { StoreReader } from "../src/store/read/mod.ts";
import { fcParams } from "../src/testing/fc_params.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";
import { payloadOf, tempDir } from "./fixtures/store_helpers.ts";

const PARTITIONS = 300;
const single = (seq: number) => `r${(seq * 7) % PARTITIONS}/x`;
const payload = (seq: number) => payloadOf(seq, 1 + (seq % 57));
const timeOf = (seq: number) => 1_000_000 + seq * 10;

/** A store of `count` messages, sorted every `sortEvery` of them (an image per partition each time) and at the end; on the simulated disk of `seed`, or on `disk`. */
async function filled(
  seed: number,
  count: number,
  topicOf: (seq: number) => string,
  sortEvery = count,
  disk: Disk = new SimDisk({ seed }).view(),
): Promise<Store> {
  const { store } = await Store.open(disk, {});
  for (let seq = 1; seq <= count; seq++) {
    store.append(seq, timeOf(seq), topicOf(seq), payload(seq));
    if (seq % sortEvery === 0) await store.commit().then(() => store.sortAll());
  }
  await store.commit();
  await store.sortAll();
  return store;
}

/** Reads `batches` batches (all when omitted), checking each message against what was appended; returns the seqs. */
async function take(
  reader: StoreReader,
  topicOf: (seq: number) => string,
  batches = Infinity,
): Promise<number[]> {
  const seqs: number[] = [];
  for (let b = 0; b < batches; b++) {
    const batch = await reader.nextBatch();
    if (batch.length === 0) break;
    for (const message of batch) {
      expect(message.timeUs).toBe(timeOf(message.seq));
      expect(message.topic).toBe(topicOf(message.seq));
      expect([...message.payload]).toEqual([...payload(message.seq)]);
      seqs.push(message.seq);
    }
  }
  return seqs;
}

const upTo = (first: number, last: number) =>
  Array.from({ length: last - first + 1 }, (_, i) => first + i);

/** Reads the whole stream of `store` (seqs 1..count) copied and borrowed: exact, and more than `share` of it from runs. Closes the store. */
async function expectWholeStreamThroughRuns(
  store: Store,
  count: number,
  share: number,
): Promise<void> {
  for (const borrow of [false, true]) {
    const reader = store.read(Filter.of("**"), { seq: 1 }, { borrow, batchBytesMax: 8192 });
    expect(await take(reader, single)).toEqual(upTo(1, count));
    // Each partition's first record of an image comes through its partition read, the rest runs.
    expect(reader.runsTaken).toBeGreaterThan(count * share);
  }
  await store.close({ sort: false });
}

const dir = tempDir("aria-read-runs-");
afterAll(dir.remove);

describe("runs of record tables", () => {
  test("on the real disk (spans mapped, their missing pages read in), a whole-stream read over many partitions through runs is exact", async () => {
    // Three images per partition: a smaller share comes from runs (each image's first record does not).
    await expectWholeStreamThroughRuns(
      await filled(0, 9000, single, 3000, new BunDisk(dir.path)),
      9000,
      0.5,
    );
  });

  test("a whole-stream read over many single-topic partitions takes most messages from runs, exact when copied and when borrowed", async () => {
    await expectWholeStreamThroughRuns(await filled(41, 9000, single), 9000, 0.6);
  });

  test("pending runs are rewound when a batch positions every partition read again (a new limit, a sort, new partitions): no gap, no duplicate", async () => {
    // Nine images per partition (about 3 records each): many runs end at an image's last record.
    const store = await filled(42, 9000, single, 1000);
    const reader = store.read(Filter.of("**"), { seq: 1 }, { borrow: true, batchBytesMax: 2048 });
    const seen = await take(reader, single, 20);
    expect(reader.runsTaken).toBeGreaterThan(0);
    let last = 9000;
    const publish = async (count: number, topicOf: (seq: number) => string) => {
      for (let k = 0; k < count; k++) {
        last++;
        store.append(last, timeOf(last), topicOf(last), payload(last));
      }
      await store.commit();
    };
    const topicOf = (seq: number) => (seq > 9500 ? `fresh${seq % 40}/x` : single(seq));
    await publish(500, single);
    seen.push(...(await take(reader, topicOf, 5)));
    await store.sortAll();
    seen.push(...(await take(reader, topicOf, 5)));
    await publish(200, topicOf);
    seen.push(...(await take(reader, topicOf, 5)));
    // A sort after every batch: each partition's layout changes while some of its runs are pending
    // and others have just ended (the lane's last record of an image still its head).
    for (let round = 0; round < 40; round++) {
      seen.push(...(await take(reader, topicOf, 1)));
      await publish(7, topicOf);
      await store.sortAll();
    }
    const before = reader.runsTaken;
    seen.push(...(await take(reader, topicOf)));
    expect(reader.runsTaken).toBeGreaterThan(before);
    expect(seen).toEqual(upTo(1, last));
    await store.close({ sort: false });
  });

  test("a time read yields everything from the first message at or after the time, through runs from each partition's next image on", async () => {
    const { store } = await Store.open(new SimDisk({ seed: 43 }).view(), {});
    for (let seq = 1; seq <= 9000; seq++) {
      store.append(seq, timeOf(seq), single(seq), payload(seq));
      // Two sorts: every partition has an image in each of two packs.
      if (seq === 4500) await store.commit().then(() => store.sortAll());
    }
    await store.commit();
    await store.sortAll();
    const from = 3217;
    const reader = store.read(
      Filter.of("**"),
      { timeUs: timeOf(from) - 5 },
      { borrow: true, batchBytesMax: 4096 },
    );
    expect(await take(reader, single)).toEqual(upTo(from, 9000));
    expect(reader.runsTaken).toBeGreaterThan(0);
    await store.close({ sort: false });
  });

  test("a damaged image is not tabulated: its records are checked one by one and the damage is reported with file and offset", async () => {
    const sim = new SimDisk({ seed: 44 });
    const { store } = await Store.open(sim.view(), {});
    for (let seq = 1; seq <= 9000; seq++) store.append(seq, timeOf(seq), single(seq), payload(seq));
    await store.commit();
    await store.sortAll();
    await store.close({ sort: false });
    const pack = (await sim.list("segments")).find((name) => name.endsWith(".pak")) as string;
    const bytes = sim.snapshot(`segments/${pack}`) as Uint8Array;
    const at = Math.floor(bytes.length / 2);
    sim.corrupt(`segments/${pack}`, at, new Uint8Array([bytes[at] ^ 0xff]));
    const reopened = (await Store.open(sim.view(), {})).store;
    const error = await take(
      reopened.read(Filter.of("**"), { seq: 1 }, { borrow: true }),
      single,
    ).catch((e) => e);
    expect(error.message).toMatch(
      new RegExp(
        `^Cannot read "segments/${pack}": (checksum mismatch|impossible record length) at offset \\d+$`,
      ),
    );
    await reopened.close({ sort: false });
  });

  test("random publishes, sorts and batches of a long read over many partitions, from a seq or a time: the read yields every message once, in order, exact", async () => {
    type Op =
      | { kind: "publish"; count: number }
      | { kind: "sort" }
      | { kind: "read"; batches: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant("publish" as const), count: fc.integer({ min: 1, max: 700 }) }),
      fc.record({ kind: fc.constant("sort" as const) }),
      fc.record({ kind: fc.constant("read" as const), batches: fc.integer({ min: 1, max: 6 }) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1 << 30 }),
        fc.boolean(),
        fc.integer({ min: 512, max: 16_384 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(op, { minLength: 1, maxLength: 14 }),
        fc.boolean(),
        async (salt, borrow, batchBytesMax, from, ops, byTime) => {
          const topicOf = (seq: number) =>
            `r${((Math.imul(seq, 2654435761) ^ salt) >>> 0) % PARTITIONS}/x`;
          const { store } = await Store.open(new SimDisk({ seed: salt }).view(), {});
          let last = 0;
          const publish = async (count: number) => {
            for (let k = 0; k < count; k++) {
              last++;
              store.append(last, timeOf(last), topicOf(last), payload(last));
            }
            await store.commit();
          };
          // Every partition present from the start: its partition reads are many (runs in use).
          await publish(3000);
          await store.sortAll();
          const reader = store.read(
            Filter.of("**"),
            byTime ? { timeUs: timeOf(from) - 3 } : { seq: from },
            { borrow, batchBytesMax },
          );
          const seen: number[] = [];
          for (const step of ops) {
            if (step.kind === "publish") await publish(step.count);
            else if (step.kind === "sort") await store.sortAll();
            else seen.push(...(await take(reader, topicOf, step.batches)));
          }
          seen.push(...(await take(reader, topicOf)));
          expect(seen).toEqual(upTo(from, last));
          // A time read seeks inside each partition's first image (no span read, no table there).
          if (!byTime) expect(reader.runsTaken).toBeGreaterThan(0);
          await store.close({ sort: false });
        },
      ),
      {
        ...fcParams({ runs: 20 }),
        // Found with FC_SEED=1111 FC_RUNS=300: a copying reader refilled a lane's buffer in place
        // with the next image while the lane still held the table of the one before.
        examples: [
          [
            1,
            false,
            12146,
            2,
            [
              { kind: "publish", count: 160 },
              { kind: "sort" },
              { kind: "publish", count: 356 },
              { kind: "sort" },
              { kind: "read", batches: 1 },
            ],
            false,
          ],
        ],
      },
    );
  });

  test("a subtree filter over many partitions yields only its topics, in order, through runs", async () => {
    const store = await filled(45, 9000, single);
    // r1, r10–r19, r100–r199: 111 of the 300 partitions; runs need at least 256 partition reads,
    // so this read goes record by record, and the whole-stream read after it through runs: both
    // exact.
    const wanted = upTo(1, 9000).filter((seq) => single(seq).startsWith("r1"));
    const subtree = store.read(
      Filter.of(
        "r1/**",
        "r10/**",
        "r11/**",
        "r12/**",
        "r13/**",
        "r14/**",
        "r15/**",
        "r16/**",
        "r17/**",
        "r18/**",
        "r19/**",
        ...upTo(100, 199).map((p) => `r${p}/**`),
      ),
      { seq: 1 },
    );
    expect(await take(subtree, single)).toEqual(wanted);
    expect(subtree.runsTaken).toBe(0);
    const all = store.read(Filter.of("**", "r1/**"), { seq: 1 });
    expect(await take(all, single)).toEqual(upTo(1, 9000));
    expect(all.runsTaken).toBeGreaterThan(0);
    await store.close({ sort: false });
  });

  test("a borrowing reader's slots past a shorter batch let go of the buffers they pointed into", async () => {
    const store = await filled(46, 3000, single);
    const reader = store.read(Filter.of("**"), { seq: 1 }, { borrow: true });
    const first = await reader.nextBatch();
    expect(first.length).toBeGreaterThan(10);
    const kept = [...first];
    // Caught up: the next batches are the few messages appended since.
    for (let seq = 3001; seq <= 3003; seq++)
      store.append(seq, timeOf(seq), single(seq), payload(seq));
    await store.commit();
    let rest = await reader.nextBatch();
    while (rest.length > 0 && rest[rest.length - 1].seq < 3003) rest = await reader.nextBatch();
    expect(rest.length).toBeLessThan(first.length);
    expect([...rest[rest.length - 1].payload]).toEqual([...payload(3003)]);
    // The slots this batch did not use hold no buffer any more; the ones it used hold its messages.
    for (const message of kept.slice(rest.length)) expect(message.source?.length ?? 0).toBe(0);
    expect(await reader.nextBatch()).toEqual([]);
    for (const message of kept) expect(message.source?.length ?? 0).toBe(0);
    await store.close({ sort: false });
  });
});
