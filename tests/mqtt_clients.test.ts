/**
 * Aria's MQTT door (`aria serve --mqtt-port PORT`) driven by clients no one here wrote, against
 * the binary: mosquitto_pub → Aria → mosquitto_sub (MQTT 3.1.1 and 5, QoS 0/1/2, binary payloads);
 * paho's Python client (Debian's python3-paho-mqtt, run by /usr/bin/python3) publishing and
 * subscribing at QoS 0, 1 and 2 on 3.1.1 and 5; a persistent session (clean session off / clean
 * start off with a session expiry) that is offline while messages are published and gets every
 * one of them, in order, when it returns; and Aria's native client ↔ an MQTT client both ways with
 * identical payload bytes.
 *
 * Without the door these tests fail (the server does not start, or nothing answers on the MQTT
 * port): they never skip.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Message } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { SYSTEM_REQUIREMENTS } from "../scripts/test_setup.ts";
import { makeTempDir, serverForFile, waitFor } from "./fixtures/e2e_server.ts";

const PYTHON = "/usr/bin/python3";
const MOSQUITTO_PUB = "/usr/bin/mosquitto_pub";
const MOSQUITTO_SUB = "/usr/bin/mosquitto_sub";

const server = serverForFile({ fsync: "never", args: ["--mqtt-port", "0"] });
let MQTT_PORT = 0;

beforeAll(() => {
  // The port the system picked, from the mqtt:// line the server printed.
  MQTT_PORT = Number(new URL(server().mqttUrl as string).port);
});

const children = new Set<number>();
afterAll(() => {
  for (const pid of children)
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // ended already
    }
});

/** What a finished client process gave. */
interface Run {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/** A client process: its output so far, and its end (killed after `timeoutMs`). */
function spawnClient(argv: string[], timeoutMs = 20_000) {
  const child = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  children.add(child.pid);
  let stdout = "";
  let stderr = "";
  const decoder = new TextDecoder();
  const read = async (stream: ReadableStream<Uint8Array>, to: (text: string) => void) => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>)
      to(decoder.decode(chunk));
  };
  const reading = Promise.all([
    read(child.stdout, (text) => (stdout += text)),
    read(child.stderr, (text) => (stderr += text)),
  ]);
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const done: Promise<Run> = (async () => {
    const exitCode = await child.exited;
    await reading;
    clearTimeout(timer);
    children.delete(child.pid);
    return { exitCode: child.signalCode === null ? exitCode : null, stdout, stderr };
  })();
  return { stdout: () => stdout, done };
}

/** Runs a client process to its end. */
async function runClient(argv: string[], timeoutMs = 20_000): Promise<Run> {
  return await spawnClient(argv, timeoutMs).done;
}

/** Every byte value, then a few more: a payload no text encoding keeps by accident. */
const BINARY = new Uint8Array([...Array.from({ length: 256 }, (_, i) => i), 0, 0xff, 0x0a, 0x0d]);
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

test("the MQTT clients the tests run are among npm test's set-up packages", () => {
  const paths = SYSTEM_REQUIREMENTS.map((requirement) => requirement.path);
  expect(paths).toEqual(expect.arrayContaining([MOSQUITTO_PUB, "/usr/sbin/mosquitto"]));
  expect(paths).toContain("/usr/lib/python3/dist-packages/paho/mqtt/client.py");
});

/**
 * mosquitto_sub on `filter` (debug on, to see its SUBACK), printing `topic qos hex-payload` per
 * message, ending after `count` messages.
 */
async function mosquittoSub(options: {
  filter: string;
  count: number;
  version: string;
  qos: number;
}) {
  // Line-buffered: its debug lines (the SUBACK) reach the pipe as they are printed.
  const sub = spawnClient([
    "/usr/bin/stdbuf",
    "-oL",
    MOSQUITTO_SUB,
    ...["-h", "127.0.0.1", "-p", String(MQTT_PORT), "-V", options.version],
    ...["-t", options.filter, "-q", String(options.qos), "-C", String(options.count)],
    ...["-F", "=> %t %q %x", "-W", "15", "-d"],
  ]);
  await waitFor(() => sub.stdout().includes("SUBACK"), "mosquitto_sub's SUBACK", 10_000);
  return {
    done: async () => {
      const run = await sub.done;
      const lines = run.stdout.split("\n").filter((line) => line.startsWith("=> "));
      return { run, messages: lines.map((line) => line.slice(3).split(" ")) };
    },
  };
}

