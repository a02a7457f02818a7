/**
 * Mosquitto's own broker tests (Debian's source package, fetched at test time into a cache outside
 * the repository by scripts/mosquitto_suite_fetch.ts), run through scripts/mosquitto_suite.ts:
 * first the launcher against the real mosquitto (the reference the tests were written for: what
 * passes there must pass through the launcher, and a test needing a config file is told apart),
 * then against Aria's MQTT door the tests that pass on Aria today (ARIA_PASSING): any regression
 * fails here. The whole table (every test, pass / fail / does not apply) is the script's output.
 */
import { beforeAll, expect, test } from "bun:test";
import {
  ARIA_PASSING,
  allowedDifference,
  ariaBrokerArgv,
  ariaConnackDefaults,
  pythonBytes,
  type Broker,
  runSuite,
  type SuiteTest,
  suiteTests,
  type TestResult,
} from "../scripts/mosquitto_suite.ts";
import { ensureSuite } from "../scripts/mosquitto_suite_fetch.ts";
import { SYSTEM_REQUIREMENTS } from "../scripts/test_setup.ts";
import { ensureBinary } from "./fixtures/e2e_server.ts";

let brokerDir = "";
let tests: SuiteTest[] = [];

beforeAll(() => {
  brokerDir = ensureSuite();
  tests = suiteTests(brokerDir);
}, 120_000);

/** The tests named, from the suite's own list (each must be in it). */
function named(...names: string[]): SuiteTest[] {
  return names.map((name) => {
    const found = tests.find((candidate) => candidate.name === `${name}.py`);
    if (found === undefined) throw new Error(`${name} is not in the suite's test.py`);
    return found;
  });
}

/** A result's name, status and reason, with the test's output when it did not pass. */
function summary(result: TestResult): string {
  const head = `${result.name}: ${result.status} ${result.reason}`;
  return result.status === "pass" ? head : `${head}\n${result.output.slice(-2000)}`;
}

async function run(broker: Broker, chosen: SuiteTest[], jobs = 4): Promise<TestResult[]> {
  return await runSuite(chosen, { brokerDir, broker, jobs, timeoutMs: 30_000 });
}

test("npm test's set-up installs the programs the suite runs: mosquitto, dpkg-source, paho", () => {
  expect(SYSTEM_REQUIREMENTS.map((requirement) => requirement.path)).toEqual(
    expect.arrayContaining([
      "/usr/sbin/mosquitto",
      "/usr/bin/dpkg-source",
      "/usr/lib/python3/dist-packages/paho/mqtt/client.py",
    ]),
  );
});

test("the suite's list has the broker tests, numbered by area as in its Makefile", () => {
  expect(tests.length).toBeGreaterThan(150);
  expect(tests.map((t) => t.name)).toEqual(
    expect.arrayContaining(["01-connect-success.py", "02-subpub-qos1.py", "03-publish-qos2.py"]),
  );
});

test("against the real mosquitto the launcher passes the tests it starts without a config file", async () => {
  const results = await run(
    { kind: "mosquitto" },
    named("01-connect-success", "02-subpub-qos1", "03-publish-qos2", "04-retain-qos0"),
  );
  expect(results.map(summary)).toEqual(results.map((r) => `${r.name}: pass `));
  expect(results.map((r) => r.config)).toEqual([null, null, null, null]);
}, 60_000);

test("a test that starts the broker with a mosquitto config file does not apply to another broker, and says what it needs", async () => {
  const [result] = await run(
    { kind: "aria", binary: "/nonexistent/aria" },
    named("01-connect-uname-password-denied"),
  );
  expect(result!.status).toBe("n/a");
  expect(result!.reason).toBe(
    "needs mosquitto's config file: password_file, allow_anonymous false",
  );
}, 30_000);

test("a broker that does not answer fails the test (the launcher reports failures)", async () => {
  const [result] = await run({ kind: "aria", binary: "/bin/false" }, named("01-connect-success"));
  expect(result!.status).toBe("fail");
  expect(result!.reason).toContain("the broker did not start");
}, 30_000);

test("Aria's MQTT door passes the suite's tests it passed before (ARIA_PASSING), MQTT 5 CONNACKs expected with Aria's own server limits", async () => {
  const binary = await ensureBinary();
  const connackProperties = await ariaConnackDefaults(binary);
  const results = await run({ kind: "aria", binary, connackProperties }, named(...ARIA_PASSING));
  expect(results.map(summary)).toEqual(results.map((r) => `${r.name}: pass `));
}, 120_000);

test("with mosquitto's CONNACK defaults expected, an MQTT 5 test fails on Aria: the launcher's substitution is what lets it pass", async () => {
  const binary = await ensureBinary();
  const [result] = await run({ kind: "aria", binary }, named("01-connect-disconnect-v5"));
  expect(result!.status).toBe("fail");
  expect(result!.reason).toContain("Received incorrect connack");
}, 30_000);

test("Aria runs without aria-seq: the suite compares each PUBLISH byte for byte", () => {
  const argv = ariaBrokerArgv("/x/aria").join(" ");
  expect(argv).toContain("--mqtt-aria-seq off");
});

test("failures MQTT 5 allows are told apart: a Reason String, a CONNACK or DISCONNECT before a close", () => {
  const disconnect = (rl: number, code: number) =>
    `FAIL: Received incorrect disconnect. Received: DISCONNECT, rl=${rl}, reason_code=${code} ` +
    `Expected: DISCONNECT, rl=1, reason_code=130`;
  expect(allowedDifference(disconnect(32, 130), "5")).toContain("Reason String");
  // Another reason code, or the same short packet, is a real difference.
  expect(allowedDifference(disconnect(32, 129), "5")).toBe("");
  expect(allowedDifference(disconnect(1, 130), "5")).toBe("");
  const connack =
    "FAIL: Received incorrect connack. Received (not decoded, len=1): b' ' Expected: ";
  expect(allowedDifference(connack, "5")).toContain("MQTT 5 allows either");
  // MQTT 3.1.1 allows no CONNACK for a malformed CONNECT.
  expect(allowedDifference(connack, "4")).toBe("");
  const early =
    "FAIL: Received incorrect pingreq. Received (not decoded, len=1): b'\\xe0' Expected: ";
  expect(allowedDifference(early, "5")).toContain("DISCONNECT");
  expect(allowedDifference(early, "4")).toBe("");
  const puback = (code: number) =>
    `FAIL: Received incorrect puback. Received: PUBACK, rl=2, mid=19 Expected: PUBACK, rl=3, mid=19, reason_code=${code}`;
  expect(allowedDifference(puback(16), "5")).toContain("0x10");
  expect(allowedDifference(puback(135), "5")).toBe("");
  // A CONNACK refusal with the code expected and a property length (Aria's Reason String).
  const refusal = (got: string) =>
    "FAIL: Received incorrect connack. Received (not decoded, len=5): " +
    `${got} Expected (not decoded, len=5): b' \\x03\\x00\\x8c\\x00'`;
  expect(allowedDifference(refusal("b'  \\x00\\x8c\\x1d'"), "5")).toContain("Reason String");
  expect(allowedDifference(refusal("b'  \\x00\\x87\\x1d'"), "5")).toBe("");
});

test("a Python bytes literal as the suite prints it reads back to its bytes", () => {
  expect(pythonBytes("b' \\x03\\x00\\x8c\\x00'")).toEqual([0x20, 3, 0, 0x8c, 0]);
  expect(pythonBytes(`b"a'\\n\\\\"`)).toEqual([0x61, 0x27, 10, 0x5c]);
});
