/** ConsumerFile: positions written in batches survive a reopen; torn tails dropped; damage refused. */
import { afterAll, describe, expect, test } from "bun:test";
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConsumerRecord } from "../broker/ports.ts";
import { StoreError } from "../store/mod.ts";
import { nativeCrc32 } from "./crc32.ts";
import {
  CONSUMERS_FILE,
  ConsumerFile,
  repairConsumersFile,
  type TornTail,
} from "./consumer_file.ts";

const root = mkdtempSync(join(tmpdir(), "aria-consumers-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const newDir = () => mkdtempSync(join(root, `d${dirs++}-`));
const options = { fsync: "always" as const, crc32: nativeCrc32 };
const record = (name: string, nextSeq: number): ConsumerRecord => ({
  name,
  filter: ["a/**", "b/*/c"],
  shared: name.startsWith("g"),
  nextSeq,
  lastActiveUs: 1_700_000_000_000_000 + nextSeq,
});
const sorted = (records: readonly ConsumerRecord[]) =>
  [...records].sort((a, b) => a.name.localeCompare(b.name));

describe("ConsumerFile", () => {
  test("saves and removes come back after a reopen, last one wins", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    expect(file.load()).toEqual([]);
    file.save(record("c", 5));
    file.save(record("g1", 2));
    file.save(record("c", 9));
    file.save(record("x", 1));
    file.remove("x");
    await file.close();
    const again = await ConsumerFile.open(dir, options);
    expect(sorted(again.load())).toEqual([record("c", 9), record("g1", 2)]);
    await again.close();
  });

  test("without fsync always, saves wait for the interval: one append for many", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, { ...options, fsync: "interval", intervalMs: 30 });
    const before = statSync(join(dir, CONSUMERS_FILE)).size;
    for (let seq = 1; seq <= 100; seq++) file.save(record("c", seq));
    expect(statSync(join(dir, CONSUMERS_FILE)).size).toBe(before);
    await Bun.sleep(80);
    const after = statSync(join(dir, CONSUMERS_FILE)).size;
    // One record (the last of 100 saves of one name), not 100.
    expect(after - before).toBeLessThan(100);
    expect(after).toBeGreaterThan(before);
    await file.close();
    expect((await ConsumerFile.open(dir, options)).load()).toEqual([record("c", 100)]);
  });

  test("a torn tail is dropped and cut away; a bad record before others is damage with its offset", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    file.save(record("c", 3));
    await file.flush();
    file.save(record("d", 4));
    await file.close();
    const path = join(dir, CONSUMERS_FILE);
    const whole = readFileSync(path);
    // Cut inside the last record: a crash mid-append; told, with the consumer it named.
    writeFileSync(path, whole.subarray(0, whole.length - 5));
    const cuts: TornTail[] = [];
    const torn = await ConsumerFile.open(dir, { ...options, onTornTail: (cut) => cuts.push(cut) });
    expect(torn.load()).toEqual([record("c", 3)]);
    const recordBytes = whole.length - statSync(path).size;
    expect(cuts).toEqual([
      { file: path, offset: whole.length - recordBytes, bytesCut: recordBytes - 5, consumer: "d" },
    ]);
    await torn.close();
    expect(statSync(path).size).toBeLessThan(whole.length - 5);
    // Zeros to the end (a file extended by a crash before its data): dropped too.
    appendFileSync(path, new Uint8Array(64));
    expect((await ConsumerFile.open(dir, options)).load()).toEqual([record("c", 3)]);
    // A flipped byte in the first record, with a good one after: damage, refused.
    const good = readFileSync(path);
    const damaged = Uint8Array.from(good);
    damaged[20] ^= 0xff;
    writeFileSync(path, new Uint8Array([...damaged, ...good.subarray(8)]));
    await expect(ConsumerFile.open(dir, options)).rejects.toThrow(
      `Cannot read the durable consumers' file "${path}": checksum mismatch at offset 8`,
    );
  });

  test("the file is compacted: its size stays bounded by the live consumers", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    for (let seq = 1; seq <= 3000; seq++) {
      file.save(record("c", seq));
      if (seq % 3 === 0) await file.flush();
    }
    await file.close();
    expect(statSync(join(dir, CONSUMERS_FILE)).size).toBeLessThan(80 * 1024);
    expect((await ConsumerFile.open(dir, options)).load()).toEqual([record("c", 3000)]);
  });

  test("repair: damaged bytes moved aside, records before and after the damage kept", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    for (const [name, seq] of [
      ["a", 1],
      ["b", 2],
      ["c", 3],
    ] as const) {
      file.save(record(name, seq));
      await file.flush();
    }
    await file.close();
    const path = join(dir, CONSUMERS_FILE);
    const good = readFileSync(path);
    const damaged = Uint8Array.from(good);
    const secondRecord = 8 + 8 + good.readUInt32LE(8);
    damaged[secondRecord + 12] ^= 0xff;
    writeFileSync(path, damaged);
    expect(repairConsumersFile(dir, { crc32: nativeCrc32 })?.damaged).toEqual([
      {
        offset: secondRecord,
        bytes: 8 + good.readUInt32LE(secondRecord),
        reason: "checksum mismatch",
        to: join(dir, "damaged", `${CONSUMERS_FILE}.${secondRecord}`),
      },
    ]);
    expect(sorted((await ConsumerFile.open(dir, options)).load())).toEqual([
      record("a", 1),
      record("c", 3),
    ]);
    expect(readFileSync(join(dir, "damaged", `${CONSUMERS_FILE}.${secondRecord}`)).length).toBe(
      8 + good.readUInt32LE(secondRecord),
    );
    // Repaired: a second repair finds nothing.
    expect(repairConsumersFile(dir, { crc32: nativeCrc32 })).toBeNull();
  });

  test("a file cut shorter than its header is damage at start-up, and repair sets it aside", async () => {
    for (const cut of [0, 4, 7]) {
      const dir = newDir();
      const file = await ConsumerFile.open(dir, options);
      file.save(record("keep", 1));
      await file.close();
      const path = join(dir, CONSUMERS_FILE);
      // Created whole: even before any consumer, a new file holds its header.
      expect(readFileSync(path).length).toBeGreaterThan(8);
      truncateSync(path, cut);
      const refused = await ConsumerFile.open(dir, options).catch((error) => error);
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as StoreError).code).toBe("ARIA_ERR_STORE_CORRUPT");
      expect((refused as Error).message).toContain(`${path}": the file is ${cut} bytes`);
      expect((refused as Error).message).toContain("at offset 0");
      const repaired = repairConsumersFile(dir, { crc32: nativeCrc32 });
      expect(repaired?.damaged).toEqual([
        expect.objectContaining({
          offset: 0,
          bytes: cut,
          to: join(dir, "damaged", `${CONSUMERS_FILE}.0`),
        }),
      ]);
      expect(repaired?.damaged[0].reason).toContain(
        "every consumer and session state it held is lost",
      );
      expect(readFileSync(join(dir, "damaged", `${CONSUMERS_FILE}.0`)).length).toBe(cut);
      expect((await ConsumerFile.open(dir, options)).load()).toEqual([]);
      expect(repairConsumersFile(dir, { crc32: nativeCrc32 })).toBeNull();
    }
    // Absent: none yet, created whole (the header alone).
    const fresh = newDir();
    await (await ConsumerFile.open(fresh, options)).close();
    expect(readFileSync(join(fresh, CONSUMERS_FILE)).length).toBe(8);
  });

  test("repair names the consumers it could not keep, and counts damaged records without a name", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    const order = [
      ["a", 1],
      ["b", 2],
      ["b", 5],
      ["c", 3],
      ["d", 4],
    ] as const;
    for (const [name, seq] of order) {
      file.save(record(name, seq));
      await file.flush();
    }
    await file.close();
    const path = join(dir, CONSUMERS_FILE);
    const good = readFileSync(path);
    const starts: number[] = [];
    for (let at = 8; at < good.length; at += 8 + good.readUInt32LE(at)) starts.push(at);
    const damaged = Uint8Array.from(good);
    damaged[starts[0] + 10] = 0xff; // a's name: not UTF-8
    damaged[starts[2] + 14] ^= 0xff; // b's newest record: its flags/seq
    damaged[starts[3] + 14] ^= 0xff; // c's only record
    writeFileSync(path, damaged);
    const repaired = repairConsumersFile(dir, { crc32: nativeCrc32 });
    expect(repaired).toMatchObject({ kept: 2, lost: ["c"], older: ["b"], unreadable: 1 });
    expect(sorted((await ConsumerFile.open(dir, options)).load())).toEqual([
      record("b", 2),
      record("d", 4),
    ]);
  });

  test("a failed write is retried by a whole rewrite: nothing lost, no damage left", async () => {
    const dir = newDir();
    const errors: string[] = [];
    const file = await ConsumerFile.open(dir, {
      ...options,
      intervalMs: 20,
      onError: (error) => errors.push(error.message),
    });
    // The file's name now holds a directory: the first append fails.
    const path = join(dir, CONSUMERS_FILE);
    rmSync(path);
    mkdirSync(path);
    file.save(record("a", 1));
    await file.flush();
    expect(errors.length).toBeGreaterThan(0);
    rmSync(path, { recursive: true });
    await Bun.sleep(60);
    file.save(record("b", 2));
    await file.close();
    expect(sorted((await ConsumerFile.open(dir, options)).load())).toEqual([
      record("a", 1),
      record("b", 2),
    ]);
  });

  test("session states: encoded when their batch is written, last wins, kept by compaction", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    let encodes = 0;
    let value = 1;
    const encode = () => {
      encodes++;
      return Uint8Array.of(value);
    };
    // Many changes before the write: one encode per batch, of the newest state.
    file.save(record("c", 5));
    for (; value < 50; value++) file.saveState("mqtt/s.1", encode);
    file.saveState("mqtt/gone", () => Uint8Array.of(7));
    await file.flush();
    expect(encodes).toBeLessThanOrEqual(2);
    file.saveState("mqtt/gone", () => null);
    file.removeState("mqtt/other");
    // A state and a consumer may share a name: two namespaces.
    file.saveState("c", () => Uint8Array.of(9, 9));
    await file.close();
    const again = await ConsumerFile.open(dir, options);
    expect(again.load()).toEqual([record("c", 5)]);
    expect([...again.loadStates()]).toEqual([
      ["mqtt/s.1", Uint8Array.of(50)],
      ["c", Uint8Array.of(9, 9)],
    ]);
    // Compaction (the file past 4 times its live bytes) keeps the states.
    const big = new Uint8Array(20_000).fill(3);
    for (let i = 0; i < 20; i++) {
      again.saveState("mqtt/big", () => big);
      await again.flush();
    }
    await again.close();
    expect(statSync(join(dir, CONSUMERS_FILE)).size).toBeLessThan(5 * 20_100);
    const third = await ConsumerFile.open(dir, options);
    expect(third.loadStates().get("mqtt/big")).toEqual(big);
    expect(third.loadStates().get("mqtt/s.1")).toEqual(Uint8Array.of(50));
    await third.close();
  });

  test("whenDurable waits for the write holding what was saved before it (fsync always)", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    const order: string[] = [];
    file.whenDurable(() => order.push("nothing pending: at once"));
    file.saveState("mqtt/s.1", () => {
      order.push("encoded");
      return Uint8Array.of(1);
    });
    file.whenDurable(() => order.push("durable"));
    expect(order).toEqual(["nothing pending: at once"]);
    await file.flush();
    expect(order).toEqual(["nothing pending: at once", "encoded", "durable"]);
    // A lazy save waits for the interval, even behind other writes (fsync always).
    file.saveState(
      "mqtt/lazy",
      () => {
        order.push("lazy encoded");
        return Uint8Array.of(2);
      },
      true,
    );
    file.save(record("c", 1));
    await Bun.sleep(20);
    expect(order.at(-1)).toBe("durable");
    await Bun.sleep(250);
    expect(order.at(-1)).toBe("lazy encoded");
    await file.close();
    expect((await ConsumerFile.open(dir, options)).loadStates().get("mqtt/lazy")).toEqual(
      Uint8Array.of(2),
    );
    const interval = await ConsumerFile.open(newDir(), { ...options, fsync: "interval" });
    interval.saveState("mqtt/s.1", () => Uint8Array.of(1));
    let called = false;
    interval.whenDurable(() => {
      called = true;
    });
    expect(called).toBe(true);
    await interval.close();
  });

  test("repair keeps the states that check and names the ones it lost", async () => {
    const dir = newDir();
    const file = await ConsumerFile.open(dir, options);
    file.save(record("a", 1));
    await file.flush();
    file.saveState("mqtt/s.1", () => Uint8Array.of(1));
    await file.flush();
    file.saveState("mqtt/s.2", () => Uint8Array.of(2));
    await file.flush();
    file.save(record("b", 2));
    await file.close();
    const path = join(dir, CONSUMERS_FILE);
    const good = readFileSync(path);
    const starts: number[] = [];
    for (let at = 8; at < good.length; at += 8 + good.readUInt32LE(at)) starts.push(at);
    const damaged = Uint8Array.from(good);
    damaged[starts[2] + 8 + 2 + 8 + 4] ^= 0xff; // s.2's state byte: its CRC fails
    writeFileSync(path, damaged);
    await expect(ConsumerFile.open(dir, options)).rejects.toThrow(`offset ${starts[2]}`);
    const repaired = repairConsumersFile(dir, { crc32: nativeCrc32 });
    expect(repaired).toMatchObject({ kept: 2, lost: [], lostStates: ["mqtt/s.2"] });
    const reopened = await ConsumerFile.open(dir, options);
    expect([...reopened.loadStates().keys()]).toEqual(["mqtt/s.1"]);
    expect(sorted(reopened.load())).toEqual([record("a", 1), record("b", 2)]);
    await reopened.close();
  });
});
