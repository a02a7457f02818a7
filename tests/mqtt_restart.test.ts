/**
 * Persistent MQTT sessions across `kill -9` of the compiled binary (issue 30): QoS 1 and 2
 * messages in flight to a client come again after the restart with DUP and their packet ids, and
 * PUBREL again for one the client PUBRECed; a QoS 2 PUBLISH resent after the restart gets PUBREC
 * and is stored once; a will waiting for its delay fires after the restart at its time. Publisher,
 * will client and watcher are mqtt.js; the client whose messages stay in flight is a raw socket
 * speaking the door's own codec, so it can leave them unacknowledged and see DUP and ids.
 */
import { afterAll, expect, test } from "bun:test";
import { Socket } from "node:net";
import mqtt, { type MqttClient } from "mqtt";
import { MqttDecoder } from "../src/mqtt/codec.ts";
import { encodePacket } from "../src/mqtt/codec_encode.ts";
import type { Packet } from "../src/mqtt/packets.ts";
import { cleanupAll, makeTempDir, startAria, waitFor } from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const bytesOf = (s: string) => new TextEncoder().encode(s);

/** A raw MQTT 5 client: packets out through the codec, packets in decoded into `received`. */
async function rawClient(url: string) {
  const { hostname, port } = new URL(url);
  const socket = new Socket();
  const decoder = new MqttDecoder({ role: "client", protocolVersion: 5 });
  const received: Packet[] = [];
  socket.on("data", (chunk: Buffer) => {
    decoder.push(new Uint8Array(chunk));
    for (let r = decoder.next(); r !== null; r = decoder.next()) if (r.ok) received.push(r.packet);
  });
  socket.on("error", () => {});
  await new Promise<void>((resolve) => socket.connect(Number(port), hostname, resolve));
  return {
    received,
    send: (packet: Packet) => socket.write(encodePacket(packet, 5)),
    close: () => socket.destroy(),
  };
}

type Raw = Awaited<ReturnType<typeof rawClient>>;
const connectPacket = (clientId: string): Packet => ({
  type: "connect",
  protocolVersion: 5,
  clientId,
  cleanStart: false,
  keepAlive: 0,
  properties: { sessionExpiryInterval: 3600 },
});
const publishes = (raw: Raw) =>
  raw.received.filter((p): p is Packet & { type: "publish" } => p.type === "publish");

async function mqttJs(url: string, options: mqtt.IClientOptions = {}): Promise<MqttClient> {
  return mqtt.connectAsync(url, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...options,
  });
}

