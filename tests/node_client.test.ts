/**
 * The client on Node (issue 30): the npm package packages/client, built (scripts/build_client.ts),
 * packed with `npm pack` and installed from its tarball into a fresh Node project with
 * `npm install --offline` (it has no dependencies), then run by the machine's `node` (≥ 20):
 *
 * - the package: ESM with declarations a TypeScript project type-checks against, engines node ≥ 20;
 * - the Node dialer against local node:net / node:tls servers (tests/fixtures/node_client/
 *   dialer.mjs): write/drain semantics, pause as TCP back-pressure, close once, TLS verification;
 * - publish and subscribe from seq 1 against `aria serve`, plain and over TLS;
 * - a reconnect across a server restart (same data dir and port) with no gap or duplicate.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  cleanupAll,
  makeTempDir,
  ROOT,
  StreamText,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";
import { makeTestCerts, type TestCerts } from "./tls_certs.ts";

const FIXTURES = join(ROOT, "tests", "fixtures", "node_client");
const PACKAGE_DIR = join(ROOT, "packages", "client");

let certs: TestCerts;
/** The temp Node project the package is installed into. */
let project: string;
/** What `npm pack --json` said of the tarball. */
let packed: { filename: string; files: { path: string }[] };

/** Runs `command` in `cwd`; throws with its output when it fails. */
async function run(command: string[], cwd: string, env: Record<string, string> = {}) {
  const child = Bun.spawn(command, {
    cwd,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  const [exitCode, stdout, stderr] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  if (exitCode !== 0)
    throw new Error(`${command.join(" ")} failed (exit ${exitCode}):\n${stdout}\n${stderr}`);
  return { stdout, stderr };
}

beforeAll(async () => {
  certs = makeTestCerts();
  await run([process.execPath, join(ROOT, "scripts", "build_client.ts")], ROOT);
  const packDir = makeTempDir("aria-node-pack-");
  const pack = await run(["npm", "pack", "--json", "--pack-destination", packDir], PACKAGE_DIR);
  packed = JSON.parse(pack.stdout)[0];
  project = makeTempDir("aria-node-project-");
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "node-consumer", private: true, type: "module" }),
  );
  await run(
    ["npm", "install", join(packDir, packed.filename), "--offline", "--no-audit", "--no-fund"],
    project,
  );
  for (const name of readdirSync(FIXTURES)) copyFileSync(join(FIXTURES, name), join(project, name));
}, 120_000);

afterAll(async () => {
  await cleanupAll();
  certs?.remove();
});