/**
 * mosquitto_pub at QoS 0, 1, 2 (and a binary payload at QoS 1) to `base/qN`, mosquitto_sub on
 * `base/#` at QoS 2: what it printed, sorted (MQTT orders messages per topic and QoS, not across
 * them: mosquitto_sub prints a QoS 2 message at PUBREL, after a later QoS 1 one, on mosquitto
 * too; the order within one topic and QoS is the paho tests' check).
 */
async function mosquittoRoundTrip(version: string, base: string): Promise<string[][]> {
  const dir = makeTempDir("aria-mqtt-clients-");
  const file = join(dir, "binary.bin");
  writeFileSync(file, BINARY);
  const sub = await mosquittoSub({ filter: `${base}/#`, count: 4, version, qos: 2 });
  for (const [qos, args] of [
    [0, ["-m", "qos zero"]],
    [1, ["-m", "qos one"]],
    [2, ["-m", "qos two"]],
    [1, ["-f", file]],
  ] as const) {
    const run = await runClient([
      MOSQUITTO_PUB,
      ...["-h", "127.0.0.1", "-p", String(MQTT_PORT), "-V", version],
      ...["-t", `${base}/q${qos}`, "-q", String(qos), ...args],
    ]);
    expect({ qos, ...run }).toMatchObject({ qos, exitCode: 0 });
  }
  const { run, messages } = await sub.done();
  expect({ exitCode: run.exitCode, stderr: run.stderr }).toEqual({ exitCode: 0, stderr: "" });
  return messages.sort((a, b) => a.join(" ").localeCompare(b.join(" ")));
}

const text = (value: string) => hex(new TextEncoder().encode(value));

for (const version of ["mqttv31", "mqttv311", "mqttv5"])
  test(`mosquitto_pub → Aria → mosquitto_sub (${version}): QoS 0, 1, 2 publishes and binary payload bytes arrive intact`, async () => {
    const base = `clients/mosquitto/${version}`;
    const messages = await mosquittoRoundTrip(version, base);
    expect(messages.map(([topic, , payload]) => [topic, payload])).toEqual([
      [`${base}/q0`, text("qos zero")],
      [`${base}/q1`, hex(BINARY)],
      [`${base}/q1`, text("qos one")],
      [`${base}/q2`, text("qos two")],
    ]);
  }, 30_000);

// MQTT 3.1.1 [MQTT-3.8.4-6] / 5.0 [MQTT-3.8.4-8]: a subscriber gets the lower of the publish QoS
// and the granted one (the door stores the publish QoS as `aria-qos`), as mosquitto does.
test("a subscriber granted QoS 2 gets each message at the QoS it was published with (the minimum)", async () => {
  const base = "clients/mosquitto/min-qos";
  const messages = await mosquittoRoundTrip("mqttv5", base);
  expect(messages.map(([topic, qos]) => [topic, qos])).toEqual([
    [`${base}/q0`, "0"],
    [`${base}/q1`, "1"],
    [`${base}/q1`, "1"],
    [`${base}/q2`, "2"],
  ]);
}, 30_000);

/**
 * paho (python3-paho-mqtt 1.6) as the test's MQTT client. Modes:
 *   pubsub PORT VERSION QOS COUNT TOPIC: a subscriber at QOS, then a publisher sending COUNT
 *     messages at QOS; prints what the subscriber got.
 *   persistent PORT VERSION TOPIC COUNT ID: a persistent session subscribes at QoS 1 and leaves;
 *     COUNT messages are published while it is away; it returns (no new SUBSCRIBE) and prints
 *     the session-present flag and what it got.
 * Prints one JSON object: {"sessionPresent": bool|null, "received": [[topic, qos, hex], ...]}.
 */
