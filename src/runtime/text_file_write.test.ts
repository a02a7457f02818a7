/**
 * writeTextFileAtomic under a hostile directory: a symlink planted where the temporary file
 * would go cannot redirect the write, the result is a regular file of mode 0600 whatever was at
 * the path (a 0644 symlink included), and nothing is left beside it.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { lstat, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTextFileAtomic } from "./text_file_write.ts";

let dir = "";
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "aria-text-write-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("a symlink at the old temporary name FILE.PID.tmp is not followed", async () => {
  const path = join(dir, "users.json");
  const victim = join(dir, "victim");
  await writeFile(victim, "precious\n");
  await symlink(victim, `${path}.${process.pid}.tmp`);
  const written = await writeTextFileAtomic(path, '{"users": []}\n');
  expect(written).toEqual({ ok: true });
  expect(await readFile(victim, "utf8")).toBe("precious\n");
  const stat = await lstat(path);
  expect(stat.isFile()).toBe(true);
  expect(stat.mode & 0o777).toBe(0o600);
  expect(await readFile(path, "utf8")).toBe('{"users": []}\n');
  // Only the planted link and the two files: no temporary file is left.
  expect((await readdir(dir)).sort()).toEqual(
    ["users.json", `users.json.${process.pid}.tmp`, "victim"].sort(),
  );
});

test("a symlink at the path becomes a 0600 file; a planted 0644 file is unused", async () => {
  const path = join(dir, "users.json");
  const victim = join(dir, "victim");
  await writeFile(victim, "precious\n", { mode: 0o644 });
  await symlink(victim, path);
  const planted = `${path}.${process.pid}.tmp`;
  await writeFile(planted, "planted\n", { mode: 0o644 });
  expect(await writeTextFileAtomic(path, "new\n")).toEqual({ ok: true });
  expect(await readFile(victim, "utf8")).toBe("precious\n");
  expect(await readFile(planted, "utf8")).toBe("planted\n");
  expect(await readFile(path, "utf8")).toBe("new\n");
  const stat = await lstat(path);
  expect(stat.isFile()).toBe(true);
  expect(stat.mode & 0o777).toBe(0o600);
});

test("two writes use different temporary names, not derived from the pid", async () => {
  const path = join(dir, "f");
  // The rename fails (the path is a non-empty directory); its reason names the temporary file,
  // which is removed.
  await Bun.write(join(path, "x"), "x");
  const names = new Set<string>();
  for (let i = 0; i < 2; i++) {
    const written = await writeTextFileAtomic(path, "t");
    if (written.ok) throw new Error("expected the rename to fail");
    const name = /f\.([0-9a-f]+)\.tmp/.exec(written.reason)?.[1];
    expect(name).toMatch(/^[0-9a-f]{32}$/);
    names.add(name as string);
  }
  expect(names.size).toBe(2);
  expect(await readdir(dir)).toEqual(["f"]);
});
