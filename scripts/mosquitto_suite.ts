/**
 * Runs mosquitto's own broker tests (test/broker of Debian's source package, fetched at test time
 * by mosquitto_suite_fetch.ts) against a broker: Debian's mosquitto (the reference, which the tests
 * were written for) or Aria's MQTT door (`aria serve --mqtt-port PORT`, a fresh data directory per
 * broker start). mosquitto_suite_hook.py is the seam: it swaps the broker each test starts and
 * ends a test that needs mosquitto's config files with "does not apply".
 *
 * Each test runs in its own process group with its own free ports, several at once, and is ended
 * with its group (the brokers it started included) when it finishes or times out. The suite's
 * files are copied to a temporary run directory first (its tests write .conf and .db files).
 *
 *   npx bun scripts/mosquitto_suite.ts [--aria BIN] [--no-reference] [--only T1,T2] [--jobs N]
 *
 * prints one line per test as it ends, then a Markdown table: every test of test/broker's list
 * (test.py), its result on mosquitto and on Aria, and why.
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ensureSuite, installedMosquittoVersion } from "./mosquitto_suite_fetch.ts";

/** The hook that swaps the broker a test starts (see its docstring). */
export const HOOK = join(import.meta.dir, "mosquitto_suite_hook.py");

/** Debian's python, the one python3-paho-mqtt and the suite's imports are installed for. */
export const PYTHON = "/usr/bin/python3";

/** The hook's exit code for a test that needs mosquitto's config files. */
const DOES_NOT_APPLY_EXIT = 77;

/**
 * The tests of test/broker that pass on Aria today (each passed 3 full runs of 3; left out as
 * flaky: 02-subpub-recover-subscriptions): `bun test`
 * (tests/mosquitto_suite.test.ts) runs them and fails on any regression. Extend as Aria's door
 * grows (the table says which).
 */
export const ARIA_PASSING: readonly string[] = [
  "01-connect-575314",
  "01-connect-bad-packet",
  "01-connect-disconnect-v5",
  "01-connect-invalid-id-0",
  "01-connect-invalid-id-missing",
  "01-connect-invalid-protonum",
  "01-connect-invalid-reserved",
  "01-connect-success",
  "02-subhier-crash",
  "02-subpub-qos0",
  "02-subpub-qos0-retain-as-publish",
  "02-subpub-qos0-send-retain",
  "02-subpub-qos1",
  "02-subpub-qos1-message-expiry-will",
  "02-subpub-qos1-nolocal",
  "02-subpub-qos2",
  "02-subpub-qos2-pubrec-error",
  "02-subscribe-dollar-v5",
  "02-subscribe-persistence-flipflop",
  "02-subscribe-qos0",
  "02-subscribe-qos1",
  "02-subscribe-qos2",
  "02-unsubscribe-qos0",
  "02-unsubscribe-qos1",
  "02-unsubscribe-qos2",
  "02-unsubscribe-qos2-multiple",
  "03-pattern-matching",
  "03-publish-b2c-disconnect-qos1",
  "03-publish-b2c-disconnect-qos2",
  "03-publish-b2c-qos1-len",
  "03-publish-b2c-qos2-len",
  "03-publish-c2b-qos2-len",
  "03-publish-dollar",
  "03-publish-qos2",
  "04-retain-qos0",
  "04-retain-qos0-clear",
  "04-retain-qos0-fresh",
  "04-retain-qos0-repeated",
  "05-clean-session-qos1",
  "05-session-expiry-v5",
  "07-will-delay-recover",
  "07-will-delay-session-expiry",
  "07-will-delay-session-expiry2",
  "07-will-disconnect-with-will",
  "07-will-null",
  "07-will-qos0",
  "07-will-reconnect-1273",
  "07-will-takeover",
  "12-prop-assigned-client-identifier",
  "12-prop-maximum-packet-size-connect",
  "12-prop-maximum-packet-size-publish",
  "12-prop-response-topic",
  "12-prop-response-topic-correlation-data",
  "12-prop-subpub-content-type",
];

/** A test of the suite: its file name and how many ports it takes as arguments. */
export interface SuiteTest {
  name: string;
  ports: number;
}

/** What one test run gave. */
export interface TestResult {
  name: string;
  status: "pass" | "fail" | "n/a";
  seconds: number;
  /** Why it failed or does not apply; empty for a pass. */
  reason: string;
  /** What its mosquitto config files ask for, when it started the broker with one; else null. */
  config: string | null;
  /** How many times it started a broker. */
  brokerStarts: number;
  output: string;
}

