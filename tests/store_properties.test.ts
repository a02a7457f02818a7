/**
 * Message properties in the store: kept byte for byte through the journal (replayed after a close
 * without sorting, as after a crash), segments and packs (a clean close), by copying and by
 * borrowing reads; a message without properties costs the same bytes as before they existed;
 * and a data directory written by the store before properties existed
 * (tests/fixtures/store_before_properties, made by the code of commit aebe469 with the script in
 * its README) opens and reads unchanged.
 */
import { afterAll, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { Store, type StoredMessage } from "../src/store/mod.ts";
import { recordBytes } from "../src/store/record.ts";
import { executeSplit } from "../src/split/executor.ts";
import { inProcessRunner, storeHost } from "../src/split/in_process.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter } from "../src/topic/mod.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), "aria-store-properties-"));
  dirs.push(dir);
  return dir;
}
const OPTIONS = { crc32: nativeCrc32, segmentBytesMax: 1500, indexIntervalBytes: 128 };
const TOPICS = ["p/a", "p/b/c", "q"];

const payloadOf = (seq: number) => Uint8Array.from({ length: seq % 17 }, (_, i) => seq + i);
/** Every third message has none; the others 1..300 bytes. */
const propertiesOf = (seq: number) =>
  seq % 3 === 0
    ? undefined
    : Uint8Array.from({ length: 1 + ((seq * 37) % 300) }, (_, i) => i ^ seq);

type Plain = { seq: number; topic: string; payload: number[]; properties: number[] | null };
const plain = (m: StoredMessage): Plain => ({
  seq: m.seq,
  topic: m.topic,
  payload: [...m.payload],
  properties: m.properties === undefined ? null : [...m.properties],
});
const expected = (count: number): Plain[] =>
  Array.from({ length: count }, (_, i) => {
    const seq = i + 1;
    const properties = propertiesOf(seq);
    return {
      seq,
      topic: TOPICS[seq % 3],
      payload: [...payloadOf(seq)],
      properties: properties === undefined ? null : [...properties],
    };
  });

async function readAll(store: Store, borrow: boolean, filter = "**"): Promise<Plain[]> {
  const reader = store.read(Filter.of(filter), { seq: 1 }, { borrow, batchBytesMax: 700 });
  const got: Plain[] = [];
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch())
    for (const message of batch) got.push(plain(message));
  return got;
}

test("properties survive the journal's replay and the sort into segments, copied or borrowed", async () => {
  const dir = temp();
  let { store } = await Store.open(new BunDisk(dir), OPTIONS);
  const count = 200;
  for (let seq = 1; seq <= count; seq++) {
    const payload = payloadOf(seq);
    const properties = propertiesOf(seq) ?? null;
    store.append(
      seq,
      1000 + seq,
      TOPICS[seq % 3],
      payload,
      0,
      payload.length,
      properties,
      0,
      properties?.length ?? 0,
    );
  }
  await store.commit();
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(expected(count));
  await store.close({ sort: false }); // left in the journal, replayed at the next open
  ({ store } = await Store.open(new BunDisk(dir), OPTIONS));
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(expected(count));
  const oneTopic = expected(count).filter((m) => m.topic === "p/a");
  expect(await readAll(store, true, "p/a")).toEqual(oneTopic);
  await store.close(); // sorted into segments
  ({ store } = await Store.open(new BunDisk(dir), OPTIONS));
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(expected(count));
  expect(await readAll(store, false, "p/a")).toEqual(oneTopic);
  const newest = await store.readNewest(1 << 20);
  expect(newest.map(plain)).toEqual(expected(count));
  await store.close();
});

test("a message without properties costs the bytes it cost before: 32 + topic + payload", () => {
  expect(recordBytes(5, 100)).toBe(32 + 5 + 100);
  expect(recordBytes(5, 100, 0)).toBe(32 + 5 + 100);
  expect(recordBytes(5, 100, 10)).toBe(32 + 5 + 100 + 10 + 2);
});

test("a data directory written before properties existed opens and reads unchanged", async () => {
  const dir = temp();
  cpSync(join(import.meta.dir, "fixtures", "store_before_properties"), dir, { recursive: true });
  const { store } = await Store.open(new BunDisk(dir), OPTIONS);
  const topics = ["old/a", "old/b/c", "other"];
  const want = Array.from({ length: 60 }, (_, i) => {
    const seq = i + 1;
    const text = `v1 message ${seq} `.padEnd(10 + (seq % 13), "x");
    return {
      seq,
      topic: topics[seq % 3],
      payload: [...new TextEncoder().encode(text)],
      properties: null,
    };
  });
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(want);
  expect(store.nextSeq).toBe(61);
  await store.close({ sort: false });
});

test("properties through a merge of many partitions (decoded runs of tabulated images)", async () => {
  const dir = temp();
  let { store } = await Store.open(new BunDisk(dir), OPTIONS);
  const partitions = 300; // past RUN_PARTITIONS_MIN: the reader takes runs of tabulated images
  const want: Plain[] = [];
  for (let seq = 1; seq <= partitions * 4; seq++) {
    const topic = `r/${seq % partitions}`;
    const payload = payloadOf(seq);
    const properties = propertiesOf(seq);
    store.append(
      seq,
      1000 + seq,
      topic,
      payload,
      0,
      payload.length,
      properties ?? null,
      0,
      properties?.length ?? 0,
    );
    want.push({
      seq,
      topic,
      payload: [...payload],
      properties: properties === undefined ? null : [...properties],
    });
  }
  await store.commit();
  await store.close();
  ({ store } = await Store.open(new BunDisk(dir), OPTIONS));
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(want);
  await store.close();
});

test("properties survive a split into subtree stores", async () => {
  const disk = new SimDisk({ seed: 30 });
  const { store } = await Store.open(disk, OPTIONS);
  const count = 400;
  for (let seq = 1; seq <= count; seq++) {
    const payload = payloadOf(seq);
    const properties = propertiesOf(seq);
    store.append(
      seq,
      1000 + seq,
      TOPICS[seq % 3],
      payload,
      0,
      payload.length,
      properties ?? null,
      0,
      properties?.length ?? 0,
    );
  }
  await store.commit();
  await store.sortAll();
  const report = await executeSplit(
    storeHost(store),
    inProcessRunner(disk, { crc32: nativeCrc32 }),
    disk,
    {
      plan: { algorithm: "adaptive", maxStores: 64 },
      workers: 1,
      intervalBytes: 256,
    },
  );
  expect(report.switched).toBe(true);
  expect(store.layout().flatMap((partition) => partition.stores).length).toBeGreaterThan(0);
  for (const borrow of [false, true]) expect(await readAll(store, borrow)).toEqual(expected(count));
  await store.close();
});
