import { describe, expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import type { Disk, OpenHints } from "./disk.ts";
import { FileCache } from "./file_cache.ts";

describe("FileCache", () => {
  test("a read with the random hint gets a handle of its own, opened with the hint; drop closes both", async () => {
    const sim = new SimDisk({ seed: 1 });
    const file = await sim.open("a.pak", "create");
    await file.write(0, new Uint8Array([1, 2, 3]));
    await file.close();
    const opens: (OpenHints | undefined)[] = [];
    let closes = 0;
    const inner = sim.view();
    const disk: Disk = {
      ...inner,
      open: async (path, mode, hints) => {
        opens.push(hints);
        const opened = await inner.open(path, mode);
        return {
          ...opened,
          path: opened.path,
          read: (p, into) => opened.read(p, into),
          close: () => (closes++, opened.close()),
        };
      },
    };
    const cache = new FileCache(disk, 4);
    const into = new Uint8Array(3);
    await cache.with("a.pak", (f) => f.read(0, into));
    await cache.with("a.pak", (f) => f.read(0, into));
    expect(opens).toEqual([undefined]);
    await cache.with("a.pak", (f) => f.read(0, into), { random: true });
    await cache.with("a.pak", (f) => f.read(0, into), { random: true });
    expect(opens).toEqual([undefined, { random: true }]);
    expect(cache.size).toBe(2);
    await cache.drop("a.pak");
    expect(cache.size).toBe(0);
    expect(closes).toBe(2);
  });

  test("a file renamed while cached keeps its handle under the new path, and the old path reaches it until the new one is dropped", async () => {
    const sim = new SimDisk({ seed: 2 });
    await sim.mkdir("j");
    const file = await sim.open("j/1.next", "create");
    await file.write(0, new Uint8Array([9, 8, 7]));
    await file.close();
    const cache = new FileCache(sim.view(), 4);
    const into = new Uint8Array(3);
    await cache.with("j/1.next", (f) => f.read(0, into));
    expect(cache.opens).toBe(1);
    await sim.rename("j/1.next", "j/1.wal");
    cache.renamed("j/1.next", "j/1.wal");
    // The old path (a reader that took it before the rename) and the new one: the same handle.
    await cache.with("j/1.next", (f) => f.write(3, new Uint8Array([6])));
    expect(await cache.with("j/1.wal", (f) => f.read(0, new Uint8Array(4)))).toBe(4);
    expect(cache.opens).toBe(1);
    expect(cache.size).toBe(1);
    await cache.drop("j/1.wal");
    expect(cache.size).toBe(0);
    // Dropped: the alias went with it, so the old path is a path again (and no such file).
    await expect(cache.with("j/1.next", (f) => f.size())).rejects.toThrow("no such file");
    expect(await cache.with("j/1.wal", (f) => f.size())).toBe(4);
  });
});
