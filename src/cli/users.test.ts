/**
 * `aria users` in process: add prints a token once and writes a hash that verifies it; token
 * renews it; list shows permissions; remove deletes; wrong arguments are usage errors, a missing
 * user or an existing name a failure (exit 1), and a broken file is named with line and column.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyToken } from "../runtime/mod.ts";
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
  expect((await run(["frobnicate", "--users", path])).code).toBe(2);
  expect((await run(["list", "--users", join(dir, "missing.json")])).code).toBe(1);
  const broken = join(dir, "broken.json");
  writeFileSync(broken, '{"users": [\n  {"name": }]}');
  expect((await run(["list", "--users", broken])).err).toBe(
    `aria users: ${broken}:2:12: expected a value, found "}"\n`,
  );
});
