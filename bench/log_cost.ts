/**
 * What the server's logging costs: two `aria serve` binaries side by side, one logging at `info`
 * (a line per connection opened and closed) and one at `error` (no line in these runs), measured
 * alternately round by round:
 * - publish: `aria bench --scenario publish --url` (1 publisher, 64 B): msg/s and the server's
 *   CPU per message (no line is logged per message: this shows it stays so);
 * - connection churn: connections opened, signed in (HELLO → WELCOME) and closed one after the
 *   other: the server's CPU per connection (two lines each at `info`).
 * Medians and info/error ratios are printed.
 *
 *   npx bun bench/log_cost.ts [--bin dist/aria] [--rounds 6] [--connections 2000]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { median } from "../src/bench/stats.ts";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { cpuMs, frameBytes, type ServedBinary, startServedBinary } from "./served_binary.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string" },
    rounds: { type: "string" },
    connections: { type: "string" },
  },
});
const BIN = values.bin ?? join(import.meta.dir, "..", "dist", "aria");
const ROUNDS = Number(values.rounds ?? 6);
const CONNECTIONS = Number(values.connections ?? 2000);
const LEVELS = ["info", "error"] as const;
const HELLO = frameBytes({
  kind: "hello",
  version: PROTOCOL_VERSION,
  clientName: "log-cost",
  authToken: null,
});

const dataRoot = mkdtempSync(join(tmpdir(), "aria-log-cost-"));

async function published(server: ServedBinary): Promise<number> {
  const stats = (await (await fetch(`${server.adminUrl}/api/stats`)).json()) as {
    broker: { messagesPublished: number };
  };
  return stats.broker.messagesPublished;
}

/** msg/s and server CPU ns per message of one `aria bench` publish run. */
async function publish(server: ServedBinary): Promise<[number, number]> {
  const before = await published(server);
  const cpuBefore = cpuMs(server.pid);
  const child = Bun.spawn(
    [BIN, "bench", "--scenario", "publish", "--publishers", "1", "--payload", "64"].concat([
      "--duration",
      "2s",
      "--repeat",
      "1",
      "--json",
      "--url",
      server.tcpUrl,
    ]),
    { stdin: "ignore", stdout: "pipe", stderr: "ignore" },
  );
  const out = await new Response(child.stdout).text();
  await child.exited;
  const messages = (await published(server)) - before;
  const row = JSON.parse(out).scenarios[0].rows[0] as { messagesPerSecond: number };
  return [row.messagesPerSecond, ((cpuMs(server.pid) - cpuBefore) * 1e6) / messages];
}

/** Server CPU µs per connection opened, signed in and closed, one after the other. */
async function churn(server: ServedBinary): Promise<number> {
  const url = new URL(server.tcpUrl);
  const cpuBefore = cpuMs(server.pid);
  for (let i = 0; i < CONNECTIONS; i++) {
    const welcomed = Promise.withResolvers<void>();
    const socket = await Bun.connect({
      hostname: url.hostname,
      port: Number(url.port),
      socket: { data: () => welcomed.resolve(), close: () => welcomed.resolve() },
    });
    socket.write(HELLO);
    await welcomed.promise;
    socket.end();
  }
  // Let the server hear the last closes before its CPU is read.
  await Bun.sleep(200);
  return ((cpuMs(server.pid) - cpuBefore) * 1000) / CONNECTIONS;
}

const servers = new Map<string, ServedBinary>();
for (const level of LEVELS)
  servers.set(
    level,
    await startServedBinary(BIN, join(dataRoot, level), "64MiB", ["--log-level", level]),
  );
const rows = new Map<string, number[][]>();
try {
  for (let round = 0; round < ROUNDS; round++)
    for (const level of LEVELS) {
      const server = servers.get(level) as ServedBinary;
      const [rate, nsPerMessage] = await publish(server);
      const usPerConnection = await churn(server);
      rows.set(level, [...(rows.get(level) ?? []), [rate, nsPerMessage, usPerConnection]]);
    }
} finally {
  for (const server of servers.values()) await server.stop();
  rmSync(dataRoot, { recursive: true, force: true });
}

const medians = (level: string) =>
  [0, 1, 2].map((column) => median((rows.get(level) ?? []).map((row) => row[column])));
const [info, error] = [medians("info"), medians("error")];
console.log(
  `${ROUNDS} rounds; publish: aria bench 1 publisher 64 B 2 s, --fsync never; churn: ${CONNECTIONS} connections; medians`,
);
console.log("| log level | publish msg/s | server CPU ns/msg | server CPU µs/connection |");
console.log("| --- | ---: | ---: | ---: |");
for (const [level, m] of [
  ["info", info],
  ["error", error],
] as const)
  console.log(
    `| ${level} | ${Math.round(m[0] / 1000)} k | ${Math.round(m[1])} | ${m[2].toFixed(1)} |`,
  );
console.log(
  `| info / error | ${(info[0] / error[0]).toFixed(2)} | ${(info[1] / error[1]).toFixed(2)} | ${(info[2] / error[2]).toFixed(2)} |`,
);
