/**
 * The MQTT door of the binary (`aria serve --mqtt-port`) with mqtt.js (npm `mqtt`): connect,
 * publish and subscribe at QoS 0, 1 and 2 on MQTT 3.1.1 and 5.0; native ↔ MQTT both ways with
 * identical payload bytes; a persistent session whose client is killed gets what it missed;
 * `aria-from` and `aria-seq`; a will on an abrupt close; keep alive; a second CONNECT and
 * malformed bytes end only their own connection.
 */
import { expect, test } from "bun:test";
import { Socket } from "node:net";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import type { Message } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { makeTempDir, serverForFile, startAria, waitFor } from "./fixtures/e2e_server.ts";

const server = serverForFile({ fsync: "never", args: ["--mqtt-port", "0"] });
/** The mqtt:// URL the server printed (its port picked by the system). */
const mqttUrl = () => server().mqttUrl as string;

const clients = new Set<MqttClient>();
async function mqttClient(options: IClientOptions): Promise<MqttClient> {
  const client = await mqtt.connectAsync(mqttUrl(), {
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...options,
  });
  clients.add(client);
  return client;
}

/** Messages a client receives, as [topic, payload bytes, qos, user properties]. */
function collect(client: MqttClient) {
  const got: { topic: string; payload: Buffer; qos: number; user?: Record<string, unknown> }[] = [];
  client.on("message", (topic, payload, packet) =>
    got.push({ topic, payload, qos: packet.qos, user: packet.properties?.userProperties }),
  );
  return got;
}

test("QoS 0, 1 and 2 on 3.1.1 and 5.0: published and delivered, bytes intact", async () => {
  for (const protocolVersion of [4, 5] as const) {
    const sub = await mqttClient({ protocolVersion, clientId: `sub${protocolVersion}` });
    const got = collect(sub);
    // Topics of their own per version: the newest message of a topic is retained for later ones.
    const e = `e${protocolVersion}`;
    const f = `f${protocolVersion}`;
    const granted = await sub.subscribeAsync({ [`${e}/+/x`]: { qos: 2 }, [`${f}/#`]: { qos: 1 } });
    expect(granted.map((g) => g.qos)).toEqual([2, 1]);
    const pub = await mqttClient({ protocolVersion, clientId: `pub${protocolVersion}` });
    for (const qos of [0, 1, 2] as const)
      await pub.publishAsync(`${e}/${qos}/x`, Buffer.from([qos, 0, 255, 10]), { qos });
    await pub.publishAsync(f, "under f", { qos: 1 });
    await waitFor(async () => got.length === 4, "4 messages", 5000);
    // mqtt.js hands a QoS 2 message over at PUBREL, a round trip later: compare in topic order.
    const sorted = [...got].sort((a, b) => a.topic.localeCompare(b.topic));
    // Each at the lower of its publish QoS and the granted 2 [MQTT-3.8.4-8].
    expect(sorted.map((m) => [m.topic, [...m.payload], m.qos])).toEqual([
      [`${e}/0/x`, [0, 0, 255, 10], 0],
      [`${e}/1/x`, [1, 0, 255, 10], 1],
      [`${e}/2/x`, [2, 0, 255, 10], 2],
      [f, [...Buffer.from("under f")], 1],
    ]);
    if (protocolVersion === 5)
      expect(got.every((m) => m.user?.["aria-seq"] !== undefined)).toBe(true);
    await pub.endAsync();
    await sub.endAsync();
  }
});

