/**
 * Batching in the MQTT door (mqtt_session.ts, native_link.ts): the packets of one read of a
 * client's socket, or of one broker write, leave in one socket write; publishes of one read and
 * topic share one native PUBLISH frame; the PUBACKs of one read are one ACK frame. Each test
 * counts the writes or frames and checks that nothing else changed: every packet, in order.
 */
import { expect, test } from "bun:test";
import { FrameDecoder } from "../protocol/mod.ts";
import { encodePacket } from "./codec_encode.ts";
import {
  type DoorWorld as World,
  DoorWorld,
  type FakeMqttClient,
} from "./mqtt_door_test_support.ts";
import { NativeLink, type NativeEvents } from "./native_link.ts";
import type { Packet, QoS } from "./packets.ts";

const bytesOf = (s: string) => new TextEncoder().encode(s);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** Counts the client's socket writes from now on. */
function countWrites(client: FakeMqttClient): { writes: number } {
  const counter = { writes: 0 };
  const write = client.connection.write;
  (client.connection as { write: (bytes: Uint8Array) => number }).write = (bytes) => {
    counter.writes++;
    return write(bytes);
  };
  return counter;
}

/** The native frames the door hands the broker from now on: kind, and messages or seq. */
function recordFrames(world: World): { kind: string; count: number; seq: number }[] {
  const frames: { kind: string; count: number; seq: number }[] = [];
  const broker = world.broker;
  const receive = broker.receive.bind(broker);
  broker.receive = (sessionId: number, bytes: Uint8Array) => {
    const decoder = new FrameDecoder();
    decoder.push(bytes.slice());
    for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
      let count = 0;
      if (frame.kind === "publish") while (frame.messages.next()) count++;
      frames.push({ kind: frame.kind, count, seq: frame.kind === "ack" ? frame.seq : -1 });
    }
    receive(sessionId, bytes);
  };
  return frames;
}

function publish(topic: string, index: number, qos: QoS): Packet {
  return {
    type: "publish",
    topic,
    payload: bytesOf(`m${index}`),
    qos,
    retain: false,
    dup: false,
    packetId: qos === 0 ? undefined : index + 1,
    properties: {},
  };
}

