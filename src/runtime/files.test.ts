import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readBytesFile, readTextFile } from "./files.ts";

const dir = mkdtempSync(join(tmpdir(), "aria-files-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a stream that goes on (/dev/zero: its size says 0) is cut at the limit, not read whole", async () => {
  const started = performance.now();
  expect(await readTextFile("/dev/zero", { bytesMax: 1024 * 1024 })).toEqual({
    ok: false,
    reason: 'cannot read "/dev/zero": it goes on, more than the limit of 1048576',
  });
  expect(performance.now() - started).toBeLessThan(2_000);
});

test("a file of exactly the limit is read; one byte more is refused before reading", async () => {
  const exact = join(dir, "exact");
  writeFileSync(exact, "x".repeat(100));
  expect(await readTextFile(exact, { bytesMax: 100 })).toEqual({ ok: true, text: "x".repeat(100) });
  const bytes = await readBytesFile(exact, { bytesMax: 100 });
  expect(bytes.ok && bytes.bytes.length).toBe(100);
  writeFileSync(exact, "x".repeat(101));
  expect(await readTextFile(exact, { bytesMax: 100 })).toEqual({
    ok: false,
    reason: `cannot read ${JSON.stringify(exact)}: 101 bytes, more than the limit of 100`,
  });
  expect(await readTextFile(dir, { bytesMax: 100 })).toMatchObject({ ok: false });
  expect(await readTextFile(join(dir, "none"), { bytesMax: 100 })).toEqual({
    ok: false,
    reason: `cannot read ${JSON.stringify(join(dir, "none"))}: no such file`,
  });
});