/** Starts `node args` in the project; its stdout and stderr grow as it prints. */
function startNode(args: string[], env: Record<string, string> = {}) {
  const child = Bun.spawn(["node", ...args], {
    cwd: project,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  return { child, stdout: new StreamText(child.stdout), stderr: new StreamText(child.stderr) };
}

/** Runs `node args` in the project to its end: exit code, stdout, stderr (printed on a failure
 * unless `failureExpected`). */
async function node(args: string[], env: Record<string, string> = {}, failureExpected = false) {
  const { child, stdout, stderr } = startNode(args, env);
  const exitCode = await child.exited;
  await Promise.all([stdout.done, stderr.done]);
  if (exitCode !== 0 && !failureExpected) console.error(stdout.text, stderr.text);
  return { exitCode, stdout: stdout.text, stderr: stderr.text };
}

test("the package: ESM with declarations, engines node >= 20, no dependencies, installs offline", async () => {
  const version = (await run(["node", "--version"], project)).stdout.trim();
  expect(Number(/^v(\d+)\./.exec(version)?.[1])).toBeGreaterThanOrEqual(20);
  const files = packed.files.map((file) => file.path).sort();
  expect(files).toContain("dist/index.js");
  expect(files).toContain("dist/index.d.ts");
  expect(files).toContain("dist/types/src/client/client.d.ts");
  expect(files).toContain("README.md");
  expect(files.filter((path) => !/^(dist\/|package\.json$|README\.md$)/.test(path))).toEqual([]);
  const installed = JSON.parse(
    readFileSync(join(project, "node_modules", "@aria", "client", "package.json"), "utf8"),
  );
  expect(installed.engines).toEqual({ node: ">=20" });
  expect(installed.dependencies).toBeUndefined();
  expect(installed.exports["."]).toEqual({
    types: "./dist/index.d.ts",
    import: "./dist/index.js",
  });
  // A TypeScript project (NodeNext resolution) type-checks against the declarations; its
  // expected error (a seq read as a string) fails the check if they resolved to `any`.
  writeFileSync(
    join(project, "consumer.ts"),
    [
      'import { connect, AriaError, type Message } from "@aria/client";',
      'const client = await connect("tls://127.0.0.1:4222", { tls: { ca: "PEM" } });',
      'const seq: number = await client.publish("a/b", new Uint8Array([1]));',
      'for await (const m of client.subscribe("a/**", { from: seq })) {',
      "  const message: Message = m;",
      "  // @ts-expect-error: a seq is a number",
      "  const wrong: string = message.seq;",
      "  console.log(wrong);",
      "}",
      "console.log(AriaError);",
    ].join("\n"),
  );
  await run(
    [join(ROOT, "node_modules", ".bin", "tsc"), "--noEmit", "--skipLibCheck", "--strict"]
      .concat(["--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022"])
      .concat([
        "--types",
        "node",
        "--typeRoots",
        join(ROOT, "node_modules", "@types"),
        "consumer.ts",
      ]),
    project,
  );
}, 60_000);

test("the Node dialer: write/drain, pause, close once, refused connect, TLS verification", async () => {
  // NODE_TLS_REJECT_UNAUTHORIZED=0 must not turn verification off for the client.
  const result = await node(["dialer.mjs", certs.dir], { NODE_TLS_REJECT_UNAUTHORIZED: "0" });
  expect(result.stdout).toContain("ok write-drain");
  expect(result.stdout).toContain("ok pause-back-pressure");
  expect(result.stdout).toContain("ok refused-rejects-only");
  expect(result.stdout).toContain("ok tls-expired");
  expect(result.stdout).toContain("ok tls-wrong-host");
  expect(result.stdout).toContain("ok tls-mutual");
  expect(result.stdout).toContain("done");
  // No SNI with an IP address (node warns DEP0123 when asked to).
  expect(result.stderr).not.toContain("DeprecationWarning");
  expect(result.exitCode).toBe(0);
}, 60_000);

test("under Node: publish 2,000 messages, subscribe from seq 1, every one in order", async () => {
  const server = await startAria();
  const result = await node(["client.mjs", "pubsub", server.tcpUrl, "2000"]);
  expect(result.exitCode).toBe(0);
  expect(JSON.parse(result.stdout.trim())).toEqual({
    published: 2000,
    received: 2000,
    events: [],
  });
  await server.stop();
}, 60_000);

test("under Node over TLS: the same through tls:// with the test CA", async () => {
  const server = await startAria({
    args: ["--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")],
  });
  expect(server.tcpUrl).toStartWith("tls://");
  const result = await node(["client.mjs", "pubsub", server.tcpUrl, "500", certs.path("ca.pem")]);
  expect(result.exitCode).toBe(0);
  expect(JSON.parse(result.stdout.trim())).toMatchObject({ published: 500, received: 500 });
  await server.stop();
}, 60_000);

test("under Node with mutual TLS: the client's certificate is accepted by --tls-client-ca", async () => {
  const server = await startAria({
    args: ["--tls-cert", certs.path("server.pem"), "--tls-key", certs.path("server.key")].concat([
      "--tls-client-ca",
      certs.path("ca.pem"),
    ]),
  });
  const pems = ["ca.pem", "client.pem", "client.key"].map((name) => certs.path(name));
  const result = await node(["client.mjs", "pubsub", server.tcpUrl, "100", ...pems]);
  expect(result.exitCode).toBe(0);
  expect(JSON.parse(result.stdout.trim())).toMatchObject({ published: 100, received: 100 });
  // Without a client certificate the server refuses the connection.
  const refused = await node(["client.mjs", "pubsub", server.tcpUrl, "100", pems[0]], {}, true);
  expect(refused.exitCode).not.toBe(0);
  expect(refused.stderr).toMatch(/client certificate/);
  await server.stop();
}, 60_000);

test("under Node: the server is killed and restarted on its port; the subscription resumes without gap or duplicate", async () => {
  const first = await startAria();
  const port = Number(first.tcpUrl.split(":").at(-1));
  const client = startNode(["client.mjs", "reconnect", first.tcpUrl, "1000"]);
  await waitFor(() => client.stdout.text.includes("READY"), "the first 1,000 messages", 20_000);
  await first.kill9();
  const second = await startAria({ dataDir: first.dataDir, port });
  const exitCode = await client.child.exited;
  await Promise.all([client.stdout.done, client.stderr.done]);
  if (exitCode !== 0) console.error(client.stdout.text, client.stderr.text);
  expect(exitCode).toBe(0);
  const summary = JSON.parse(client.stdout.text.trim().split("\n").at(-1) ?? "");
  // client.mjs checked every seq 1..2000 in order, each payload, none twice.
  expect(summary).toEqual({
    published: 1000,
    received: 2000,
    events: ["disconnected", "reconnected"],
  });
  await second.stop();
}, 60_000);