const PAHO = `
import json, sys, threading, time
import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

mode, port, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PROTOCOL = mqtt.MQTTv5 if version == 5 else mqtt.MQTTv311
DEADLINE = 15.0

def client(client_id, persistent):
    if version == 5:
        c = mqtt.Client(client_id=client_id, protocol=PROTOCOL)
    else:
        c = mqtt.Client(client_id=client_id, protocol=PROTOCOL, clean_session=not persistent)
    state = {"connected": threading.Event(), "subscribed": threading.Event(),
             "session_present": None, "rc": None, "received": [], "lock": threading.Lock()}
    def on_connect(c, userdata, flags, rc, properties=None):
        state["session_present"] = bool(flags.get("session present"))
        state["rc"] = int(rc) if not hasattr(rc, "value") else rc.value
        state["connected"].set()
    def on_subscribe(c, userdata, mid, granted, properties=None):
        state["subscribed"].set()
    def on_message(c, userdata, message):
        with state["lock"]:
            state["received"].append([message.topic, message.qos, message.payload.hex()])
    c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
    return c, state

def connect(c, state, persistent):
    if version == 5:
        props = Properties(PacketTypes.CONNECT)
        if persistent:
            props.SessionExpiryInterval = 300
        c.connect("127.0.0.1", port, keepalive=30, clean_start=not persistent, properties=props)
    else:
        c.connect("127.0.0.1", port, keepalive=30)
    c.loop_start()
    if not state["connected"].wait(DEADLINE):
        sys.exit("no CONNACK within %ss" % DEADLINE)
    if state["rc"] != 0:
        sys.exit("CONNACK refused: %s" % state["rc"])

def wait_for(state, count):
    end = time.time() + DEADLINE
    while time.time() < end:
        with state["lock"]:
            if len(state["received"]) >= count:
                return
        time.sleep(0.01)

def publish_all(topic, qos, payloads):
    pub, pstate = client("paho-pub-%d" % time.time_ns(), False)
    connect(pub, pstate, False)
    infos = [pub.publish(topic, payload, qos=qos) for payload in payloads]
    for info in infos:
        info.wait_for_publish(DEADLINE)
        if not info.is_published():
            sys.exit("publish %d not acknowledged" % info.mid)
    pub.disconnect()
    pub.loop_stop()

def payloads(count):
    return [("%d:" % i).encode() + bytes([(i + j) % 256 for j in range(i % 300)]) for i in range(count)]

if mode == "pubsub":
    qos, count, topic = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    sub, state = client("paho-sub-%d" % time.time_ns(), False)
    connect(sub, state, False)
    sub.subscribe(topic, qos=qos)
    if not state["subscribed"].wait(DEADLINE):
        sys.exit("no SUBACK")
    publish_all(topic, qos, payloads(count))
    wait_for(state, count)
    sub.disconnect()
    sub.loop_stop()
    print(json.dumps({"sessionPresent": None, "received": state["received"]}))
elif mode == "persistent":
    topic, count, client_id = sys.argv[4], int(sys.argv[5]), sys.argv[6]
    sub, state = client(client_id, True)
    connect(sub, state, True)
    sub.subscribe(topic, qos=1)
    if not state["subscribed"].wait(DEADLINE):
        sys.exit("no SUBACK")
    sub.disconnect()
    sub.loop_stop()
    publish_all(topic, 1, payloads(count))
    back, state = client(client_id, True)
    connect(back, state, True)
    wait_for(state, count)
    time.sleep(0.2)
    back.disconnect()
    back.loop_stop()
    print(json.dumps({"sessionPresent": state["session_present"], "received": state["received"]}))
`;

/** What the paho program printed, or why it did not. */
async function paho(args: (string | number)[]): Promise<{
  sessionPresent: boolean | null;
  received: [string, number, string][];
}> {
  const run = await runClient([PYTHON, "-c", PAHO, ...args.map(String)], 40_000);
  if (run.exitCode !== 0)
    throw new Error(`paho ${args.join(" ")} exited ${run.exitCode}: ${run.stderr}${run.stdout}`);
  return JSON.parse(run.stdout);
}

