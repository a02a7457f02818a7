/**
 * End to end: users and topic permissions with the compiled binary. `aria users add` prints a
 * token once; `aria serve --users FILE` signs clients in with it (`aria pub --auth-token`, `aria
 * sub` with ARIA_URL and ARIA_AUTH_TOKEN); a publish or subscription outside the user's
 * permissions is refused naming the topic or entry; a wrong token is refused after a growing
 * delay and counted in /metrics, which wants an admin user's token; parallel guesses from one
 * address (a loopback address of their own, Linux) are verified one per penalty step; SIGHUP
 * reloads the file without dropping a connection, and a broken file keeps the users loaded
 * before. A broken file
 * at start is exit 7 with its line and column. Over mutual TLS a certificate's subject signs in
 * as the user that names it, without a token.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { encodeFrame, FrameDecoder, FrameWriter } from "../src/protocol/mod.ts";
import {
  type AriaServer,
  cleanupAll,
  ensureBinary,
  makeTempDir,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";
import { makeTestCerts } from "./tls_certs.ts";

let dir: string;
let usersFile: string;
let server: AriaServer;
let ordersToken: string;
let opsToken: string;

/** Runs the binary with `env` added to this process's environment; its time in ms too. */
async function runWithEnv(args: string[], env: Record<string, string>) {
  const started = performance.now();
  const run = await runAria(args, { env: { ...(process.env as Record<string, string>), ...env } });
  return { ...run, elapsedMs: performance.now() - started };
}

/** Waits until the server's stderr matches `pattern` (at most 5 s). */
async function stderrMatches(pattern: RegExp): Promise<string> {
  const deadline = Date.now() + 5000;
  while (!pattern.test(server.stderr())) {
    if (Date.now() > deadline)
      throw new Error(`stderr never matched ${pattern}:\n${server.stderr()}`);
    await Bun.sleep(10);
  }
  return server.stderr();
}

beforeAll(async () => {
  dir = makeTempDir("aria-users-");
  usersFile = join(dir, "users.json");
  const add = await runAria([
    "users",
    "add",
    "orders",
    "--users",
    usersFile,
    "--publish",
    "app/orders/**",
    "--subscribe",
    "app/orders/**",
  ]);
  expect(add.exitCode).toBe(0);
  ordersToken = add.stdout.trim();
  const ops = await runAria(["users", "add", "ops", "--users", usersFile, "--role", "admin"]);
  opsToken = ops.stdout.trim();
  server = await startAria({ args: ["--users", usersFile] });
});

afterAll(async () => {
  await server?.stop();
  await cleanupAll();
});

test("aria users add prints a token once; the file keeps only its hash", () => {
  expect(ordersToken).toMatch(/^orders:aria_[A-Za-z0-9_-]{43}$/);
  const text = readFileSync(usersFile, "utf8");
  expect(text).not.toContain(ordersToken.slice("orders:".length));
  expect(text).toContain('"tokenHash": "scrypt$16384$8$1$');
});

test("the token signs in: pub with --auth-token, sub with ARIA_URL and ARIA_AUTH_TOKEN", async () => {
  const pub = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/orders/eu",
    "one",
  ]);
  expect({ exitCode: pub.exitCode, stderr: pub.stderr }).toEqual({
    exitCode: 0,
    stderr: "acknowledged seq 1..1 (1 message)\n",
  });
  const sub = await runWithEnv(["sub", "app/orders/**", "--from", "earliest", "--limit", "1"], {
    ARIA_URL: server.tcpUrl,
    ARIA_AUTH_TOKEN: ordersToken,
  });
  expect(sub.exitCode).toBe(0);
  expect(JSON.parse(sub.stdout)).toMatchObject({ seq: 1, topic: "app/orders/eu", payload: "one" });
  // Flags win over the environment: a wrong variable does not matter beside a right flag.
  const flagWins = await runWithEnv(
    ["pub", "--url", server.tcpUrl, "--auth-token", ordersToken, "app/orders/us", "two"],
    { ARIA_URL: "tcp://127.0.0.1:1", ARIA_AUTH_TOKEN: "orders:wrong" },
  );
  expect(flagWins.exitCode).toBe(0);
});

test("a publish or subscription outside the permissions is refused, naming the topic", async () => {
  const pub = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/payments/eu",
    "x",
  ]);
  expect(pub.exitCode).toBe(1);
  expect(pub.stderr).toContain('user "orders" may not publish to "app/payments/eu"');
  const sub = await runAria([
    "sub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/**",
    "--limit",
    "1",
  ]);
  expect(sub.exitCode).toBe(1);
  expect(sub.stderr).toContain('user "orders" may not subscribe to "app/**"');
});