test("native ↔ MQTT both ways with identical payload bytes", async () => {
  const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
  const native = await connect(server().tcpUrl);
  const nativeGot: Message[] = [];
  const subscription = native.subscribe(["both/**"], { from: "live" });
  void (async () => {
    for await (const m of subscription as AsyncIterable<Message>)
      nativeGot.push({ ...m, payload: m.payload.slice() });
  })();
  await subscription.caughtUpAt;
  const client = await mqttClient({ protocolVersion: 5, clientId: "both" });
  const got = collect(client);
  await client.subscribeAsync("both/#", { qos: 1 });
  await native.publish("both/from-native", bytes);
  await client.publishAsync("both/from-mqtt", Buffer.from(bytes), { qos: 1 });
  await waitFor(async () => got.length === 2 && nativeGot.length === 2, "both ways", 5000);
  for (const m of got) expect([...m.payload]).toEqual([...bytes]);
  for (const m of nativeGot) expect([...m.payload]).toEqual([...bytes]);
  expect(got.map((m) => [m.topic, m.user?.["aria-seq"]])).toEqual(
    nativeGot.map((m) => [m.topic, String(m.seq)]),
  );
  await client.endAsync();
  await native.close();
});

test("a persistent session whose client was killed gets what it missed, in order", async () => {
  const options = {
    protocolVersion: 5 as const,
    clientId: "keeper",
    clean: false,
    properties: { sessionExpiryInterval: 600 },
  };
  const first = await mqttClient(options);
  await first.subscribeAsync("keep/#", { qos: 1 });
  first.stream.destroy(); // killed: no DISCONNECT
  clients.delete(first);
  const pub = await mqttClient({ protocolVersion: 4, clientId: "keep-pub" });
  for (let i = 0; i < 50; i++) await pub.publishAsync("keep/x", `m${i}`, { qos: 1 });
  const again = mqtt.connect(mqttUrl(), { ...options, reconnectPeriod: 0 });
  clients.add(again);
  const got = collect(again);
  await waitFor(async () => got.length >= 50, "50 missed messages", 10_000);
  expect(got.map((m) => m.payload.toString())).toEqual(
    Array.from({ length: 50 }, (_, i) => `m${i}`),
  );
  await pub.endAsync();
  await again.endAsync();
});

test("aria-from earliest replays; a bad aria-from is refused in SUBACK", async () => {
  const pub = await mqttClient({ protocolVersion: 5, clientId: "from-pub" });
  for (let i = 0; i < 3; i++) await pub.publishAsync("from/x", `old${i}`, { qos: 1 });
  const sub = await mqttClient({ protocolVersion: 5, clientId: "from-sub" });
  const got = collect(sub);
  await sub.subscribeAsync("from/#", {
    qos: 0,
    properties: { userProperties: { "aria-from": "earliest" } },
  });
  await pub.publishAsync("from/x", "new", { qos: 1 });
  await waitFor(async () => got.length === 4, "replay then live", 5000);
  expect(got.map((m) => m.payload.toString())).toEqual(["old0", "old1", "old2", "new"]);
  const seqs = got.map((m) => Number(m.user?.["aria-seq"]));
  expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  // mqtt.js rejects a SUBACK whose code is a failure, with the code.
  const refused = await sub
    .subscribeAsync("from/y", {
      qos: 0,
      properties: { userProperties: { "aria-from": "last tuesday" } },
    })
    .then(
      (granted) => granted.map((g) => g.qos),
      (error: { code?: number; message: string }) => error.code ?? error.message,
    );
  expect(refused).toEqual("Subscribe error: Implementation specific error"); // 0x83
  await pub.endAsync();
  await sub.endAsync();
});

test("a will is published when its client goes away without DISCONNECT", async () => {
  const watcher = await mqttClient({ protocolVersion: 5, clientId: "watcher" });
  const got = collect(watcher);
  await watcher.subscribeAsync("wills/#", { qos: 1 });
  const doomed = await mqttClient({
    protocolVersion: 4,
    clientId: "doomed",
    will: { topic: "wills/doomed", payload: Buffer.from("gone"), qos: 1, retain: false },
  });
  doomed.stream.destroy();
  clients.delete(doomed);
  await waitFor(async () => got.length === 1, "the will", 5000);
  expect(got[0].payload.toString()).toBe("gone");
  await watcher.endAsync();
});

