/**
 * deploy/aria.service, the systemd unit docs/operations.md installs: systemd's own checker accepts
 * it without a warning (where systemd is installed), and what it asks of the binary holds — its
 * ExecStart runs a server on the StateDirectory, its ExecReload (SIGHUP) leaves the server and
 * its connections up, a stop is clean, and the exit codes it will not restart on are the ones
 * restarting cannot mend (wrong arguments, damage found at start-up).
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_USAGE } from "../src/cli/cli_io.ts";
import { FATAL_EXIT } from "../src/server/server.ts";
import {
  cleanupAll,
  ensureBinary,
  makeTempDir,
  ROOT,
  StreamText,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const UNIT_PATH = join(ROOT, "deploy", "aria.service");
const UNIT = readFileSync(UNIT_PATH, "utf8");

/** The values of `key=` in the unit, in order (a key may repeat). */
function values(key: string): string[] {
  return UNIT.split("\n")
    .filter((line) => line.startsWith(`${key}=`))
    .map((line) => line.slice(key.length + 1).trim());
}

function value(key: string): string {
  const all = values(key);
  expect(all).toHaveLength(1);
  return all[0];
}

const SYSTEMD_ANALYZE = Bun.which("systemd-analyze");

test.skipIf(SYSTEMD_ANALYZE === null)(
  "systemd-analyze verify accepts the unit without a warning",
  async () => {
    // verify checks that ExecStart's program exists: point it at the binary the tests run.
    const binary = await ensureBinary();
    const dir = makeTempDir("aria-unit-");
    const unit = join(dir, "aria.service");
    writeFileSync(unit, UNIT.replaceAll("/usr/local/bin/aria", binary));
    const run = Bun.spawnSync([SYSTEMD_ANALYZE as string, "verify", unit], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const said = `${run.stdout.toString()}${run.stderr.toString()}`;
    expect({ exit: run.exitCode, said }).toEqual({ exit: 0, said: "" });
  },
);

test("the unit runs as a dedicated user, sandboxed, restarting on failure", () => {
  expect(value("DynamicUser")).toBe("yes");
  expect(value("User")).toBe("aria");
  expect(value("Restart")).toBe("on-failure");
  for (const [key, wanted] of [
    ["NoNewPrivileges", "yes"],
    ["ProtectSystem", "strict"],
    ["PrivateTmp", "yes"],
    ["ProtectHome", "yes"],
    ["PrivateDevices", "yes"],
  ])
    expect(`${key}=${value(key)}`).toBe(`${key}=${wanted}`);
  // A JIT needs writable executable memory.
  expect(values("MemoryDenyWriteExecute")).toEqual([]);
  const noRestart = value("RestartPreventExitStatus").split(/\s+/).map(Number).sort();
  expect(noRestart).toEqual(
    [
      EXIT_USAGE,
      FATAL_EXIT.corrupt,
      FATAL_EXIT.tls,
      FATAL_EXIT.users,
      FATAL_EXIT.replicaBehindRetention,
      FATAL_EXIT.replicaDiverged,
    ].sort(),
  );
});

test("ExecStart serves on the StateDirectory; ExecReload (SIGHUP) keeps it up; a stop is clean", async () => {
  const [program, ...args] = value("ExecStart").split(/\s+/);
  expect(program).toBe("/usr/local/bin/aria");
  const dataDirAt = args.indexOf("--data-dir");
  expect(args[dataDirAt + 1]).toBe(`/var/lib/${value("StateDirectory")}`);
  const rest = args.filter((_, i) => i !== dataDirAt && i !== dataDirAt + 1);
  expect(rest[0]).toBe("serve");
  const server = await startAria({ args: rest.slice(1) });
  const connection = await Bun.connect({
    hostname: "127.0.0.1",
    port: Number(new URL(server.tcpUrl).port),
    socket: { data() {} },
  });
  const reload = value("ExecReload").replace("$MAINPID", String(server.pid)).split(/\s+/);
  expect(Bun.spawnSync(reload).exitCode).toBe(0);
  await Bun.sleep(300);
  expect(server.alive()).toBe(true);
  expect((await fetch(`${server.adminUrl}/healthz`)).status).toBe(200);
  expect(((await server.stats()) as { broker: { connections: number } }).broker.connections).toBe(
    1,
  );
  connection.end();
  expect(await server.stop()).toBe(0);
}, 20_000);

test("a SIGHUP during start-up does not end the server: the reload runs once it serves", async () => {
  const binary = await ensureBinary();
  const child = Bun.spawn(
    [binary, "serve", "--port", "0", "--admin-port", "0", "--data-dir", makeTempDir()],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const stderr = new StreamText(child.stderr);
  const stdout = new StreamText(child.stdout);
  // The first log line is written before the server opens its data directory and listens.
  await waitFor(() => stderr.text.includes(" INFO starting "), "the starting line");
  child.kill("SIGHUP");
  await waitFor(() => stdout.text.split("\n").length >= 3, "the URL lines");
  await waitFor(() => stderr.text.includes("SIGHUP: reloading"), "the reload");
  expect(child.exitCode).toBeNull();
  const lines = stderr.text.split("\n");
  const serving = lines.findIndex((line) => line.includes(" INFO serving "));
  const reloading = lines.findIndex((line) => line.includes("SIGHUP: reloading"));
  expect(serving).toBeGreaterThan(-1);
  expect(reloading).toBeGreaterThan(serving);
  child.kill("SIGTERM");
  expect(await child.exited).toBe(0);
}, 20_000);