test("kill -9 with QoS 1/2 in flight, an inbound QoS 2 awaiting PUBREL and a delayed will: the session resumes whole", async () => {
  const dataDir = makeTempDir();
  const first = await startAria({ dataDir, fsync: "always", args: ["--mqtt-port", "0"] });
  const url1 = first.mqttUrl as string;
  // The subscriber: QoS 2 granted, acknowledges nothing yet.
  const sub = await rawClient(url1);
  sub.send(connectPacket("restart-sub"));
  sub.send({
    type: "subscribe",
    packetId: 1,
    subscriptions: [
      { filter: "rs/#", qos: 2, noLocal: false, retainAsPublished: false, retainHandling: 2 },
    ],
    properties: {},
  });
  await waitFor(() => sub.received.some((p) => p.type === "suback"), "SUBACK", 5000);
  const pub = await mqttJs(url1);
  await pub.publishAsync("rs/a", "one", { qos: 1 });
  await pub.publishAsync("rs/a", "two", { qos: 2 });
  await pub.publishAsync("rs/b", "three", { qos: 2 });
  pub.end(true);
  await waitFor(() => publishes(sub).length === 3, "three PUBLISHes", 5000);
  const sent = publishes(sub).map((p) => [text(p.payload), p.packetId, p.qos]);
  // "three" received: PUBREL comes, PUBCOMP is not sent.
  sub.send({ type: "pubrec", packetId: sent[2][1] as number, reasonCode: 0, properties: {} });
  await waitFor(() => sub.received.some((p) => p.type === "pubrel"), "PUBREL", 5000);
  // A raw publisher's QoS 2 PUBLISH gets PUBREC; it never sends PUBREL.
  const q2 = await rawClient(url1);
  q2.send(connectPacket("restart-q2"));
  await waitFor(() => q2.received.some((p) => p.type === "connack"), "CONNACK", 5000);
  q2.send({
    type: "publish",
    topic: "rs-in/x",
    payload: bytesOf("exactly-once"),
    qos: 2,
    retain: false,
    dup: false,
    packetId: 77,
    properties: {},
  });
  await waitFor(() => q2.received.some((p) => p.type === "pubrec"), "PUBREC", 5000);
  // A will with a 4 s delay, its connection dropped without DISCONNECT.
  const willClient = await mqttJs(url1, {
    clientId: "restart-will",
    clean: false,
    properties: { sessionExpiryInterval: 600 },
    will: {
      topic: "rs-will/gone",
      payload: Buffer.from("bye"),
      qos: 1,
      retain: false,
      properties: { willDelayInterval: 4 },
    },
  });
  willClient.stream.destroy();
  const droppedAt = Date.now();
  await Bun.sleep(300);
  await first.kill9();
  sub.close();
  q2.close();

  const second = await startAria({ dataDir, fsync: "always", args: ["--mqtt-port", "0"] });
  const url2 = second.mqttUrl as string;
  const watcher = await mqttJs(url2);
  const wills: number[] = [];
  watcher.on("message", (topic) => {
    if (topic === "rs-will/gone") wills.push(Date.now());
  });
  await watcher.subscribeAsync("rs-will/#", { qos: 1, rh: 2 });
  // The subscriber returns: PUBREL again, then its two unacknowledged PUBLISHes, DUP, same ids.
  const again = await rawClient(url2);
  again.send(connectPacket("restart-sub"));
  await waitFor(() => publishes(again).length >= 2, "two PUBLISHes again", 10_000);
  const connack = again.received.find((p) => p.type === "connack");
  const resumed = again.received
    .filter((p) => p.type === "publish" || p.type === "pubrel")
    .map((p) =>
      p.type === "publish"
        ? [text(p.payload), p.packetId, p.qos, p.dup]
        : ["pubrel", p.type === "pubrel" ? p.packetId : 0],
    );
  // The QoS 2 publisher resends its PUBLISH (DUP): PUBREC, and it is stored once.
  const q2again = await rawClient(url2);
  q2again.send(connectPacket("restart-q2"));
  q2again.send({
    type: "publish",
    topic: "rs-in/x",
    payload: bytesOf("exactly-once"),
    qos: 2,
    retain: false,
    dup: true,
    packetId: 77,
    properties: {},
  });
  await waitFor(
    () => q2again.received.some((p) => p.type === "pubrec"),
    "PUBREC after the restart",
    5000,
  );
  q2again.send({ type: "pubrel", packetId: 77, reasonCode: 0, properties: {} });
  await waitFor(() => q2again.received.some((p) => p.type === "pubcomp"), "PUBCOMP", 5000);
  const pubcomp = q2again.received.find((p) => p.type === "pubcomp");
  const replay = await mqttJs(url2);
  const stored: string[] = [];
  replay.on("message", (_topic, payload) => stored.push(payload.toString()));
  await replay.subscribeAsync("rs-in/#", {
    qos: 0,
    properties: { userProperties: { "aria-from": "earliest" } },
  });
  await Bun.sleep(500);
  // The will: after the restart, at its time (4 s after the drop), once.
  await waitFor(() => wills.length > 0, "the will", 15_000).catch(() => {});
  await Bun.sleep(300);
  // One comparison, so a server without the fixes shows every part that fails.
  expect({
    sessionPresent: connack?.type === "connack" && connack.sessionPresent,
    resumed,
    pubcomp: pubcomp?.type === "pubcomp" ? pubcomp.reasonCode : null,
    stored,
    willsAtTheirTime: wills.map((at) => at - droppedAt >= 3500),
  }).toEqual({
    sessionPresent: true,
    resumed: [
      ["pubrel", sent[2][1]],
      [sent[0][0], sent[0][1], 1, true],
      [sent[1][0], sent[1][1], 2, true],
    ],
    pubcomp: 0,
    stored: ["exactly-once"],
    willsAtTheirTime: [true],
  });
  again.close();
  q2again.close();
  for (const client of [watcher, replay]) client.end(true);
  await second.stop();
}, 60_000);
