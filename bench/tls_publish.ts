/**
 * What TLS costs the publish path: two `aria serve` binaries side by side (`--fsync never`), one
 * plain and one with --tls-cert/--tls-key (certificates made with openssl at start), each
 * measured by `aria bench --scenario publish --url` (1 publisher, 64 B and 1 KiB payloads), the
 * two alternating round by round. Per run: acknowledged msg/s (as aria bench reports it), and CPU
 * per message of the server (/proc/PID/stat) and of the bench client (its rusage), counted over
 * the messages the server says were published (/api/stats). On a shared machine wall-clock
 * throughput mostly measures the neighbours; CPU per message is the steadier figure. Medians and
 * TLS/plain ratios are printed.
 *
 *   npx bun bench/tls_publish.ts [--bin dist/aria] [--rounds 6] [--duration 2s]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { median } from "../src/bench/stats.ts";
import { makeTestCerts } from "../tests/tls_certs.ts";
import { cpuMs } from "./served_binary.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string" },
    rounds: { type: "string" },
    duration: { type: "string" },
  },
});
const BIN = values.bin ?? join(import.meta.dir, "..", "dist", "aria");
const ROUNDS = Number(values.rounds ?? 6);
const DURATION = values.duration ?? "2s";
const PAYLOADS = ["64", "1024"];

const certs = makeTestCerts();
const ca = certs.text("ca.pem");
const dataRoot = mkdtempSync(join(tmpdir(), "aria-tls-bench-"));

interface Served {
  kind: "plain" | "tls";
  pid: number;
  tcpUrl: string;
  adminUrl: string;
  stop(): Promise<void>;
}

async function serve(kind: "plain" | "tls"): Promise<Served> {
  const tls = kind === "tls" ? ["--tls-cert", certs.path("server.pem")] : [];
  const key = kind === "tls" ? ["--tls-key", certs.path("server.key")] : [];
  const child = Bun.spawn(
    [BIN, "serve", "--port", "0", "--admin-port", "0", "--fsync", "never", ...tls, ...key].concat([
      "--data-dir",
      join(dataRoot, kind),
    ]),
    { stdin: "ignore", stdout: "pipe", stderr: "inherit" },
  );
  const reader = child.stdout.getReader();
  let text = "";
  while (text.split("\n").length < 3) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`aria serve (${kind}) exited before printing its URLs`);
    text += new TextDecoder().decode(value);
  }
  const [tcpUrl, adminUrl] = text.split("\n");
  return {
    kind,
    pid: child.pid,
    tcpUrl,
    adminUrl,
    stop: async () => {
      child.kill("SIGTERM");
      await child.exited;
    },
  };
}

async function published(server: Served): Promise<number> {
  const response = await fetch(`${server.adminUrl}/api/stats`, { tls: { ca } });
  return ((await response.json()) as { broker: { messagesPublished: number } }).broker
    .messagesPublished;
}

interface Run {
  msgPerSecond: number;
  serverNsPerMessage: number;
  clientNsPerMessage: number;
}

async function measure(server: Served, payload: string): Promise<Run> {
  const before = await published(server);
  const serverBefore = cpuMs(server.pid);
  const tls = server.kind === "tls" ? ["--ca", certs.path("ca.pem")] : [];
  const child = Bun.spawn(
    [BIN, "bench", "--scenario", "publish", "--publishers", "1", "--payload", payload].concat([
      "--duration",
      DURATION,
      "--repeat",
      "1",
      "--json",
      "--url",
      server.tcpUrl,
      ...tls,
    ]),
    { stdin: "ignore", stdout: "pipe", stderr: "ignore" },
  );
  const out = await new Response(child.stdout).text();
  await child.exited;
  const usage = child.resourceUsage();
  const messages = (await published(server)) - before;
  const serverMs = cpuMs(server.pid) - serverBefore;
  const clientUs = usage === undefined ? 0 : Number(usage.cpuTime.total);
  const row = JSON.parse(out).scenarios[0].rows[0] as { messagesPerSecond: number };
  return {
    msgPerSecond: row.messagesPerSecond,
    serverNsPerMessage: (serverMs * 1e6) / messages,
    clientNsPerMessage: (clientUs * 1e3) / messages,
  };
}

const plain = await serve("plain");
const secure = await serve("tls");
const runs = new Map<string, Run[]>();
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const server of [plain, secure]) {
      for (const payload of PAYLOADS) {
        const key = `${server.kind} ${payload}`;
        runs.set(key, [...(runs.get(key) ?? []), await measure(server, payload)]);
      }
    }
  }
} finally {
  await plain.stop();
  await secure.stop();
  rmSync(dataRoot, { recursive: true, force: true });
  certs.remove();
}

console.log(`${ROUNDS} rounds of ${DURATION}, 1 publisher, --fsync never; medians`);
console.log("| payload | transport | msg/s | server CPU ns/msg | client CPU ns/msg |");
console.log("| ---: | --- | ---: | ---: | ---: |");
for (const payload of PAYLOADS) {
  const figures = (kind: string) => {
    const list = runs.get(`${kind} ${payload}`) ?? [];
    return {
      rate: median(list.map((run) => run.msgPerSecond)),
      server: median(list.map((run) => run.serverNsPerMessage)),
      client: median(list.map((run) => run.clientNsPerMessage)),
    };
  };
  const p = figures("plain");
  const t = figures("tls");
  for (const [kind, f] of [
    ["plain", p],
    ["TLS", t],
  ] as const)
    console.log(
      `| ${payload} B | ${kind} | ${Math.round(f.rate / 1000)} k | ${Math.round(f.server)} | ${Math.round(f.client)} |`,
    );
  console.log(
    `| ${payload} B | TLS / plain | ${(t.rate / p.rate).toFixed(2)} | ${(t.server / p.server).toFixed(2)} | ${(t.client / p.client).toFixed(2)} |`,
  );
}
