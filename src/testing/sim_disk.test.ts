import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "./fc_params.ts";
import { SimDisk, uncached } from "./sim_disk.ts";

const bytes = (...values: number[]) => new Uint8Array(values);

describe("SimDisk", () => {
  test("cachedOnly maps about half of all regions, the same ones every time, at any position", async () => {
    const share = (positions: number[], length: (i: number) => number) =>
      positions.filter((p, i) => uncached(p, length(i))).length / positions.length;
    const odd = Array.from({ length: 20_000 }, (_, i) => 2 * i + 1);
    const even = odd.map((p) => p - 1);
    const past = Array.from({ length: 20_000 }, (_, i) => 3_400_000 + 2 * i + 1);
    const huge = Array.from({ length: 20_000 }, (_, i) => 2 ** 33 + 4096 * i);
    for (const [positions, length] of [
      [odd, () => 4096],
      [even, () => 4096],
      [past, () => 4096],
      [huge, () => 1 << 20],
      [even.map(() => 0), (i: number) => i + 1],
    ] as const) {
      const s = share(positions, length);
      expect(s).toBeGreaterThan(0.45);
      expect(s).toBeLessThan(0.55);
    }
    const disk = new SimDisk({ seed: 3 });
    await disk.mkdir("d");
    const file = await disk.open("d/f", "create");
    await file.write(0, new Uint8Array(8192).fill(9));
    for (let position = 0; position < 64; position++) {
      const mapped = await file.map!(position, 100, { cachedOnly: true });
      expect(mapped === null).toBe(uncached(position, 100));
      expect(mapped === null).toBe((await file.map!(position, 100, { cachedOnly: true })) === null);
      expect([...((await file.map!(position, 100)) as Uint8Array)]).toEqual(new Array(100).fill(9));
    }
  });

  test("synced data survives a crash; unsynced data may not", async () => {
    const disk = new SimDisk({ seed: 7 });
    await disk.mkdir("d");
    const file = await disk.open("d/f", "create");
    await file.write(0, bytes(1, 2, 3));
    await file.sync();
    await disk.syncDir("d");
    await file.write(3, bytes(4, 5, 6));
    disk.crash();
    const after = disk.snapshot("d/f");
    expect(after).not.toBeNull();
    expect([...(after as Uint8Array).subarray(0, 3)]).toEqual([1, 2, 3]);
    expect((after as Uint8Array).length).toBeLessThanOrEqual(6);
    await expect(file.read(0, new Uint8Array(1))).rejects.toThrow("crash");
  });

  test("a created file whose directory was not synced can vanish", async () => {
    const seen = new Set<boolean>();
    for (let seed = 1; seed < 20; seed++) {
      const disk = new SimDisk({ seed });
      const file = await disk.open("f", "create");
      await file.write(0, bytes(1));
      await file.sync();
      disk.crash();
      seen.add(disk.snapshot("f") !== null);
    }
    expect(seen).toEqual(new Set([true, false]));
  });

  test("after a crash each file is its synced bytes plus a prefix of later writes (prefix mode)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1 << 30 }),
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 9 }), { minLength: 1, maxLength: 8 }),
        fc.nat(8),
        async (seed, writes, syncAfter) => {
          const disk = new SimDisk({ seed });
          const file = await disk.open("f", "create");
          await disk.syncDir("");
          let position = 0;
          const all: number[] = [];
          let synced = 0;
          for (let i = 0; i < writes.length; i++) {
            await file.write(position, writes[i]);
            position += writes[i].length;
            all.push(...writes[i]);
            if (i === syncAfter) {
              await file.sync();
              synced = position;
            }
          }
          disk.crash();
          const after = [...(disk.snapshot("f") as Uint8Array)];
          expect(after.length).toBeGreaterThanOrEqual(synced);
          expect(after).toEqual(all.slice(0, after.length));
        },
      ),
      fcParams(),
    );
  });

  test("a call through a view made before a crash fails instead of landing after it", async () => {
    const disk = new SimDisk();
    const view = disk.view();
    await disk.mkdir("d");
    for (const name of ["d/a", "d/b"]) await (await view.open(name, "create")).close();
    await view.syncDir("d");
    // In flight when the power fails: each would otherwise take effect in the next life.
    const calls = [
      view.remove("d/a"),
      view.rename("d/b", "d/c"),
      view.open("d/e", "create"),
      view.syncDir("d"),
    ];
    disk.crash();
    const settled = await Promise.allSettled(calls);
    expect(
      settled.map((result) => (result.status === "rejected" ? result.reason.code : "landed")),
    ).toEqual(["EBADF", "EBADF", "EBADF", "EBADF"]);
    expect(disk.paths()).toEqual(["d/a", "d/b"]);
    await expect(view.list("d")).rejects.toMatchObject({ code: "EBADF" });
    expect(await disk.view().list("d")).toEqual(["a", "b"]);
  });

  test("injected fsync failure and full disk", async () => {
    const disk = new SimDisk();
    const file = await disk.open("f", "create");
    disk.failNextSyncs(1);
    await expect(file.sync()).rejects.toMatchObject({ code: "EIO" });
    await file.sync();
    disk.capacityBytes = 4;
    await file.write(0, bytes(1, 2, 3, 4));
    await expect(file.write(4, bytes(5))).rejects.toMatchObject({ code: "ENOSPC" });
  });
});