/** The payloads the paho program sends, in hex, as the test's own reading of them. */
function pahoPayloads(count: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    const body = Array.from({ length: i % 300 }, (_, j) => (i + j) % 256);
    return hex(new Uint8Array([...new TextEncoder().encode(`${i}:`), ...body]));
  });
}

for (const version of [4, 5])
  for (const qos of [0, 1, 2])
    test(`paho (MQTT ${version === 5 ? "5" : "3.1.1"}) publishes and subscribes at QoS ${qos}: every message, in order, bytes intact`, async () => {
      const count = 200;
      const topic = `clients/paho/v${version}/q${qos}`;
      const got = await paho(["pubsub", MQTT_PORT, version, qos, count, topic]);
      expect(got.received.length).toBe(count);
      expect(got.received).toEqual(
        pahoPayloads(count).map((payload) => [topic, qos, payload] as [string, number, string]),
      );
    }, 45_000);

for (const version of [4, 5])
  test(`a persistent paho session (MQTT ${version === 5 ? "5, clean start off, session expiry 300 s" : "3.1.1, clean session off"}) offline while 2,000 messages (more than mosquitto's default 1,000 queued) are published gets all of them in order when it returns`, async () => {
    const count = 2000;
    const topic = `clients/persistent/v${version}`;
    const got = await paho(["persistent", MQTT_PORT, version, topic, count, `persist-v${version}`]);
    expect(got.sessionPresent).toBe(true);
    expect(got.received.length).toBe(count);
    expect(got.received).toEqual(
      pahoPayloads(count).map((payload) => [topic, 1, payload] as [string, number, string]),
    );
  }, 45_000);

test("native client → MQTT (mosquitto_sub, 3.1.1 and 5): identical payload bytes", async () => {
  const topic = "clients/native/to-mqtt";
  const subs = [
    await mosquittoSub({ filter: topic, count: 2, version: "mqttv311", qos: 1 }),
    await mosquittoSub({ filter: topic, count: 2, version: "mqttv5", qos: 1 }),
  ];
  const native = await connect(server().tcpUrl, { clientName: "native-publisher" });
  try {
    await native.publish(topic, BINARY);
    await native.publish(topic, "text from the native client");
  } finally {
    await native.close();
  }
  for (const sub of subs) {
    const { run, messages } = await sub.done();
    expect(run.exitCode).toBe(0);
    expect(messages.map(([t, , payload]) => [t, payload])).toEqual([
      [topic, hex(BINARY)],
      [topic, hex(new TextEncoder().encode("text from the native client"))],
    ]);
  }
}, 30_000);

test("MQTT (mosquitto_pub, 3.1.1 and 5) → native client: identical payload bytes", async () => {
  const topic = "clients/mqtt/to-native";
  const dir = makeTempDir("aria-mqtt-clients-");
  const file = join(dir, "binary.bin");
  writeFileSync(file, BINARY);
  const native = await connect(server().tcpUrl, { clientName: "native-subscriber" });
  const got: { topic: string; payload: string }[] = [];
  try {
    const subscription = native.subscribe([topic]);
    void (async () => {
      for await (const message of subscription as AsyncIterable<Message>)
        got.push({ topic: message.topic, payload: hex(message.payload) });
    })();
    await subscription.caughtUpAt;
    for (const version of ["mqttv311", "mqttv5"]) {
      const run = await runClient([
        MOSQUITTO_PUB,
        ...["-h", "127.0.0.1", "-p", String(MQTT_PORT), "-V", version],
        ...["-t", topic, "-q", "1", "-f", file],
      ]);
      expect(run.exitCode).toBe(0);
    }
    await waitFor(() => got.length >= 2, "two messages at the native subscriber", 10_000);
    expect(got).toEqual([
      { topic, payload: hex(BINARY) },
      { topic, payload: hex(BINARY) },
    ]);
  } finally {
    await native.close();
  }
}, 30_000);
