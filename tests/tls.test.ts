/**
 * End to end: TLS with the compiled binary and certificates openssl makes at run time
 * (tests/tls_certs.ts). `aria serve --tls-cert/--tls-key` prints tls:// and https:// and serves
 * both; `aria pub`/`aria sub` over tls:// with --ca or ARIA_CA; a real third-party client
 * (`openssl s_client`) completes the handshake and gets WELCOME for its HELLO; mutual TLS
 * (--tls-client-ca) refuses a client without a trusted certificate. Bad input: a missing
 * certificate file, a key of another certificate, an expired certificate (at the server and,
 * from a raw TLS listener, at the client), another host's certificate, an unknown CA, a plain
 * client at a TLS port: each a clear error and its exit code.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { encodeHello, FrameDecoder, FrameWriter } from "../src/protocol/mod.ts";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  ROOT,
  runAria,
  StreamText,
  startAria,
} from "./fixtures/e2e_server.ts";
import { makeTestCerts, OPENSSL, type TestCerts } from "./tls_certs.ts";

let certs: TestCerts;
let secure: AriaServer;
let mutual: AriaServer;

beforeAll(async () => {
  certs = makeTestCerts();
  const pair = ["--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")];
  secure = await startAria({ args: pair });
  mutual = await startAria({ args: [...pair, "--tls-client-ca", certs.path("ca.pem")] });
});

afterAll(async () => {
  await secure?.stop();
  await mutual?.stop();
  await cleanupAll();
  certs?.remove();
});

/** Runs the binary with `env` added to this process's environment. */
function runWithEnv(args: string[], env: Record<string, string>) {
  return runAria(args, { env: { ...(process.env as Record<string, string>), ...env } });
}

/** `url` with its port replaced by PORT, for snapshots. */
const portless = (text: string) => text.replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:PORT");

