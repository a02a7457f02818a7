import { expect, test } from "bun:test";
import { runCli, type CliIo } from "./mod.ts";

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = { stdout: "", stderr: "", out: (t: string) => { io.stdout += t; }, err: (t: string) => { io.stderr += t; } };
  return io;
}

test("no command: usage on stderr, exit 2; unknown command too", async () => {
  const none = capture();
  expect(await runCli([], none)).toBe(2);
  expect(none.stderr).toContain("Usage: aria <command>");
  const unknown = capture();
  expect(await runCli(["frobnicate"], unknown)).toBe(2);
  expect(unknown.stderr.split("\n")[0]).toMatchInlineSnapshot(`"aria: unknown command 'frobnicate'"`);
});

test("--help prints usage on stdout, exit 0; version", async () => {
  const help = capture();
  expect(await runCli(["--help"], help)).toBe(0);
  expect(help.stdout).toContain("Commands:");
  const version = capture();
  expect(await runCli(["version"], version)).toBe(0);
  expect(version.stdout).toMatch(/^aria \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown), (bun|deno) \d+\.\d+\.\d+\S*\)\n$/);
  const flag = capture();
  expect(await runCli(["--version"], flag)).toBe(0);
  expect(flag.stdout).toBe(version.stdout);
});
