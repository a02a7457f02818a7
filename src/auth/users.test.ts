/**
 * Users' sign-in: a token naming no user costs the same KDF as a wrong secret, and the KDF's
 * verifications are capped and taken per source in turn (KdfGate).
 */
import { expect, test } from "bun:test";
import { KDF_VERIFICATIONS_MAX, KdfGate, Users } from "./users.ts";
import { userFromRecord } from "./users_file.ts";

function user(name: string, tokenHash: string | null) {
  return userFromRecord({
    name,
    tokenHash,
    certSubject: tokenHash === null ? `CN=${name}` : null,
    publish: { allow: [], deny: [] },
    subscribe: { allow: [], deny: [] },
    roles: [],
  });
}

/** A verifier whose answers come when the test says. */
function manualVerifier() {
  const calls: { secret: string; stored: string; answer: (ok: boolean) => void }[] = [];
  return {
    calls,
    verifier: {
      verify: (secret: string, stored: string) =>
        new Promise<boolean>((answer) => calls.push({ secret, stored, answer })),
      digest: (token: string) => `digest:${token}`,
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test("a token naming no user, or a user without a token, runs the KDF and is refused", async () => {
  const { calls, verifier } = manualVerifier();
  const users = new Users([user("orders", "fake$s"), user("certonly", null)], verifier);
  const nobody = users.signIn("nobody:guess");
  const certOnly = users.signIn("certonly:guess");
  expect(nobody).toBeInstanceOf(Promise);
  await tick();
  // Checked against a real user's hash: the same cost as a wrong secret.
  expect(calls.map((c) => [c.secret, c.stored])).toEqual([
    ["guess", "fake$s"],
    ["guess", "fake$s"],
  ]);
  for (const call of calls) call.answer(true);
  expect(await nobody).toEqual({ ok: false, reason: "wrong auth token" });
  expect(await certOnly).toEqual({ ok: false, reason: "wrong auth token" });
  // Without a name, or without any user with a token, there is nothing to find out: at once.
  expect(users.signIn("no-colon")).toEqual({ ok: false, reason: "wrong auth token" });
  expect(new Users([user("certonly", null)], verifier).signIn("x:y")).toEqual({
    ok: false,
    reason: "wrong auth token",
  });
});

test("a client certificate signs in alone; a token sent beside it must be right and name the same user", async () => {
  const { calls, verifier } = manualVerifier();
  const both = userFromRecord({
    name: "alice",
    tokenHash: "fake$a",
    certSubject: "CN=alice",
    publish: { allow: [], deny: [] },
    subscribe: { allow: [], deny: [] },
    roles: [],
  });
  const users = new Users([both, user("orders", "fake$o")], verifier);
  expect(users.signIn(null, "CN=alice")).toMatchObject({ ok: true, user: { name: "alice" } });
  const wrong = users.signIn("alice:wrong", "CN=alice");
  const other = users.signIn("orders:right", "CN=alice");
  const same = users.signIn("alice:right", "CN=alice");
  // The KDF gate runs two at a time: answer each verification as it starts.
  for (let answered = 0; answered < 3; ) {
    await tick();
    for (const call of calls.slice(answered)) call.answer(call.secret === "right");
    answered = calls.length;
  }
  expect(await wrong).toEqual({ ok: false, reason: "wrong auth token" });
  expect(await other).toEqual({
    ok: false,
    reason: 'the token signs in as "orders", the certificate as "alice"',
  });
  expect(await same).toMatchObject({ ok: true, user: { name: "alice" } });
  // Remembered tokens answer at once, and still must agree with the certificate.
  expect(users.signIn("orders:right", "CN=alice")).toEqual({
    ok: false,
    reason: 'the token signs in as "orders", the certificate as "alice"',
  });
});

test("KDF verifications are capped, and a flooding source does not starve another", async () => {
  const { calls, verifier } = manualVerifier();
  const users = new Users([user("orders", "fake$s")], verifier);
  const flood = Array.from({ length: 20 }, (_, i) => users.signIn(`orders:f${i}`, undefined, "A"));
  const mine = users.signIn("orders:s", undefined, "B");
  await tick();
  expect(calls.length).toBe(KDF_VERIFICATIONS_MAX);
  // One place frees: B's turn comes before A's third.
  calls[0].answer(false);
  await tick();
  expect(calls.map((c) => c.secret)).toEqual(["f0", "f1", "s"]);
  calls[2].answer(true);
  expect(await mine).toMatchObject({ ok: true, user: { name: "orders" } });
  for (let i = 0; i < 30 && calls.length > 0; i++) {
    for (const call of calls.splice(0)) call.answer(false);
    await tick();
  }
  expect((await Promise.all(flood)).every((s) => !s.ok)).toBe(true);
});

test("KdfGate: at most max at once, sources in turn, a failed task frees its place", async () => {
  const gate = new KdfGate(1);
  const order: string[] = [];
  const task =
    (name: string, fail = false) =>
    async () => {
      order.push(name);
      await tick();
      if (fail) throw new Error(name);
      return name;
    };
  const runs = [
    gate.run("a", task("a1", true)).catch(() => "a1 failed"),
    gate.run("a", task("a2")),
    gate.run("a", task("a3")),
    gate.run("b", task("b1")),
    gate.run("c", task("c1")),
  ];
  expect(gate.inFlight).toBe(1);
  expect(await Promise.all(runs)).toEqual(["a1 failed", "a2", "a3", "b1", "c1"]);
  expect(order).toEqual(["a1", "b1", "c1", "a2", "a3"]);
  expect(gate.inFlight).toBe(0);
});