test("serve prints tls:// and https://; pub with --ca and sub with ARIA_CA go over TLS", async () => {
  expect(secure.tcpUrl).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
  expect(secure.adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  const pub = await runAria(
    ["pub", "--url", secure.tcpUrl, "--ca", certs.path("ca.pem")].concat(["tls/check", "over tls"]),
  );
  expect({ exitCode: pub.exitCode, stderr: pub.stderr }).toEqual({
    exitCode: 0,
    stderr: "acknowledged seq 1..1 (1 message)\n",
  });
  const sub = await runWithEnv(
    ["sub", "--url", secure.tcpUrl, "tls/**", "--from", "earliest", "--limit", "1"],
    { ARIA_CA: certs.path("ca.pem") },
  );
  expect(sub.exitCode).toBe(0);
  expect(JSON.parse(sub.stdout)).toMatchObject({ seq: 1, topic: "tls/check", payload: "over tls" });
  // The flag wins over the environment: ARIA_CA names a file that does not exist.
  const flagWins = await runWithEnv(
    ["pub", "--url", secure.tcpUrl, "--ca", certs.path("ca.pem"), "tls/check", "again"],
    { ARIA_CA: certs.path("missing.pem") },
  );
  expect(flagWins.exitCode).toBe(0);
  const health = await fetch(`${secure.adminUrl}/healthz`, { tls: { ca: certs.text("ca.pem") } });
  expect(health.status).toBe(200);
});

test("--admin-tls-cert/--admin-tls-key alone: the protocol stays tcp://, the admin app is HTTPS", async () => {
  const server = await startAria({
    args: [
      "--admin-tls-cert",
      certs.path("server.pem"),
      "--admin-tls-key",
      certs.path("server.key"),
    ],
  });
  try {
    expect(server.tcpUrl).toMatch(/^tcp:\/\//);
    expect(server.adminUrl).toMatch(/^https:\/\//);
    const health = await fetch(`${server.adminUrl}/healthz`, { tls: { ca: certs.text("ca.pem") } });
    expect(health.status).toBe(200);
  } finally {
    await server.stop();
  }
});

test("aria split reaches a server whose admin app is HTTPS with --ca (else ARIA_CA); without, it says why", async () => {
  const withoutCa = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => key !== "ARIA_CA"),
  ) as Record<string, string>;
  const stats = ["split", "stats", "--data-dir", secure.dataDir];
  const trusted = await runAria([...stats, "--ca", certs.path("ca.pem")], { env: withoutCa });
  expect({ exit: trusted.exitCode, stderr: trusted.stderr }).toMatchObject({ exit: 0 });
  expect(trusted.stdout).toStartWith("topic,bytes,messages\n");
  const fromEnvironment = await runAria(stats, {
    env: { ...withoutCa, ARIA_CA: certs.path("ca.pem") },
  });
  expect(fromEnvironment.exitCode).toBe(0);
  const untrusted = await runAria(stats, { env: withoutCa });
  expect(untrusted.exitCode).toBe(1);
  expect(untrusted.stderr).toContain("aria split stats:");
  expect(untrusted.stderr.toLowerCase()).toContain("certificate");
});

test("aria bench --url tls:// with --ca measures the TLS server", async () => {
  const bench = await runAria(
    ["bench", "--scenario", "publish", "--quick", "--publishers", "1"].concat([
      "--payload",
      "64",
      "--json",
      "--url",
      secure.tcpUrl,
      "--ca",
      certs.path("ca.pem"),
    ]),
  );
  expect(bench.exitCode).toBe(0);
  const row = JSON.parse(bench.stdout).scenarios[0].rows[0];
  expect(row.messagesPerSecond).toBeGreaterThan(0);
});

test("openssl s_client completes the handshake and gets WELCOME for a HELLO", async () => {
  const port = secure.tcpUrl.split(":")[2];
  const client = Bun.spawn(
    [OPENSSL, "s_client", "-connect", `127.0.0.1:${port}`, "-CAfile", certs.path("ca.pem")].concat([
      "-verify_return_error",
      "-verify_ip",
      "127.0.0.1",
      "-quiet",
    ]),
    { stdin: "pipe", stdout: "pipe", stderr: "pipe" },
  );
  const timer = setTimeout(() => client.kill("SIGKILL"), 10_000);
  try {
    const writer = new FrameWriter();
    encodeHello(writer, { version: PROTOCOL_VERSION, clientName: "s_client", authToken: null });
    client.stdin.write(writer.bytes());
    client.stdin.flush();
    const decoder = new FrameDecoder();
    const reader = client.stdout.getReader();
    let frame = null;
    while (frame === null) {
      const { value, done } = await reader.read();
      if (done) break;
      decoder.push(value);
      frame = decoder.next();
    }
    expect(frame?.kind).toBe("welcome");
  } finally {
    clearTimeout(timer);
    client.kill("SIGTERM");
    await client.exited;
  }
  // Its verification said so: depth 0 is our server certificate, verify return 1 (ok).
  expect(await new Response(client.stderr).text()).toContain("depth=0 CN = 127.0.0.1");
});

test("mutual TLS: refused without a client certificate or with an untrusted one", async () => {
  const ca = ["--ca", certs.path("ca.pem")];
  const pub = (extra: string[]) =>
    runAria(["pub", "--url", mutual.tcpUrl, ...ca, ...extra, "tls/mutual", "m"]);
  const none = await pub([]);
  const stranger = await pub(
    ["--cert", certs.path("stranger.pem")].concat(["--key", certs.path("stranger.key")]),
  );
  const alice = await pub(["--cert", certs.path("client.pem"), "--key", certs.path("client.key")]);
  expect([none.exitCode, stranger.exitCode, alice.exitCode]).toEqual([1, 1, 0]);
  expect(portless(none.stderr)).toStartWith(
    "aria pub: cannot connect to tls://127.0.0.1:PORT: connection to 127.0.0.1:PORT lost: the server requires a client certificate",
  );
  expect(portless(stranger.stderr)).toBe(
    "aria pub: cannot connect to tls://127.0.0.1:PORT: connection to 127.0.0.1:PORT lost: the server closed the connection before answering: it did not accept the client certificate\n",
  );
});

test("serve refuses bad certificate files before listening, naming the flag (exit 6 or 2)", async () => {
  const serve = async (flags: string[]) => {
    const dataDir = makeTempDir();
    const run = await runAria(
      ["serve", "--port", "0", "--admin-port", "0", "--data-dir", dataDir].concat(flags),
    );
    // The error line (the log's "starting" line may come before it).
    const said = run.stderr.split("\n").find((line) => line.startsWith("aria serve: ")) ?? "";
    return `${run.exitCode} ${said.replaceAll(certs.dir, "DIR")}`.replace(/on \S+Z;/, "on DATE;");
  };
  const p = certs.path;
  expect({
    missing: await serve(["--tls-cert", p("missing.pem"), "--tls-key", p("server.key")]),
    otherKey: await serve(["--tls-cert", p("server.pem"), "--tls-key", p("other.key")]),
    expired: await serve(["--tls-cert", p("expired.pem"), "--tls-key", p("expired.key")]),
    notPem: await serve(["--tls-cert", p("server.key"), "--tls-key", p("server.key")]),
    halfPair: await serve(["--tls-cert", p("server.pem")]),
    clientCaAlone: await serve(["--tls-client-ca", p("ca.pem")]),
    clientCaNotPem: await serve(
      ["--tls-cert", p("server.pem"), "--tls-key", p("server.key")].concat([
        "--tls-client-ca",
        p("server.key"),
      ]),
    ),
  }).toMatchInlineSnapshot(`
    {
      "clientCaAlone": "2 aria serve: --tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)",
      "clientCaNotPem": "6 aria serve: Cannot serve TLS: the client CA is not a PEM certificate (error:0900006e:PEM routines:OPENSSL_internal:NO_START_LINE); check --tls-client-ca",
      "expired": "6 aria serve: Cannot serve TLS: the certificate expired on DATE; check --tls-cert and --tls-key",
      "halfPair": "2 aria serve: --tls-cert and --tls-key go together: give both or neither",
      "missing": "6 aria serve: Cannot serve TLS: --tls-cert: cannot read "DIR/missing.pem": no such file",
      "notPem": "6 aria serve: Cannot serve TLS: the certificate is not a PEM certificate (error:0900006e:PEM routines:OPENSSL_internal:NO_START_LINE); check --tls-cert and --tls-key",
      "otherKey": "6 aria serve: Cannot serve TLS: the key does not belong to the certificate (subject CN=127.0.0.1); check --tls-cert and --tls-key",
    }
  `);
});

test("the client refuses an unknown CA, another host's certificate, an expired one (exit 1)", async () => {
  /** A raw TLS listener with `name`'s certificate: the server refuses an expired one itself. */
  const listen = (name: string) =>
    Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert: certs.text(`${name}.pem`), key: certs.text(`${name}.key`) },
      socket: { data() {} },
    });
  const pub = async (name: string, flags: string[]) => {
    const listener = listen(name);
    try {
      const url = `tls://127.0.0.1:${listener.port}`;
      const run = await runAria(["pub", "--url", url, ...flags, "tls/x", "m"]);
      return `${run.exitCode} ${portless(run.stderr.trim())}`;
    } finally {
      listener.stop(true);
    }
  };
  const ca = ["--ca", certs.path("ca.pem")];
  expect({
    unknownCa: await pub("server", []),
    wrongHost: await pub("other", ca),
    expired: await pub("expired", ca),
  }).toMatchInlineSnapshot(`
    {
      "expired": "1 aria pub: cannot connect to tls://127.0.0.1:PORT: TLS handshake with 127.0.0.1:PORT failed: the server's certificate has expired (CERT_HAS_EXPIRED)",
      "unknownCa": "1 aria pub: cannot connect to tls://127.0.0.1:PORT: TLS handshake with 127.0.0.1:PORT failed: the server's certificate is not signed by a CA this client trusts (UNABLE_TO_VERIFY_LEAF_SIGNATURE)",
      "wrongHost": "1 aria pub: cannot connect to tls://127.0.0.1:PORT: TLS handshake with 127.0.0.1:PORT failed: the server's certificate is not for "127.0.0.1" (ERR_TLS_CERT_ALTNAME_INVALID)",
    }
  `);
});