/** The broker a run checks: the real mosquitto, or Aria's binary. */
export type Broker =
  | { kind: "mosquitto" }
  | {
      kind: "aria";
      binary: string;
      /** Hex of Aria's default CONNACK properties (ariaConnackDefaults), expected in place of
       *  mosquitto's; absent: the suite expects mosquitto's. */
      connackProperties?: string;
    };

/** The suite's own list of its tests (test/broker/test.py: `(PORTS, './NAME.py')`). */
export function suiteTests(brokerDir: string): SuiteTest[] {
  const text = readFileSync(join(brokerDir, "test.py"), "utf8");
  return [...text.matchAll(/^\s*\((\d+),\s*'\.\/([^']+\.py)'\)/gm)].map((match) => ({
    name: match[2]!,
    ports: Number(match[1]),
  }));
}

/** A port free on 127.0.0.1 right now (the test binds it moments later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(),
      );
    });
  });
}

/**
 * Why Aria runs with `--mqtt-aria-seq off`: the suite compares the packets it receives byte for
 * byte with the ones mosquitto sends, and Aria's default adds user property `aria-seq` to every
 * PUBLISH to an MQTT 5 subscriber (docs/mqtt.md). Off, the PUBLISH carries the publisher's
 * properties only, which is what the tests check.
 */
export const ARIA_SEQ_NOTE =
  "Aria runs with `--mqtt-aria-seq off`: the suite compares packets byte for byte, and Aria's " +
  "default adds user property `aria-seq` to every PUBLISH to an MQTT 5 subscriber.";

/** The argv the hook runs instead of mosquitto for Aria ({port}, {data} filled by the hook). */
export function ariaBrokerArgv(binary: string): string[] {
  return [
    binary,
    "serve",
    "--mqtt-port",
    "{port}",
    "--mqtt-aria-seq",
    "off",
    "--port",
    "0",
    "--admin-port",
    "0",
    "--data-dir",
    "{data}",
    "--log-level",
    "warn",
  ];
}

/** A plain MQTT 5 CONNECT: client id "x", clean start, keep alive 60 s, no properties. */
const PLAIN_CONNECT_V5 = new Uint8Array([
  0x10, 0x0e, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x05, 0x02, 0x00, 0x3c, 0x00, 0x00, 0x01, 0x78,
]);

/** The properties (hex) of the CONNACK that the broker on `port` answers PLAIN_CONNECT_V5 with. */
async function connackProperties(port: number): Promise<string> {
  const bytes = await new Promise<Buffer>((resolve, reject) => {
    let got = Buffer.alloc(0);
    const socket = createConnection({ host: "127.0.0.1", port }, () =>
      socket.write(PLAIN_CONNECT_V5),
    );
    const timer = setTimeout(() => socket.destroy(new Error("no CONNACK within 5 s")), 5000);
    socket.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 2 && got.length >= 2 + got[1]!) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got);
      }
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  // 0x20, remaining length (< 128 here), flags, reason code, property length (< 128), properties.
  if (bytes[0] !== 0x20 || bytes.length < 5 || bytes[3] !== 0)
    throw new Error(`no successful CONNACK to a plain MQTT 5 CONNECT: ${bytes.toString("hex")}`);
  return bytes.subarray(5, 5 + bytes[4]!).toString("hex");
}

/**
 * The CONNACK properties Aria's door gives a plain MQTT 5 client: its own server limits, which
 * the hook expects where the suite expects mosquitto's defaults (mosquitto_suite_hook.py).
 */
export async function ariaConnackDefaults(binary: string): Promise<string> {
  const data = mkdtempSync(join(tmpdir(), "aria-mosquitto-suite-connack-"));
  const port = await freePort();
  const argv = ariaBrokerArgv(binary).map((part) =>
    part.replace("{port}", String(port)).replace("{data}", data),
  );
  const server = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        return await connackProperties(port);
      } catch (error) {
        if (Date.now() > deadline || server.exitCode !== null) throw error;
        await Bun.sleep(50);
      }
    }
  } finally {
    server.kill("SIGKILL");
    await server.exited;
    rmSync(data, { recursive: true, force: true });
  }
}

