/**
 * `aria serve`'s settings from flags, ARIA_* variables and a config file, with the binary:
 * precedence and sources as --print-config shows them, a server that really runs on a file's
 * settings and logs them (tokens redacted, JSON lines), bad input refused with exit 2 naming
 * where, and docs/configuration.md kept true (every setting listed, its example accepted).
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SERVE_SETTINGS } from "../src/cli/serve.ts";
import { environmentName } from "../src/cli/settings.ts";
import { cleanupAll, makeTempDir, runAria, startAria } from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const dir = makeTempDir("aria-config-");

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** Runs the binary with `env` as its only ARIA_* variables. */
function runWith(args: string[], env: Record<string, string> = {}) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("ARIA_")),
  ) as Record<string, string>;
  return runAria(args, { env: { ...clean, ...env } });
}

test("--print-config: a flag wins over the environment, which wins over the file; tokens redacted", async () => {
  const config = file(
    "print.toml",
    'port = 7000\nadmin-port = 7001\nfsync = "never"\nauth-token = "file-secret"\n',
  );
  const run = await runWith(["serve", "--config", config, "--port", "7100", "--print-config"], {
    ARIA_ADMIN_PORT: "7201",
    ARIA_TIP_BYTES: "64MiB",
  });
  expect(run.exitCode).toBe(0);
  const lines = run.stdout.split("\n");
  expect(lines).toContain(`# config file: ${config}`);
  expect(lines).toContain('port = "7100"  # flag');
  expect(lines).toContain('admin-port = "7201"  # environment ARIA_ADMIN_PORT');
  expect(lines).toContain('tip-bytes = "64MiB"  # environment ARIA_TIP_BYTES');
  expect(lines).toContain('fsync = "never"  # file');
  expect(lines).toContain('auth-token = "<redacted>"  # file');
  expect(lines).toContain('host = "127.0.0.1"  # default');
  expect(lines).toContain("# retain-age = (not set)");
  expect(run.stdout).not.toContain("file-secret");
});

test("a server runs on a config file's settings and logs them as JSON lines, the token redacted", async () => {
  const dataDir = makeTempDir("aria-config-data-");
  const config = file(
    "run.json",
    JSON.stringify({ "tip-bytes": "2MiB", "auth-token": "json-secret", "log-format": "json" }),
  );
  // startAria passes --data-dir, --tip-bytes 1MiB and --fsync: flags, which win over the file.
  const server = await startAria({ dataDir, args: ["--config", config] });
  // The starting line comes before the URL lines startAria waited for.
  const start = server
    .stderr()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((line) => line.msg === "starting");
  expect(start).toMatchObject({
    level: "info",
    configFile: config,
    "tip-bytes": "1MiB",
    "log-format": "json",
    "auth-token": "<redacted>",
    "data-dir": dataDir,
  });
  expect(server.stderr()).not.toContain("json-secret");
  // /metrics tells the process and the build (issue 29's process metrics).
  const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
  for (const name of [
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_start_time_seconds",
  ])
    expect(metrics).toMatch(new RegExp(`^${name} \\d`, "m"));
  expect(metrics).toMatch(
    /^aria_build_info\{version="0\.1\.0",commit="[^"]+",runtime="bun [^"]+"\} 1$/m,
  );
  // The file's token is in force: a client without it is refused, one with it publishes.
  const refused = await runWith(["pub", "--url", server.tcpUrl, "a/b", "x"]);
  expect(refused.exitCode).toBe(1);
  const published = await runWith([
    "pub",
    "--url",
    server.tcpUrl,
    "--auth-token",
    "json-secret",
    "a/b",
    "x",
  ]);
  expect(published.exitCode).toBe(0);
  expect(await server.stop()).toBe(0);
  const messages = server
    .stderr()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => (JSON.parse(line) as { msg: string }).msg);
  expect(messages).toEqual(
    expect.arrayContaining(["starting", "serving", "connection opened", "connection closed"]),
  );
  expect(messages.slice(-2)).toEqual(["shutting down", "stopped"]);
}, 30_000);