test("a plain client (with a token) at a TLS port is told to use tls://; --ca with tcp:// is a usage error", async () => {
  const plainUrl = secure.tcpUrl.replace("tls://", "tcp://");
  const plain = await runAria(["pub", "--url", plainUrl, "--auth-token", "s3cret", "tls/x", "m"]);
  expect(plain.exitCode).toBe(1);
  expect(portless(plain.stderr)).toBe(
    "aria pub: cannot connect to tcp://127.0.0.1:PORT: 127.0.0.1:PORT answered with TLS: connect with tls://127.0.0.1:PORT\n",
  );
  const usage = await runAria(["pub", "--url", plainUrl, "--ca", certs.path("ca.pem"), "t", "m"]);
  expect(usage.exitCode).toBe(2);
  expect(portless(usage.stderr.split("\n")[0])).toBe(
    "aria pub: --ca is for a tls:// URL; tcp://127.0.0.1:PORT is plain TCP",
  );
});

test("under Deno: serve over TLS (listenTls) takes pub over tls://; mutual TLS is refused at start", async () => {
  const deno = join(ROOT, "node_modules", ".bin", "deno");
  const pair = ["--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")];
  const serve = (extra: string[]) =>
    Bun.spawn(
      [deno, "run", "--allow-all", "--no-check", "main.ts", "serve", "--port", "0"].concat([
        "--admin-port",
        "0",
        "--data-dir",
        makeTempDir(),
        ...pair,
        ...extra,
      ]),
      {
        cwd: ROOT,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, NO_COLOR: "1" },
      },
    );
  const mutualRefused = serve(["--tls-client-ca", certs.path("ca.pem")]);
  const killMutual = setTimeout(() => mutualRefused.kill("SIGKILL"), 15_000);
  expect(await mutualRefused.exited).toBe(6);
  clearTimeout(killMutual);
  expect(await new Response(mutualRefused.stderr).text()).toContain(
    "Cannot serve mutual TLS under Deno",
  );
  const server = serve([]);
  const stdout = new StreamText(server.stdout);
  try {
    const deadline = Date.now() + 15_000;
    while (stdout.text.split("\n").length < 3 && Date.now() < deadline) await Bun.sleep(20);
    const [tcpUrl, adminUrl] = stdout.text.split("\n");
    expect(tcpUrl).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
    expect(adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const pub = await runAria([
      "pub",
      "--url",
      tcpUrl,
      "--ca",
      certs.path("ca.pem"),
      "deno/x",
      "m",
    ]);
    expect({ exitCode: pub.exitCode, stderr: pub.stderr }).toEqual({
      exitCode: 0,
      stderr: "acknowledged seq 1..1 (1 message)\n",
    });
    const health = await fetch(`${adminUrl}/healthz`, { tls: { ca: certs.text("ca.pem") } });
    expect(health.status).toBe(200);
  } finally {
    server.kill("SIGKILL");
    await server.exited;
  }
}, 30_000);