/** Why a failed test failed: the suite's FAIL line and what it saw, else the last error line. */
export function failureReason(output: string, exitCode: number | null, timedOut: boolean): string {
  if (timedOut) return "timed out";
  const lines = output.split("\n").map((line) => line.trim());
  const fail = lines.findIndex((line) => line.startsWith("FAIL:"));
  if (fail >= 0 && lines[fail]!.includes("unable to start broker")) {
    const errors = [...lines[fail]!.matchAll(/Error: ([^\\]*)/g)].map((match) => match[1]);
    return `the broker did not start${errors.length > 0 ? `: ${errors.join(" ")}` : ""}`;
  }
  if (fail >= 0) {
    const seen = lines
      .slice(fail + 1, fail + 3)
      .filter((line) => /^(Received|Expected)/.test(line));
    return [lines[fail]!, ...seen].join(" ");
  }
  const error = lines.filter((line) => /^[A-Za-z_.]*(Error|Exception|timeout)\b/.test(line)).pop();
  if (error !== undefined) return error;
  return `exit ${exitCode}, no FAIL line: the test's own check failed`;
}

/**
 * A note when a failure is a difference MQTT 5 allows (docs/mqtt.md, "Checked against others"):
 * Aria's DISCONNECT carries the reason code expected plus a Reason String, or Aria answers a
 * refused MQTT 5 CONNECT with a CONNACK where mosquitto closes without one. Else "".
 */
export function allowedDifference(reason: string, version: string | undefined): string {
  const disconnect = new RegExp(
    "Received: DISCONNECT, rl=(\\d+), reason_code=(\\d+) " +
      "Expected: DISCONNECT, rl=1, reason_code=(\\d+)",
  ).exec(reason);
  if (disconnect !== null && Number(disconnect[1]) > 1 && disconnect[2] === disconnect[3])
    return "the reason code expected, plus a Reason String (MQTT 5 allows one in DISCONNECT)";
  if (version === "5" && reason.includes("Received (not decoded, len=1): b' ' Expected:"))
    return (
      "a refusing CONNACK (with a Reason String) where the test expects a silent close; " +
      "MQTT 5 allows either (3.1.4)"
    );
  if (version === "5" && reason.includes("Received (not decoded, len=1): b'\\xe0' Expected:"))
    return (
      "a DISCONNECT with the reason code before the close where the test expects a silent " +
      "close; MQTT 5 allows it (4.13)"
    );
  const connack = new RegExp(
    "Received \\(not decoded, len=\\d+\\): (b'.*?'|b\".*?\") " +
      "Expected \\(not decoded, len=\\d+\\): (b'.*?'|b\".*?\")$",
  ).exec(reason);
  if (connack !== null) {
    const [got, want] = [pythonBytes(connack[1]!), pythonBytes(connack[2]!)];
    // CONNACK: 0x20, remaining length, flags, reason code, property length.
    const refusal = (b: number[]) => b.length >= 5 && b[0] === 0x20 && b[3]! >= 0x80;
    if (refusal(got) && refusal(want) && got[3] === want[3] && want[4] === 0 && got[4]! > 0)
      return "the CONNACK reason code expected, plus a Reason String (MQTT 5 allows one)";
  }
  if (
    /Received: PUBACK, rl=2, mid=(\d+) Expected: PUBACK, rl=3, mid=\1, reason_code=16/.test(reason)
  )
    return (
      "PUBACK 0x00 where mosquitto says 0x10 no matching subscribers, a MAY: " +
      "the log keeps the message for later readers"
    );
  return "";
}

