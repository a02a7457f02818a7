/**
 * The MQTT session against the specs' session rules (MQF1): delivered QoS, redelivery on resume,
 * wills, No Local, the `aria-seq` setting. Through the door on a memory broker (DoorWorld).
 */
import { describe, expect, test } from "bun:test";
import { DoorWorld } from "./mqtt_door_test_support.ts";
import type { Properties, QoS, Subscription } from "./packets.ts";

const bytesOf = (s: string) => new TextEncoder().encode(s);

type Client = Awaited<ReturnType<DoorWorld["connected"]>>;

function subscribe(client: Client, filter: string, qos: QoS, options: Partial<Subscription> = {}) {
  client.send({
    type: "subscribe",
    packetId: 7,
    subscriptions: [
      { filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0, ...options },
    ],
    properties: {},
  });
}

function publish(
  client: Client,
  topic: string,
  payload: string,
  qos: QoS = 0,
  id = 1,
  options: { retain?: boolean; properties?: Properties } = {},
) {
  client.send({
    type: "publish",
    topic,
    payload: bytesOf(payload),
    qos,
    retain: options.retain ?? false,
    dup: false,
    packetId: qos === 0 ? undefined : id,
    properties: options.properties ?? {},
  });
}

describe("MQTT session: --mqtt-aria-seq", () => {
  test("off: a PUBLISH to an MQTT 5 subscriber carries no aria-seq, only the publisher's", async () => {
    for (const ariaSeq of [true, false]) {
      const world = new DoorWorld({ ariaSeq });
      const sub = await world.connected("sub");
      subscribe(sub, "t", 1);
      await world.settle();
      const pub = await world.connected("pub");
      publish(pub, "t", "a", 1, 1, { properties: { userProperties: [["k", "v"]] } });
      publish(pub, "t", "b", 1, 2);
      await world.settle();
      const got = sub.take("publish").map((p) => p.properties.userProperties);
      expect(got).toEqual(
        ariaSeq
          ? [
              [
                ["k", "v"],
                ["aria-seq", "1"],
              ],
              [["aria-seq", "2"]],
            ]
          : [[["k", "v"]], undefined],
      );
    }
  });
});
