/**
 * `aria users` in process: add prints a token once and writes a hash that verifies it; token
 * renews it; list shows permissions; remove deletes; wrong arguments are usage errors, a missing
 * user or an existing name a failure (exit 1), and a broken file is named with line and column.
 * Real processes at once (`bun main.ts users …`) all apply their changes: none is lost.
 */
import { afterAll, expect, test } from "bun:test";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTimeOf } from "../runtime/data_dir_lock.ts";
import { lockBeside, verifyToken } from "../runtime/mod.ts";
import { UsageError } from "./args.ts";
import { usersCommand } from "./users.ts";

const dir = mkdtempSync(join(tmpdir(), "aria-users-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(args: string[], env: Record<string, string> = {}) {
  let out = "";
  let err = "";
  const io = { out: (t: string) => (out += t), err: (t: string) => (err += t), env: () => env };
  try {
    const code = await usersCommand(args, io);
    return { code, out, err };
  } catch (error) {
    if (error instanceof UsageError) return { code: 2, out, err: error.message };
    throw error;
  }
}

const hashOf = (path: string, name: string): string =>
  JSON.parse(readFileSync(path, "utf8")).users.find((u: { name: string }) => u.name === name)
    .tokenHash;

test("add, list, token, remove", async () => {
  const path = join(dir, "users.json");
  const add = await run(["add", "orders", "--users", path, "--publish", "app/orders/**"]);
  expect(add.code).toBe(0);
  const token = add.out.trim();
  expect(token).toMatch(/^orders:aria_/);
  expect(add.err).toContain("shown once");
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const secret = token.slice("orders:".length);
  expect(await verifyToken(secret, hashOf(path, "orders"))).toBe(true);

  // ARIA_USERS names the file when --users does not.
  const env = { ARIA_USERS: path };
  await run(
    ["add", "ops", "--role", "admin", "--subscribe", "**", "--deny-subscribe", "x/**"],
    env,
  );
  expect((await run(["list"], env)).out).toBe(
    [
      "orders: token",
      "  publish:   app/orders/**",
      "  subscribe: nothing",
      "ops (admin): token",
      "  publish:   nothing",
      "  subscribe: ** except x/**",
      "",
    ].join("\n"),
  );

  const renewed = await run(["token", "orders"], env);
  const newSecret = renewed.out.trim().slice("orders:".length);
  expect(newSecret).not.toBe(secret);
  expect(await verifyToken(secret, hashOf(path, "orders"))).toBe(false);
  expect(await verifyToken(newSecret, hashOf(path, "orders"))).toBe(true);

  expect((await run(["remove", "ops"], env)).code).toBe(0);
  expect((await run(["list"], env)).out).not.toContain("ops");
});

test("refusals", async () => {
  const path = join(dir, "refusals.json");
  await run(["add", "a", "--users", path]);
  expect(await run(["add", "a", "--users", path])).toMatchObject({ code: 1 });
  expect((await run(["remove", "nobody", "--users", path])).err).toBe(
    `aria users: no user "nobody" in ${path}\n`,
  );
  expect((await run(["add", "b", "--users", path, "--publish", "app/#"])).err).toMatch(
    /^--publish: filter entry "app\/#": topic has wildcard character '#'/,
  );
  expect((await run(["add", "b", "--users", path, "--role", "root"])).err).toBe(
    '--role: unknown role "root" (roles: admin)',
  );
  expect((await run(["add", "b", "--users", path, "--no-token"])).err).toBe(
    "--no-token: give --cert-subject, or the user cannot sign in",
  );
  expect((await run(["add", "bad name", "--users", path])).err).toMatch(/^user name "bad name"/);
  const before = readFileSync(path, "utf8");
  const forged = ["add", "c", "--users", path, "--cert-subject", "CN=c\nroot (admin): token"];
  expect(await run(forged)).toMatchObject({
    code: 2,
    err: '"certSubject" holds a control character ("CN=c\\nroot (admin): token")',
  });
  expect((await run(["add", "c", "--users", path, "--subscribe", "a/\tb"])).code).toBe(2);
  expect(readFileSync(path, "utf8")).toBe(before);
  expect((await run(["frobnicate", "--users", path])).code).toBe(2);
  expect((await run(["list", "--users", join(dir, "missing.json")])).code).toBe(1);
  const broken = join(dir, "broken.json");
  writeFileSync(broken, '{"users": [\n  {"name": }]}');
  expect((await run(["list", "--users", broken])).err).toBe(
    `aria users: ${broken}:2:12: expected a value, found "}"\n`,
  );
});

test("changes of parallel processes all apply, none lost (the lock FILE.lock)", async () => {
  const path = join(dir, "parallel.json");
  expect((await run(["add", "victim", "--users", path, "--role", "admin"])).code).toBe(0);
  const main = join(import.meta.dir, "../../main.ts");
  const spawn = (args: string[]) =>
    Bun.spawn([process.execPath, main, "users", ...args, "--users", path], {
      stdout: "pipe",
      stderr: "pipe",
    });
  const names = Array.from({ length: 8 }, (_, i) => `u${i}`);
  const processes = [...names.map((name) => spawn(["add", name])), spawn(["remove", "victim"])];
  const results = await Promise.all(
    processes.map(async (child) => ({
      code: await child.exited,
      out: await new Response(child.stdout).text(),
      err: await new Response(child.stderr).text(),
    })),
  );
  for (const result of results) expect(result).toMatchObject({ code: 0 });
  const users = JSON.parse(readFileSync(path, "utf8")).users as { name: string }[];
  expect(users.map((user) => user.name).sort()).toEqual(names);
  for (const result of results.slice(0, names.length)) {
    const [name, secret] = result.out.trim().split(":");
    expect(await verifyToken(secret, hashOf(path, name))).toBe(true);
  }
  expect(existsSync(`${path}.lock`)).toBe(false);
  expect(readdirSync(dir).filter((file) => file.startsWith("parallel.json"))).toEqual([
    "parallel.json",
  ]);
}, 30_000);

test("a stale lock (its process gone) is taken over; a live one is waited for", async () => {
  const path = join(dir, "stale.json");
  writeFileSync(`${path}.lock`, JSON.stringify({ pid: 2 ** 31 - 2, startTime: "1" }));
  expect((await run(["add", "a", "--users", path])).code).toBe(0);
  expect(existsSync(`${path}.lock`)).toBe(false);
  // A live holder (another running process, its start time matching) is waited for, then
  // refused naming it.
  const holder = Bun.spawn(["sleep", "30"]);
  try {
    writeFileSync(
      `${path}.lock`,
      JSON.stringify({ pid: holder.pid, command: "users", startTime: startTimeOf(holder.pid) }),
    );
    const started = performance.now();
    const refused = await lockBeside(path, { waitMs: 200 });
    expect(refused).toEqual({
      ok: false,
      reason: `${path}.lock is held by pid ${holder.pid} (another aria users?)`,
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  } finally {
    holder.kill();
    rmSync(`${path}.lock`);
  }
});