test("a wrong token is refused after a growing delay, logged and counted in /metrics", async () => {
  const tries = [];
  for (let i = 0; i < 3; i++) {
    tries.push(
      await runAria([
        "pub",
        "--url",
        server.tcpUrl,
        "--auth-token",
        "orders:wrong",
        "app/orders/eu",
        "x",
      ]),
    );
  }
  for (const run of tries) {
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain("wrong auth token");
  }
  const log = await stderrMatches(/errorAfterMs=400/);
  // Each connection's end is logged with who it was, from where and why.
  expect(log).toMatch(
    / INFO connection closed session=\d+ address=127\.0\.0\.1 reason="ARIA_ERR_AUTH_FAILED: wrong auth token"\n/,
  );
  expect(log).toMatch(
    / INFO connection closed session=\d+ user=orders client=\S+ address=127\.0\.0\.1 reason="closed by the client"\n/,
  );
  expect(log).toMatch(
    / WARN sign-in failed session=\d+ address=127\.0\.0\.1 reason="wrong auth token" errorAfterMs=100\n/,
  );
  expect(log).toContain("errorAfterMs=200\n");
  // The admin app wants an admin user's token: none, or a user without the role, is a 401.
  expect((await fetch(`${server.adminUrl}/metrics`)).status).toBe(401);
  const notAdmin = { headers: { Authorization: `Bearer ${ordersToken}` } };
  expect((await fetch(`${server.adminUrl}/metrics`, notAdmin)).status).toBe(401);
  const metrics = await fetch(`${server.adminUrl}/metrics`, {
    headers: { Authorization: `Bearer ${opsToken}` },
  });
  expect(metrics.status).toBe(200);
  // Three refused HELLOs and the bearer token without the admin role.
  expect(await metrics.text()).toContain("\naria_auth_failures_total 4\n");
  expect(server.stderr()).toContain(
    ' WARN admin app refused a bearer token address=127.0.0.1 reason="user \\"orders\\" does not have the admin role"',
  );
});

test("the delay grows: a client that guesses waits longer each time", async () => {
  // Failures 4 and 5 from this address wait 800 and 1600 ms before their ERROR.
  const fourth = await runWithEnv(["pub", "--url", server.tcpUrl, "app/orders/eu", "x"], {
    ARIA_AUTH_TOKEN: "orders:wrong",
  });
  const fifth = await runWithEnv(["pub", "--url", server.tcpUrl, "app/orders/eu", "x"], {
    ARIA_AUTH_TOKEN: "orders:wrong",
  });
  expect([fourth.exitCode, fifth.exitCode]).toEqual([1, 1]);
  expect(fourth.elapsedMs).toBeGreaterThan(800);
  expect(fifth.elapsedMs).toBeGreaterThan(1600);
}, 15_000);

test("SIGHUP reloads the users without dropping connections; a broken file keeps the old ones", async () => {
  // A subscriber connected before the reload: it must still get what is published after.
  const sub = Bun.spawn(
    [await ensureBinary(), "sub", "--url", server.tcpUrl, "app/orders/**", "--limit", "1"],
    {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ARIA_AUTH_TOKEN: ordersToken },
    },
  );
  const deadline = Date.now() + 5000;
  const connections = async () => {
    const stats = await fetch(`${server.adminUrl}/api/stats`, {
      headers: { Authorization: `Bearer ${opsToken}` },
    });
    return ((await stats.json()) as { broker: { connections: number } }).broker.connections;
  };
  while ((await connections()) < 1 && Date.now() < deadline) await Bun.sleep(10);
  const denied = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/extra/x",
    "x",
  ]);
  expect(denied.exitCode).toBe(1);
  const file = JSON.parse(readFileSync(usersFile, "utf8"));
  file.users[0].publish.allow.push("app/extra/**");
  writeFileSync(usersFile, JSON.stringify(file));
  process.kill(server.pid, "SIGHUP");
  await stderrMatches(/users reloaded from .*users\.json: 2 users/);
  const allowed = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/extra/x",
    "x",
  ]);
  expect(allowed.exitCode).toBe(0);
  const live = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/orders/live",
    "after",
  ]);
  expect(live.exitCode).toBe(0);
  const [subOut, subErr, subExit] = await Promise.all([
    new Response(sub.stdout).text(),
    new Response(sub.stderr).text(),
    sub.exited,
  ]);
  expect(subExit).toBe(0);
  expect(JSON.parse(subOut)).toMatchObject({ topic: "app/orders/live", payload: "after" });
  expect(subErr).not.toContain("lost");

  // A broken file: the reload says where, and the users loaded before still sign in.
  writeFileSync(usersFile, '{"users": [\n  {"name": "orders",, }]}');
  process.kill(server.pid, "SIGHUP");
  const log = await stderrMatches(/users not reloaded/);
  expect(log).toContain(
    `ERROR users not reloaded: ${usersFile}:2:21: expected a key in quotes, found ","; keeping the 2 users loaded before`,
  );
  const still = await runAria([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    ordersToken,
    "app/extra/y",
    "y",
  ]);
  expect(still.exitCode).toBe(0);
});

