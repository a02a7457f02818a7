import { describe, expect, test } from "bun:test";
import { DoorWorld } from "./mqtt_door_test_support.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const bytesOf = (s: string) => new TextEncoder().encode(s);

describe("MQTT session: connect, publish, subscribe", () => {
  test("CONNECT gets CONNACK; QoS 0/1/2 published reach a subscriber", async () => {
    const world = new DoorWorld();
    const sub = await world.connected("sub");
    sub.send({
      type: "subscribe",
      packetId: 1,
      subscriptions: [
        { filter: "a/+/c", qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 },
      ],
      properties: {},
    });
    await world.settle();
    expect(sub.take("suback").map((p) => p.reasonCodes)).toEqual([[1]]);
    const pub = await world.connected("pub");
    for (const qos of [0, 1, 2] as const)
      pub.send({
        type: "publish",
        topic: "a/b/c",
        payload: bytesOf(`m${qos}`),
        qos,
        retain: false,
        dup: false,
        packetId: qos === 0 ? undefined : 10 + qos,
        properties: {},
      });
    await world.settle();
    expect(pub.take("puback").map((p) => p.packetId)).toEqual([11]);
    expect(pub.take("pubrec").map((p) => p.packetId)).toEqual([12]);
    pub.send({ type: "pubrel", packetId: 12, reasonCode: 0, properties: {} });
    await world.settle();
    expect(pub.take("pubcomp").map((p) => p.packetId)).toEqual([12]);
    const got = sub.take("publish");
    expect(got.map((p) => [p.topic, text(p.payload), p.qos, p.properties.userProperties])).toEqual([
      ["a/b/c", "m0", 1, [["aria-seq", "1"]]],
      ["a/b/c", "m1", 1, [["aria-seq", "2"]]],
      ["a/b/c", "m2", 1, [["aria-seq", "3"]]],
    ]);
  });
});
