/**
 * MQTT 3.1 (protocol name MQIsdp, level 3) through the door: accepted as 3.1.1 is, with 3.1's
 * rules — a client id of 1 to 23 bytes (else CONNACK return code 2) and no session present flag
 * in CONNACK, even when a kept session is resumed.
 */
import { describe, expect, test } from "bun:test";
import { DoorWorld, type FakeMqttClient } from "./mqtt_door_test_support.ts";
import type { ConnectPacket } from "./packets.ts";

const bytesOf = (s: string) => new TextEncoder().encode(s);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** A 3.1 client after its CONNECT (answered or not). */
async function connect31(
  world: DoorWorld,
  clientId: string,
  cleanStart: boolean,
): Promise<FakeMqttClient> {
  const client = world.client(4);
  const packet: ConnectPacket = {
    type: "connect",
    protocolVersion: 4,
    mqtt31: true,
    clientId,
    cleanStart,
    keepAlive: 60,
    properties: {},
  };
  client.send(packet);
  await world.settle();
  return client;
}

describe("MQTT 3.1", () => {
  test("connects, subscribes and gets what is published, at QoS 1", async () => {
    const world = new DoorWorld();
    const sub = await connect31(world, "old-client", true);
    expect(sub.take("connack").map((p) => [p.sessionPresent, p.reasonCode])).toEqual([[false, 0]]);
    sub.send({
      type: "subscribe",
      packetId: 1,
      subscriptions: [
        { filter: "a/#", qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 },
      ],
      properties: {},
    });
    await world.settle();
    expect(sub.take("suback").map((p) => p.reasonCodes)).toEqual([[1]]);
    const pub = await connect31(world, "old-publisher", true);
    pub.send({
      type: "publish",
      topic: "a/b",
      payload: bytesOf("hello"),
      qos: 1,
      retain: false,
      dup: false,
      packetId: 7,
      properties: {},
    });
    await world.settle();
    expect(pub.take("puback").map((p) => p.packetId)).toEqual([7]);
    expect(sub.take("publish").map((p) => [p.topic, text(p.payload), p.qos])).toEqual([
      ["a/b", "hello", 1],
    ]);
  });

  test("a kept session resumes, but CONNACK says no session present (3.1 has no such flag)", async () => {
    const world = new DoorWorld();
    const first = await connect31(world, "keeper31", false);
    expect(first.take("connack").map((p) => p.reasonCode)).toEqual([0]);
    first.send({
      type: "subscribe",
      packetId: 1,
      subscriptions: [
        { filter: "t", qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 },
      ],
      properties: {},
    });
    await world.settle();
    first.drop();
    await world.settle();
    const pub = await world.connected("pub");
    pub.send({
      type: "publish",
      topic: "t",
      payload: bytesOf("while away"),
      qos: 1,
      retain: false,
      dup: false,
      packetId: 3,
      properties: {},
    });
    await world.settle();
    const again = await connect31(world, "keeper31", false);
    expect(again.take("connack").map((p) => [p.sessionPresent, p.reasonCode])).toEqual([
      [false, 0],
    ]);
    expect(again.take("publish").map((p) => text(p.payload))).toEqual(["while away"]);
    again.drop();
    await world.settle();
    // The same session over 3.1.1 is reported present.
    const v311 = world.client(4);
    v311.send({
      type: "connect",
      protocolVersion: 4,
      clientId: "keeper31",
      cleanStart: false,
      keepAlive: 60,
      properties: {},
    });
    await world.settle();
    expect(v311.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
  });

  test("an empty or 24-byte client id: CONNACK return code 2 (identifier rejected), closed", async () => {
    for (const id of ["", "x".repeat(24)]) {
      const world = new DoorWorld();
      const client = await connect31(world, id, true);
      expect(client.take("connack").map((p) => [p.sessionPresent, p.reasonCode])).toEqual([
        [false, 0x85],
      ]);
      expect(client.closed).toBe(true);
    }
  });
});