/** HELLO with `token` over a connection from `localAddress`; the first frame's kind, and its ms. */
function helloFrom(token: string, localAddress: string): Promise<{ kind: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (kind: string) => {
      resolve({ kind, ms: performance.now() - started });
      socket.destroy();
    };
    const socket = connect({
      host: "127.0.0.1",
      port: Number(new URL(server.tcpUrl).port),
      localAddress,
    });
    const decoder = new FrameDecoder();
    socket.on("connect", () => {
      const writer = new FrameWriter();
      encodeFrame(writer, {
        kind: "hello",
        version: PROTOCOL_VERSION,
        clientName: "t",
        authToken: token,
      });
      socket.write(writer.bytes().slice());
    });
    socket.on("data", (chunk: Buffer) => {
      decoder.push(new Uint8Array(chunk));
      const frame = decoder.next();
      if (frame !== null) done(frame.kind);
    });
    socket.on("error", () => done("error"));
    socket.on("close", () => done("closed"));
  });
}

test("parallel guesses from one address are verified one per penalty step; others sign in meanwhile", async () => {
  const failures = async () => {
    const response = await fetch(`${server.adminUrl}/metrics`, {
      headers: { Authorization: `Bearer ${opsToken}` },
    });
    return Number(/\naria_auth_failures_total (\d+)\n/.exec(await response.text())?.[1]);
  };
  const before = await failures();
  // Addresses of their own (the other tests' penalties are 127.0.0.1's).
  const guesses = Array.from({ length: 40 }, (_, i) => helloFrom(`orders:guess${i}`, "127.0.9.1"));
  await Bun.sleep(100);
  // Another address's token, verified with the KDF (a name nobody has costs one too) meanwhile.
  const other = await helloFrom("nobody:guess", "127.0.9.2");
  expect(other.kind).toBe("error");
  await Bun.sleep(1000);
  // 100 + 200 + 400 ms of penalty: at most 4 of the 40 verified in 1.1 s (all 40 before the fix),
  // and the other address's one.
  expect((await failures()) - before).toBeLessThanOrEqual(5);
  // The other address was not queued behind this one's guesses (its KDF, then its 100 ms delay).
  expect(other.ms).toBeLessThan(1000);
  // The guesses end with the server (afterAll).
  expect(guesses.length).toBe(40);
}, 15_000);

test("a broken users file at start is exit 7 with its line and column", async () => {
  const broken = join(dir, "broken.json");
  writeFileSync(broken, '{"users": [{"name": "a", "tokenHash": "x"}]}');
  const run = await runAria([
    "serve",
    "--port",
    "0",
    "--admin-port",
    "0",
    "--data-dir",
    join(dir, "d2"),
    "--users",
    broken,
  ]);
  expect(run.exitCode).toBe(7);
  expect(run.stderr).toContain(
    `Cannot read the users file: ${broken}:1:39: "tokenHash": not a token hash`,
  );
});

test("mutual TLS: the client certificate's subject signs in as its user, held to its permissions", async () => {
  const certs = makeTestCerts();
  const file = join(dir, "cert-users.json");
  const add = await runAria([
    "users",
    "add",
    "alice",
    "--users",
    file,
    "--no-token",
    "--cert-subject",
    "CN=alice,O=Example",
    "--publish",
    "certs/**",
  ]);
  expect(add.exitCode).toBe(0);
  const secure = await startAria({
    args: [
      "--tls-cert",
      certs.path("server.pem"),
      "--tls-key",
      certs.path("server.key"),
      "--tls-client-ca",
      certs.path("ca.pem"),
      "--users",
      file,
    ],
  });
  try {
    const tls = ["--ca", certs.path("ca.pem"), "--cert", certs.path("client.pem")];
    const key = ["--key", certs.path("client.key")];
    const allowed = await runAria(["pub", "--url", secure.tcpUrl, ...tls, ...key, "certs/a", "m"]);
    expect({ exitCode: allowed.exitCode, stderr: allowed.stderr }).toEqual({
      exitCode: 0,
      stderr: "acknowledged seq 1..1 (1 message)\n",
    });
    const denied = await runAria(["pub", "--url", secure.tcpUrl, ...tls, ...key, "other/a", "m"]);
    expect(denied.exitCode).toBe(1);
    expect(denied.stderr).toContain('user "alice" may not publish to "other/a"');
  } finally {
    await secure.stop();
    certs.remove();
  }
});