/** The bytes of a Python bytes literal as the suite prints them (`b'\\x00a'`). */
export function pythonBytes(literal: string): number[] {
  const body = literal.slice(2, -1);
  const escapes: Record<string, number> = { n: 10, r: 13, t: 9, "\\": 92, "'": 39, '"': 34 };
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    if (body[i] !== "\\") {
      bytes.push(body.charCodeAt(i));
      continue;
    }
    const next = body[i + 1]!;
    if (next === "x") {
      bytes.push(Number.parseInt(body.slice(i + 2, i + 4), 16));
      i += 3;
    } else {
      bytes.push(escapes[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return bytes;
}

/** What a test checks: its file's opening comment (`# Test whether ...`). */
export function testPurpose(source: string): string {
  const lines = source.split("\n").slice(1);
  const start = lines.findIndex((line) => line.startsWith("# "));
  if (start < 0) return "";
  const end = lines.findIndex((line, index) => index > start && !line.startsWith("#"));
  return lines
    .slice(start, end < 0 ? undefined : end)
    .map((line) => line.replace(/^#\s*/, ""))
    .join(" ")
    .trim();
}

/** What a test's config files ask of mosquitto, from the hook's record; null: none used. */
function configReason(record: string): string | null {
  const directives = new Set<string>();
  let configured = false;
  for (const line of record.split("\n")) {
    if (line === "") continue;
    const entry = JSON.parse(line) as { config: string[] | null };
    if (entry.config !== null) configured = true;
    for (const directive of entry.config ?? []) {
      const [key] = directive.split(/\s+/);
      if (key === "port" || key === "listener") continue;
      directives.add(key === "allow_anonymous" ? directive : key!);
    }
  }
  if (!configured) return null;
  return `needs mosquitto's config file${directives.size > 0 ? `: ${[...directives].join(", ")}` : ""}`;
}

/** Runs one test of the suite in `suiteDir` (a copy of test/) against `broker`. */
export async function runTest(
  test: SuiteTest,
  options: { suiteDir: string; broker: Broker; timeoutMs: number },
): Promise<TestResult> {
  const brokerDir = join(options.suiteDir, "broker");
  if (!existsSync(join(brokerDir, test.name)))
    return {
      name: test.name,
      status: "n/a",
      seconds: 0,
      reason: "listed in test.py, but the source package has no such file",
      config: null,
      brokerStarts: 0,
      output: "",
    };
  const ports: string[] = [];
  for (let index = 0; index < test.ports; index++) ports.push(String(await freePort()));
  const runDir = mkdtempSync(join(options.suiteDir, `.run-${test.name}-`));
  const record = join(runDir, "record.jsonl");
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    MOSQ_SUITE_RECORD: record,
    MOSQ_SUITE_DATA: runDir,
    PYTHONDONTWRITEBYTECODE: "1",
  };
  if (options.broker.kind === "aria") {
    env.MOSQ_SUITE_BROKER = JSON.stringify(ariaBrokerArgv(options.broker.binary));
    if (options.broker.connackProperties !== undefined)
      env.MOSQ_SUITE_CONNACK_PROPERTIES = options.broker.connackProperties;
  }
  const started = performance.now();
  const child = spawn(PYTHON, [HOOK, test.name, ...ports], {
    cwd: brokerDir,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid!);
  }, options.timeoutMs);
  const exitCode = await new Promise<number | null>((resolve) =>
    child.once("close", (code) => resolve(code)),
  );
  clearTimeout(timer);
  killGroup(child.pid!);
  const seconds = (performance.now() - started) / 1000;
  let recorded = "";
  try {
    recorded = readFileSync(record, "utf8");
  } catch {
    recorded = "";
  }
  rmSync(runDir, { recursive: true, force: true });
  const config = configReason(recorded);
  const brokerStarts = recorded.split("\n").filter((line) => line !== "").length;
  const result = { name: test.name, seconds, config, brokerStarts, output };
  if (!timedOut && exitCode === 0) return { ...result, status: "pass", reason: "" };
  if (!timedOut && exitCode === DOES_NOT_APPLY_EXIT)
    return { ...result, status: "n/a", reason: config ?? "needs mosquitto's config file" };
  const version = /proto_ver=(\d)/.exec(output)?.[1];
  const named = { "3": "MQTT 3.1", "4": "MQTT 3.1.1", "5": "MQTT 5" }[version ?? ""];
  const failure = failureReason(output, exitCode, timedOut);
  const allowed = allowedDifference(failure, version);
  const reason = [
    named === undefined ? "" : `${named}: `,
    allowed === "" ? "" : `allowed: ${allowed}. `,
    failure,
  ].join("");
  const purpose = testPurpose(readFileSync(join(brokerDir, test.name), "utf8"));
  return {
    ...result,
    status: "fail",
    reason: reason.includes("exit ") && purpose !== "" ? `${reason} (${purpose})` : reason,
  };
}

/** SIGKILL to the process group `pid` leads (the test and every broker it started). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // The group has already ended.
  }
}

/** A fresh copy of the suite's test/ directory (the tests write files beside themselves). */
export function copySuite(brokerDir: string): string {
  const copy = mkdtempSync(join(tmpdir(), "aria-mosquitto-suite-"));
  cpSync(dirname(brokerDir), copy, { recursive: true });
  return copy;
}

/** Runs `tests` against `broker`, `jobs` at a time; calls `onResult` as each ends. */
export async function runSuite(
  tests: readonly SuiteTest[],
  options: {
    brokerDir: string;
    broker: Broker;
    jobs?: number;
    timeoutMs?: number;
    onResult?: (result: TestResult) => void;
  },
): Promise<TestResult[]> {
  const suiteDir = copySuite(options.brokerDir);
  const results: TestResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < tests.length) {
      const test = tests[next++]!;
      const result = await runTest(test, {
        suiteDir,
        broker: options.broker,
        timeoutMs: options.timeoutMs ?? 60_000,
      });
      results.push(result);
      options.onResult?.(result);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.jobs ?? 4 }, worker));
  } finally {
    rmSync(suiteDir, { recursive: true, force: true });
  }
  const order = new Map(tests.map((test, index) => [test.name, index]));
  return results.sort((a, b) => order.get(a.name)! - order.get(b.name)!);
}