test("retained: a SUBSCRIBE gets each topic's newest message with the retain flag; an empty one clears", async () => {
  const pub = await mqttClient({ protocolVersion: 4, clientId: "ret-pub" });
  await pub.publishAsync("ret/a", "old", { qos: 1, retain: true });
  await pub.publishAsync("ret/a", "new", { qos: 1, retain: true });
  await pub.publishAsync("ret/b", "b", { qos: 1 });
  await pub.publishAsync("ret/c", "c", { qos: 1, retain: true });
  await pub.publishAsync("ret/c", "", { qos: 1, retain: true });
  const sub = await mqttClient({ protocolVersion: 5, clientId: "ret-sub" });
  const got: string[] = [];
  sub.on("message", (topic, payload, packet) =>
    got.push(`${topic}=${payload.toString()}${packet.retain ? " retained" : ""}`),
  );
  await sub.subscribeAsync("ret/#", { qos: 1 });
  await waitFor(async () => got.length === 2, "2 retained messages", 5000);
  await pub.publishAsync("ret/a", "live", { qos: 1 });
  await waitFor(async () => got.length === 3, "a live message", 5000);
  expect(got).toEqual(["ret/a=new retained", "ret/b=b retained", "ret/a=live"]);
  await pub.endAsync();
  await sub.endAsync();
});

/** A raw TCP client: bytes in, everything received, and whether the server closed. */
async function rawClient() {
  const socket = new Socket();
  const received: number[] = [];
  let closed = false;
  socket.on("data", (chunk: Buffer) => received.push(...chunk));
  socket.on("close", () => {
    closed = true;
  });
  socket.on("error", () => {});
  await new Promise<void>((resolve) =>
    socket.connect(Number(new globalThis.URL(mqttUrl()).port), "127.0.0.1", resolve),
  );
  return { socket, received, closed: () => closed };
}

// CONNECT, MQTT 5, client id "k", keep alive 1 s, clean start.
const CONNECT_V5_KEEPALIVE_1 = [0x10, 14, 0, 4, 77, 81, 84, 84, 5, 2, 0, 1, 0, 0, 1, 107];

test("keep alive: a silent client is disconnected (0x8D) after 1.5 times it", async () => {
  const raw = await rawClient();
  raw.socket.write(Uint8Array.from(CONNECT_V5_KEEPALIVE_1));
  const started = Date.now();
  await waitFor(async () => raw.closed(), "the server closing a silent client", 6000);
  const seconds = (Date.now() - started) / 1000;
  expect(seconds).toBeGreaterThanOrEqual(1.4);
  expect(raw.received[0]).toBe(0x20); // CONNACK
  // DISCONNECT (0xe0) with reason 0x8D keep alive timeout.
  const at = raw.received.indexOf(0xe0, 2);
  expect(raw.received[at + 2]).toBe(0x8d);
});

test("a second CONNECT (0x82) and malformed bytes end only their connection", async () => {
  const twice = await rawClient();
  twice.socket.write(Uint8Array.from([...CONNECT_V5_KEEPALIVE_1, ...CONNECT_V5_KEEPALIVE_1]));
  await waitFor(async () => twice.closed(), "a second CONNECT closing", 5000);
  const at = twice.received.indexOf(0xe0, 2);
  expect(twice.received[at + 2]).toBe(0x82);
  const garbage = await rawClient();
  garbage.socket.write(Uint8Array.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3]));
  await waitFor(async () => garbage.closed(), "garbage closing", 5000);
  const before = await rawClient();
  before.socket.write(Uint8Array.from([0x30, 3, 0, 1, 97])); // PUBLISH before CONNECT
  await waitFor(async () => before.closed(), "PUBLISH before CONNECT closing", 5000);
  expect(before.received).toEqual([]);
  // The server goes on serving.
  const fine = await mqttClient({ protocolVersion: 5, clientId: "fine" });
  await fine.publishAsync("still/here", "yes", { qos: 1 });
  await fine.endAsync();
  expect(server().alive()).toBe(true);
  for (const client of clients) client.end(true);
  await waitFor(
    async () => (await server().stats()).broker.connections === 0,
    "every MQTT connection's broker session gone",
    5000,
  );
});

