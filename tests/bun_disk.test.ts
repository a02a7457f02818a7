/**
 * BunDisk's mapped reads (`DiskFile.map`): the bytes a read gives, the file mapped again when a
 * region passes the mapping's end, null past the end of the file, and the pages of the region
 * in the page cache when it resolves (found missing by mincore and read in), or, with
 * `cachedOnly`, null unless they all are.
 */
import { afterAll, expect, test } from "bun:test";
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { BunDisk, missingRuns } from "../src/runtime/bun_disk.ts";
import { tempDir } from "./fixtures/store_helpers.ts";

const dir = tempDir("aria-bun-disk-");
afterAll(dir.remove);

function bytesOf(length: number, salt: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + salt + (i >>> 12)) & 255;
  return bytes;
}

/** Evicts the clean pages of `path` from the page cache (posix_fadvise DONTNEED through libc). */
function evict(path: string): void {
  const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
  const libc = dlopen("libc.so.6", {
    posix_fadvise: {
      args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.i32],
      returns: FFIType.i32,
    },
  });
  const fd = openSync(path, "r");
  try {
    expect(libc.symbols.posix_fadvise(fd, 0, 0, 4 /* POSIX_FADV_DONTNEED */)).toBe(0);
  } finally {
    closeSync(fd);
    libc.close();
  }
}

test("map gives the bytes a read gives, of a grown file too, and is null past the end", async () => {
  const disk = new BunDisk(dir.path);
  const file = await disk.open("a.bin", "create");
  const first = bytesOf(300_000, 1);
  await file.write(0, first);
  for (const [position, length] of [
    [0, 1],
    [4095, 2],
    [12_345, 100_000],
    [299_999, 1],
    [0, 300_000],
  ]) {
    const mapped = await file.map?.(position, length);
    const read = new Uint8Array(length);
    expect(await file.read(position, read)).toBe(length);
    expect(mapped).toEqual(read);
  }
  expect(await file.map?.(299_000, 1001)).toBeNull();
  const more = bytesOf(50_000, 2);
  await file.write(300_000, more);
  expect(await file.map?.(299_990, 20)).toEqual(
    new Uint8Array([...first.subarray(299_990), ...more.subarray(0, 10)]),
  );
  await file.close();
});

test("a mapped region's pages are in the page cache when map resolves: the ones missing are read in", async () => {
  const path = join(dir.path, "b.bin");
  const content = bytesOf(4 * 1024 * 1024 + 777, 3);
  const fd = openSync(path, "w");
  writeSync(fd, content);
  fsyncSync(fd); // clean pages: evictable
  closeSync(fd);
  evict(path);
  const whole = Bun.mmap(path, { shared: false });
  // The file's pages left the page cache (this needs a temp directory on a disk, not tmpfs).
  expect(missingRuns(whole).length).toBeGreaterThan(0);
  const disk = new BunDisk(dir.path);
  const file = await disk.open("b.bin", "read");
  const [position, length] = [1_000_001, 2_500_000];
  // At an offset inside a page: the runs are offsets into the view, clamped to it.
  expect(missingRuns(whole.subarray(position, position + length))).toEqual([0, length]);
  const mapped = await file.map?.(position, length);
  expect(missingRuns(whole.subarray(position, position + length))).toEqual([]);
  expect(missingRuns(mapped as Uint8Array)).toEqual([]);
  expect(mapped).toEqual(content.subarray(position, position + length));
  // Around the region the pages are still missing before it (read-ahead never reads backwards),
  // and after it unless the kernel read ahead: runs of whole pages, in order.
  const around = missingRuns(whole);
  const page = 4096;
  expect(around.slice(0, 2)).toEqual([0, Math.floor(position / page) * page]);
  if (around.length > 2) {
    expect(around.length).toBe(4);
    expect(around[2]).toBeGreaterThanOrEqual(Math.ceil((position + length) / page) * page);
    expect(around[3]).toBe(whole.length);
  }
  await file.close();
});

test("map with cachedOnly is null while any page of the region is missing, reading nothing, and the mapping once all of them are cached", async () => {
  const path = join(dir.path, "c.bin");
  const content = bytesOf(2 * 1024 * 1024, 4);
  const fd = openSync(path, "w");
  writeSync(fd, content);
  fsyncSync(fd);
  closeSync(fd);
  evict(path);
  const whole = Bun.mmap(path, { shared: false });
  expect(missingRuns(whole)).toEqual([0, whole.length]);
  const disk = new BunDisk(dir.path);
  const file = await disk.open("c.bin", "read");
  const [position, length] = [100_000, 1_500_000];
  expect(await file.map?.(position, length, { cachedOnly: true })).toBeNull();
  // Nothing was read in for it: the file's pages are all still missing.
  expect(missingRuns(whole)).toEqual([0, whole.length]);
  // A read of part of the region (without read-ahead) brings only that part in: still null.
  const random = await disk.open("c.bin", "read", { random: true });
  expect(await random.read(position, new Uint8Array(8192))).toBe(8192);
  await random.close();
  expect(missingRuns(whole).length).toBe(4);
  expect(await file.map?.(position, length, { cachedOnly: true })).toBeNull();
  expect(await file.map?.(position, length)).toEqual(content.subarray(position, position + length));
  expect(await file.map?.(position, length, { cachedOnly: true })).toEqual(
    content.subarray(position, position + length),
  );
  await file.close();
});

test("a handle opened with the direct hint writes whole blocks past the page cache (or plainly where the file system refuses), and the bytes read back", async () => {
  const disk = new BunDisk(dir.path);
  const file = await disk.open("direct.spare", "create", { direct: true });
  const zeros = new Uint8Array(256 * 1024);
  await file.write(0, zeros.subarray(0, 64 * 1024));
  await file.write(64 * 1024, zeros.subarray(0, 128 * 1024));
  expect(await file.size()).toBe(192 * 1024);
  await file.close();
  const again = await disk.open("direct.spare", "read");
  const into = new Uint8Array(192 * 1024).fill(1);
  expect(await again.read(0, into)).toBe(into.length);
  expect(into.every((byte) => byte === 0)).toBe(true);
  await again.close();
});
