/**
 * The users file on disk: read with its errors located, reloaded into the same Users (a broken
 * file keeps the users loaded before), and the admin app's check (an admin user's token, or the
 * admin token; a refusal is told, with why).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatUsersFile } from "../auth/mod.ts";
import { hashToken } from "../runtime/mod.ts";
import { adminCredentialOf, readUsersFile, reloadUsers, usersOf } from "./users_source.ts";

const dir = mkdtempSync(join(tmpdir(), "aria-users-source-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const record = (name: string, secret: string, roles: "admin"[] = []) => ({
  name,
  tokenHash: hashToken(secret),
  certSubject: null,
  publish: { allow: [], deny: [] },
  subscribe: { allow: [], deny: [] },
  roles,
});

test("a reload replaces the users; a broken file keeps the ones loaded before", async () => {
  const path = join(dir, "users.json");
  writeFileSync(path, formatUsersFile([record("a", "sa"), record("b", "sb")]));
  const read = await readUsersFile(path);
  if (!read.ok) throw new Error(read.error);
  const users = usersOf(read.users);
  writeFileSync(path, formatUsersFile([record("a", "sa")]));
  expect(await reloadUsers(path, users)).toEqual({
    ok: true,
    message: `users reloaded from ${path}: 1 users`,
  });
  expect(users.user("b")).toBeUndefined();
  writeFileSync(path, '{"users": [\n  {"name": "a"}]}');
  expect(await reloadUsers(path, users)).toEqual({
    ok: false,
    message: `users not reloaded: ${path}:2:3: user "a" needs a "tokenHash" or a "certSubject" to sign in with; keeping the 1 users loaded before`,
  });
  expect(users.user("a")).toBeDefined();
  expect(await readUsersFile(join(dir, "missing.json"))).toMatchObject({ ok: false });
});

test("the admin app takes an admin user's token or the admin token, and says why it refused", async () => {
  const users = usersOf([]);
  const path = join(dir, "admins.json");
  writeFileSync(path, formatUsersFile([record("ops", "so", ["admin"]), record("dev", "sd")]));
  await reloadUsers(path, users);
  const refused: string[] = [];
  const check = adminCredentialOf(users, "lock-token", (reason) => refused.push(reason));
  if (typeof check === "string") throw new Error("a check, not a token");
  expect(await check("ops:so")).toBe(true);
  expect(await check("lock-token")).toBe(true);
  expect(await check("dev:sd")).toBe(false);
  expect(await check("ops:wrong")).toBe(false);
  expect(refused).toEqual(['user "dev" does not have the admin role', "wrong auth token"]);
});

test("a wrong token naming no user takes as long as one naming a user (real scrypt)", async () => {
  const users = usersOf([]);
  const path = join(dir, "timing.json");
  writeFileSync(path, formatUsersFile([record("ops", "so")]));
  await reloadUsers(path, users);
  const timeOf = async (token: string) => {
    const started = performance.now();
    const signIn = await users.signIn(token);
    expect(signIn.ok).toBe(false);
    return performance.now() - started;
  };
  const known: number[] = [];
  const unknown: number[] = [];
  // Alternated, each token new (nothing remembered), medians compared.
  for (let i = 0; i < 5; i++) {
    known.push(await timeOf(`ops:wrong${i}`));
    unknown.push(await timeOf(`nobody${i}:wrong`));
  }
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[2];
  // Without the decoy KDF the unknown name answers in microseconds (ratio near 0).
  expect(median(unknown) / median(known)).toBeGreaterThan(0.5);
});

test("a flood of admin bearer tokens leaves a place for a protocol sign-in's KDF", async () => {
  const users = usersOf([]);
  const path = join(dir, "flood.json");
  writeFileSync(path, formatUsersFile([record("ops", "so", ["admin"]), record("app", "sa")]));
  await reloadUsers(path, users);
  const check = adminCredentialOf(users, undefined);
  if (typeof check === "string") throw new Error("a check, not a token");
  let floodDone = 0;
  const flood = Array.from({ length: 12 }, (_, i) =>
    Promise.resolve(check(`ops:wrong${i}`)).then(() => floodDone++),
  );
  const signIn = await users.signIn("app:sa", undefined, "10.0.0.9");
  expect(signIn.ok).toBe(true);
  // Its KDF took the first place freed: after the admin app's first two (the gate's places) and
  // beside a third (the other place), which may end first; never behind all twelve.
  expect(floodDone).toBeLessThanOrEqual(3);
  await Promise.all(flood);
});