/** Packets encoded back to back: what one read of the client's socket holds. */
function oneRead(client: FakeMqttClient, packets: Packet[]): Uint8Array {
  const parts = packets.map((packet) => encodePacket(packet, client.version));
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

async function subscribed(world: World, client: FakeMqttClient, filter: string, qos: QoS) {
  client.send({
    type: "subscribe",
    packetId: 1,
    subscriptions: [{ filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0 }],
    properties: {},
  });
  await world.settle();
  expect(client.take("suback").map((p) => p.reasonCodes)).toEqual([[qos]]);
}

test("the answers to the packets of one read leave in one socket write", async () => {
  const world = new DoorWorld();
  const client = await world.connected("pinger");
  const counter = countWrites(client);
  const pings = Array.from({ length: 10 }, (): Packet => ({ type: "pingreq" }));
  client.sendBytes(oneRead(client, pings));
  await world.settle();
  expect(client.take("pingresp").length).toBe(10);
  expect(counter.writes).toBe(1);
});

test("a broker write of many messages leaves in one socket write, in order", async () => {
  const world = new DoorWorld();
  const sub = await world.connected("sub");
  await subscribed(world, sub, "fan/#", 1);
  const pub = await world.connected("pub");
  const counter = countWrites(sub);
  const messages = Array.from({ length: 50 }, (_, i) => publish("fan/x", i, 0));
  pub.sendBytes(oneRead(pub, messages));
  await world.settle();
  const got = sub.take("publish");
  expect(got.map((p) => text(p.payload))).toEqual(messages.map((_, i) => `m${i}`));
  expect(counter.writes).toBe(1);
});

test("publishes of one read and topic are one native PUBLISH frame; each gets its PUBACK", async () => {
  const world = new DoorWorld();
  const sub = await world.connected("sub");
  await subscribed(world, sub, "t/#", 0);
  const pub = await world.connected("pub");
  const frames = recordFrames(world);
  const packets = [
    ...Array.from({ length: 20 }, (_, i) => publish("t/a", i, 1)),
    ...Array.from({ length: 5 }, (_, i) => publish("t/b", 20 + i, 0)),
    publish("t/a", 25, 1),
  ];
  pub.sendBytes(oneRead(pub, packets));
  await world.settle();
  expect(frames.filter((f) => f.kind === "publish").map((f) => f.count)).toEqual([20, 5, 1]);
  const acked = pub.take("puback").map((p) => [p.packetId, p.reasonCode]);
  expect(acked).toEqual([...Array.from({ length: 20 }, (_, i) => [i + 1, 0]), [26, 0]]);
  const got = sub.take("publish").map((p) => `${p.topic} ${text(p.payload)}`);
  expect(got).toEqual(
    packets.map((p) => `${(p as { topic: string }).topic} m${packets.indexOf(p)}`),
  );
});

test("publishes read together with DISCONNECT are all published before the session ends", async () => {
  const world = new DoorWorld();
  const sub = await world.connected("sub");
  await subscribed(world, sub, "last/#", 0);
  const pub = await world.connected("pub");
  // Bun's socket reports its close from inside close(), as this one does.
  (pub.connection as { close: () => void }).close = () => {
    pub.closed = true;
    world.door.closed(pub.id);
  };
  const packets: Packet[] = Array.from({ length: 5 }, (_, i) => publish("last/x", i, 0));
  packets.push({ type: "disconnect", reasonCode: 0, properties: {} });
  pub.sendBytes(oneRead(pub, packets));
  await world.settle();
  expect(pub.closed).toBe(true);
  expect(sub.take("publish").map((p) => text(p.payload))).toEqual(["m0", "m1", "m2", "m3", "m4"]);
});

test("the PUBACKs of one read are one ACK of the durable consumer, after them", async () => {
  const world = new DoorWorld();
  const sub = await world.connected("keeper", { cleanStart: false, expiryS: 600 });
  await subscribed(world, sub, "k/#", 1);
  const pub = await world.connected("pub");
  const messages = Array.from({ length: 30 }, (_, i) => publish("k/x", i, 1));
  pub.sendBytes(oneRead(pub, messages));
  await world.settle();
  const got = sub.take("publish");
  expect(got.length).toBe(30);
  const frames = recordFrames(world);
  // The first 20 acknowledged in one read: one ACK, up to the 20th message's seq.
  const acks = got.map(
    (p): Packet => ({
      type: "puback",
      packetId: p.packetId as number,
      reasonCode: 0,
      properties: {},
    }),
  );
  sub.sendBytes(oneRead(sub, acks.slice(0, 20)));
  await world.settle();
  const seqOf = (p: Packet & { type: "publish" }) =>
    Number(p.properties.userProperties?.find(([key]) => key === "aria-seq")?.[1]);
  expect(frames.filter((f) => f.kind === "ack").map((f) => f.seq)).toEqual([seqOf(got[19])]);
  // The session comes back: only the 10 it did not acknowledge come again.
  sub.drop();
  await world.settle();
  const back = await world.connected("keeper", { cleanStart: false, expiryS: 600 });
  await world.settle();
  expect(back.take("publish").map((p) => text(p.payload))).toEqual(
    Array.from({ length: 10 }, (_, i) => `m${20 + i}`),
  );
});

test("a refused batch of publishes: each QoS 1 PUBLISH of it gets its own failure PUBACK", async () => {
  const world = new DoorWorld();
  const pub = await world.connected("pub");
  const frames = recordFrames(world);
  // The store refuses appends for now (storage behind; it retries, so nothing fails for good).
  const store = world.store as unknown as { refusal: Error | null; retrying: boolean };
  store.refusal = new Error("storage is behind");
  store.retrying = true;
  pub.sendBytes(
    oneRead(
      pub,
      Array.from({ length: 6 }, (_, i) => publish("r/x", i, 1)),
    ),
  );
  await world.settle();
  expect(frames.filter((f) => f.kind === "publish").map((f) => f.count)).toEqual([6]);
  const acked = pub.take("puback");
  expect(acked.map((p) => p.packetId)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(acked.every((p) => p.reasonCode >= 0x80)).toBe(true);
  // The window is free again: the next publishes, once storage takes them, succeed.
  store.refusal = null;
  pub.sendBytes(oneRead(pub, [publish("r/x", 6, 1)]));
  await world.settle();
  expect(pub.take("puback").map((p) => [p.packetId, p.reasonCode])).toEqual([[7, 0]]);
});

test("corked ACKs of one subscription are its latest one, not its highest (shared members ACK in delivery order)", () => {
  const frames: { kind: string; subscriptionId: number; seq: number }[] = [];
  const broker = {
    open: () => 1,
    receive: (_id: number, bytes: Uint8Array) => {
      const decoder = new FrameDecoder();
      decoder.push(bytes.slice());
      for (let frame = decoder.next(); frame !== null; frame = decoder.next())
        if (frame.kind === "ack")
          frames.push({ kind: frame.kind, subscriptionId: frame.subscriptionId, seq: frame.seq });
    },
    writable: () => undefined,
    closed: () => undefined,
  };
  const link = new NativeLink(broker, {} as NativeEvents, {}, { soon: (task) => task() });
  link.open();
  link.cork();
  link.ack(7, 10);
  link.ack(7, 5); // a leaver's message, delivered after seq 10
  link.ack(8, 3);
  link.ack(7, 12);
  link.uncork();
  expect(frames.map((f) => [f.subscriptionId, f.seq])).toEqual([
    [7, 5],
    [8, 3],
    [7, 12],
  ]);
});