test("a persistent session outlives kill -9 of the server: its client gets what it had not acknowledged and what came after", async () => {
  const dataDir = makeTempDir("aria-mqtt-restart-");
  const args = ["--mqtt-port", "0"];
  let aria = await startAria({ dataDir, fsync: "always", args });
  try {
    const url = aria.mqttUrl as string;
    const options = {
      protocolVersion: 5 as const,
      clientId: "survivor",
      clean: false,
      reconnectPeriod: 0,
      properties: { sessionExpiryInterval: 600 },
    };
    const first = await mqtt.connectAsync(url, options);
    const firstGot = collect(first);
    await first.subscribeAsync("crash/#", { qos: 1 });
    const pub = await mqtt.connectAsync(url, { protocolVersion: 4, reconnectPeriod: 0 });
    for (let i = 0; i < 20; i++) await pub.publishAsync("crash/x", `m${i}`, { qos: 1 });
    await waitFor(async () => firstGot.length === 20, "20 live messages", 5000);
    // Acknowledgements leave mqtt.js at once; give them a moment to be written (fsync always).
    await new Promise((resolve) => setTimeout(resolve, 500));
    first.stream.destroy();
    pub.stream.destroy();
    await aria.kill9();
    // The restarted server listens on another port: the session is the client id's, not the port's.
    aria = await startAria({ dataDir, fsync: "always", args });
    const url2 = aria.mqttUrl as string;
    const pub2 = await mqtt.connectAsync(url2, { protocolVersion: 5, reconnectPeriod: 0 });
    for (let i = 20; i < 30; i++) await pub2.publishAsync("crash/x", `m${i}`, { qos: 1 });
    const again = mqtt.connect(url2, options);
    const got = collect(again);
    const connack = await new Promise<{ sessionPresent: boolean }>((resolve) =>
      again.once("connect", resolve),
    );
    expect(connack.sessionPresent).toBe(true);
    await waitFor(async () => got.length >= 10, "the messages published after the crash", 5000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Everything acknowledged before the crash stays acknowledged; nothing is missing.
    expect(got.map((m) => m.payload.toString())).toEqual(
      Array.from({ length: 10 }, (_, i) => `m${i + 20}`),
    );
    again.end(true);
    pub2.end(true);
  } finally {
    await aria.stop();
  }
});

test("MQTT over WebSocket at /mqtt of the admin port; another Host is refused", async () => {
  const wsUrl = `${server().adminUrl.replace(/^http/, "ws")}/mqtt`;
  const client = await mqtt.connectAsync(wsUrl, {
    protocolVersion: 5,
    clientId: "ws",
    reconnectPeriod: 0,
  });
  const got = collect(client);
  await client.subscribeAsync("ws/#", { qos: 1 });
  await client.publishAsync("ws/x", Buffer.from([0, 1, 2, 255]), { qos: 1 });
  await waitFor(async () => got.length === 1, "a message over WebSocket", 5000);
  expect([...got[0].payload]).toEqual([0, 1, 2, 255]);
  await client.endAsync();
  // A page that rebinds its DNS name to this machine sends another Host: refused.
  const { port } = new globalThis.URL(server().adminUrl);
  const raw = new Socket();
  const answer = await new Promise<string>((resolve) => {
    let text = "";
    raw.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("\r\n")) resolve(text);
    });
    raw.connect(Number(port), "127.0.0.1", () =>
      raw.write(
        "GET /mqtt HTTP/1.1\r\nHost: evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
          "Sec-WebSocket-Protocol: mqtt\r\n\r\n",
      ),
    );
  });
  raw.destroy();
  expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 403 Forbidden");
});