/** The Markdown table of a run: every test, its result per broker, and why. */
export function markdownTable(
  tests: readonly SuiteTest[],
  columns: { title: string; results: readonly TestResult[] }[],
): string {
  const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");
  const byName = columns.map((column) => new Map(column.results.map((r) => [r.name, r])));
  const header = `| test | ${columns.map((column) => column.title).join(" | ")} | why |`;
  const rule = `| --- | ${columns.map(() => "---").join(" | ")} | --- |`;
  const rows = tests.map((test) => {
    const results = byName.map((map) => map.get(test.name));
    const statuses = results.map((result) => result?.status ?? "not run");
    const why = results
      .map((result, index) =>
        result !== undefined && result.reason !== ""
          ? `${columns.length > 1 ? `${columns[index]!.title}: ` : ""}${result.reason}`
          : "",
      )
      .filter((text) => text !== "")
      .join("; ");
    return `| ${test.name.replace(/\.py$/, "")} | ${statuses.join(" | ")} | ${cell(why.slice(0, 240))} |`;
  });
  const totals = columns.map((column) => {
    const count = (status: string) => column.results.filter((r) => r.status === status).length;
    return `${column.title}: ${count("pass")} pass, ${count("fail")} fail, ${count("n/a")} n/a`;
  });
  return [header, rule, ...rows, "", totals.join(". ")].join("\n");
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const value = (flag: string) => {
    const index = args.indexOf(flag);
    return index >= 0 ? args[index + 1] : undefined;
  };
  const brokerDir = ensureSuite();
  const only = value("--only")?.split(",");
  const tests = suiteTests(brokerDir).filter(
    (test) =>
      only === undefined || only.some((name) => `${name.replace(/\.py$/, "")}.py` === test.name),
  );
  const jobs = Number(value("--jobs") ?? 4);
  const columns: { title: string; results: TestResult[] }[] = [];
  const print = (title: string) => (result: TestResult) =>
    process.stderr.write(
      `${title} ${result.status.padEnd(4)} ${result.seconds.toFixed(1).padStart(5)}s ${result.name} ${result.reason}\n`,
    );
  if (!args.includes("--no-reference")) {
    const title = `mosquitto ${installedMosquittoVersion().replace(/-.*/, "")}`;
    const results = await runSuite(tests, {
      brokerDir,
      broker: { kind: "mosquitto" },
      jobs,
      onResult: print(title),
    });
    columns.push({ title, results });
  }
  const binary = value("--aria");
  if (binary !== undefined) {
    const connackProperties = await ariaConnackDefaults(binary);
    process.stderr.write(`Aria's MQTT 5 CONNACK properties: ${connackProperties}\n`);
    const results = await runSuite(tests, {
      brokerDir,
      broker: { kind: "aria", binary, connackProperties },
      jobs,
      onResult: print("Aria"),
    });
    columns.push({ title: "Aria", results });
  }
  const when = new Date()
    .toISOString()
    .replace(/:\d\d\.\d+Z$/, " UTC")
    .replace("T", " ");
  const command = `npx bun scripts/mosquitto_suite.ts ${args.join(" ")}`;
  process.stdout.write(`Run ${when}: \`${command}\`\n\n`);
  if (binary !== undefined) process.stdout.write(`${ARIA_SEQ_NOTE}\n\n`);
  process.stdout.write(`${markdownTable(tests, columns)}\n`);
  const reference = columns.find((column) => column.title !== "Aria");
  if (reference !== undefined) {
    const applicable = reference.results.filter((r) => r.brokerStarts > 0 && r.config === null);
    const failing = applicable.filter((r) => r.status !== "pass").map((r) => r.name);
    process.stdout.write(
      `\n${applicable.length} tests start the broker without a config file; ${reference.title} ` +
        `passes ${applicable.length - failing.length} of them${failing.length > 0 ? ` (not: ${failing.join(", ")})` : ""}.\n`,
    );
  }
  return 0;
}

if (import.meta.main) process.exit(await main());