test("bad settings: exit 2 naming the source, and the server never starts", async () => {
  const cases: [string[], Record<string, string>, string][] = [
    [
      ["--config", file("unknown.toml", "port = 1\nprot = 2\n")],
      {},
      `aria serve: ${dir}/unknown.toml: unknown setting "prot"`,
    ],
    [
      ["--config", file("syntax.toml", 'fsync = "never"\nport = = 2\n')],
      {},
      `aria serve: ${dir}/syntax.toml:2:8: invalid value`,
    ],
    [
      ["--config", file("type.toml", "fsync = true\n")],
      {},
      `aria serve: ${dir}/type.toml: fsync: must be a string`,
    ],
    [[], { ARIA_FSYNC: "sometimes" }, 'aria serve: ARIA_FSYNC: "sometimes" is not one of always'],
    [
      ["--config", file("value.toml", 'fsync = "often"\n')],
      {},
      `aria serve: ${dir}/value.toml: fsync: "often" is not one of always`,
    ],
    [[], { ARIA_PORT: "70000" }, "aria serve: ARIA_PORT: 70000 is not a port"],
    [[], { ARIA_LOG_LEVEL: "loud" }, 'aria serve: ARIA_LOG_LEVEL: "loud" is not one of debug'],
    [[], { ARIA_CONFIG: join(dir, "absent.toml") }, "aria serve: --config: cannot read"],
    [["--log-format", "xml"], {}, 'aria serve: --log-format: "xml" is not one of text, json'],
    [[], { ARIA_AUTH_TOKEN: "x".repeat(1025) }, "aria serve: ARIA_AUTH_TOKEN: longer than 1024"],
    [
      [],
      { ARIA_TLS_CERT: join(dir, "server.pem") },
      "aria serve: ARIA_TLS_CERT and --tls-key go together",
    ],
  ];
  for (const [args, env, said] of cases) {
    // Should one start by mistake, it listens on free ports in a directory of its own.
    const base = { ARIA_PORT: "0", ARIA_ADMIN_PORT: "0", ARIA_DATA_DIR: makeTempDir() };
    const run = await runWith(["serve", ...args], { ...base, ...env });
    expect({ args, env, exit: run.exitCode, said: run.stderr.split("\n")[0] }).toEqual({
      args,
      env,
      exit: 2,
      said: expect.stringContaining(said),
    });
  }
  // A broken ARIA_CONFIG does not hide the usage.
  const help = await runWith(["serve", "--help"], { ARIA_CONFIG: join(dir, "absent.toml") });
  expect(help.exitCode).toBe(0);
  expect(help.stdout).toContain("--print-config");
});

test("docs/configuration.md lists every setting with its variable, and its example is accepted", async () => {
  // Read only (the docs are never a test's output).
  const doc = readFileSync(new URL("../docs/configuration.md", import.meta.url), "utf8");
  for (const [name, spec] of Object.entries(SERVE_SETTINGS)) {
    if (spec.flagOnly === true) continue;
    expect(doc).toContain(`| \`${name}\` | \`${environmentName(name)}\` |`);
  }
  const usage = (await runWith(["serve", "--help"])).stdout;
  for (const name of Object.keys(SERVE_SETTINGS)) expect(usage).toContain(`--${name} `);
  const example = /```toml\n([\s\S]*?)```/.exec(doc)?.[1];
  expect(example).toBeDefined();
  const run = await runWith([
    "serve",
    "--config",
    file("example.toml", example as string),
    "--print-config",
  ]);
  expect({ exit: run.exitCode, stderr: run.stderr }).toEqual({ exit: 0, stderr: "" });
  expect(run.stdout).toContain('admin-allowed-hosts = "aria.example.com"  # file');
});
