/**
 * The MQTT session against the specs' session rules (MQF1): delivered QoS, redelivery on resume,
 * wills, No Local, the `aria-seq` setting. Through the door on a memory broker (DoorWorld).
 */
import { describe, expect, test } from "bun:test";
import { encodeHello, FrameWriter } from "../protocol/mod.ts";
import { DoorWorld } from "./mqtt_door_test_support.ts";
import type { Properties, QoS, Subscription } from "./packets.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
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

/** A native client's PUBLISH (no properties): what a message not published over MQTT is. */
function nativePublish(world: DoorWorld, topic: string, payload: string): void {
  const writer = new FrameWriter({ capacityBytes: 1024 });
  const id = world.broker.open({ write: (bytes) => bytes.length, close: () => {} });
  encodeHello(writer, { version: 1, clientName: "native", authToken: null });
  world.broker.receive(id, writer.bytes().slice());
  writer.reset();
  writer.beginPublish(1, false);
  writer.addPublishMessageText(topic, bytesOf(payload));
  writer.endPublish();
  world.broker.receive(id, writer.bytes().slice());
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

describe("MQTT session: delivered QoS and retain flag [MQTT-3.8.4-8]", () => {
  test("a subscriber gets the lower of the publish QoS and its granted QoS", async () => {
    const world = new DoorWorld();
    const subs = await Promise.all([0, 1, 2].map((qos) => world.connected(`sub${qos}`)));
    for (const [qos, sub] of subs.entries()) subscribe(sub, "q/#", qos as QoS);
    const v4 = await world.connected("sub-v4", { version: 4 });
    subscribe(v4, "q/#", 2);
    await world.settle();
    const pub = await world.connected("pub");
    // A client's own aria-qos is not the door's: dropped when it publishes.
    const spoof: Properties = {
      userProperties: [
        ["aria-qos", "0"],
        ["k", "v"],
      ],
    };
    publish(pub, "q/0", "p0", 0);
    publish(pub, "q/1", "p1", 1, 1);
    publish(pub, "q/2", "p2", 2, 2, { properties: spoof });
    await world.settle();
    // A native publish says no QoS: its subscribers get their granted QoS.
    nativePublish(world, "q/n", "pn");
    await world.settle();
    for (const [granted, sub] of [...subs.entries(), [2, v4] as const]) {
      const got = sub.take("publish");
      expect(got.map((p): [string, number] => [text(p.payload), p.qos])).toEqual([
        ["p0", 0],
        ["p1", Math.min(1, granted)],
        ["p2", granted],
        ["pn", granted],
      ]);
      // The door's own user properties never reach a client.
      const user = got.map((p) => p.properties.userProperties?.filter(([k]) => k !== "aria-seq"));
      expect(user).toEqual(
        sub === v4 ? [undefined, undefined, undefined, undefined] : [[], [], [["k", "v"]], []],
      );
    }
  });

  test("Retain As Published keeps the publish's retain flag; a retained message goes at the lower QoS", async () => {
    const world = new DoorWorld();
    const asPublished = await world.connected("as-published");
    subscribe(asPublished, "r/#", 2, { retainAsPublished: true });
    const plain = await world.connected("plain");
    subscribe(plain, "r/#", 2);
    await world.settle();
    const pub = await world.connected("pub");
    publish(pub, "r/kept", "kept", 1, 1, { retain: true });
    publish(pub, "r/not", "not", 1, 2);
    await world.settle();
    const flags = (client: Client) =>
      client.take("publish").map((p) => [text(p.payload), p.retain]);
    expect(flags(asPublished)).toEqual([
      ["kept", true],
      ["not", false],
    ]);
    expect(flags(plain)).toEqual([
      ["kept", false],
      ["not", false],
    ]);
    // A later subscriber gets the topic's newest message as retained, at QoS min(1, 2).
    const late = await world.connected("late");
    subscribe(late, "r/kept", 2);
    await world.settle();
    expect(late.take("publish").map((p) => [text(p.payload), p.retain, p.qos])).toEqual([
      ["kept", true, 1],
    ]);
  });
});

describe("MQTT session: redelivery on resume [MQTT-4.4.0-1]", () => {
  const connect = (world: DoorWorld, version: 4 | 5) => {
    const client = world.client(version);
    client.send({
      type: "connect",
      protocolVersion: version,
      clientId: "resumer",
      cleanStart: false,
      keepAlive: 0,
      properties: version === 5 ? { sessionExpiryInterval: 60 } : {},
    });
    return client;
  };
  /** What a client got, in order: PUBLISH as "topic payload #id dup", PUBREL as "PUBREL #id". */
  const seen = (client: Client) =>
    client.received.splice(0).flatMap((p) => {
      if (p.type === "publish")
        return [`${p.topic} ${text(p.payload)} #${p.packetId}${p.dup ? " dup" : ""}`];
      if (p.type === "pubrel") return [`PUBREL #${p.packetId}`];
      return [];
    });
  const ack = (client: Client, type: "puback" | "pubrec" | "pubcomp", packetId: number) =>
    client.send({ type, packetId, reasonCode: 0, properties: {} });

  for (const inMemorySessions of [false, true])
    for (const version of [4, 5] as const)
      test(`unacknowledged PUBLISHes go again with their ids and DUP, PUBRELs again (${inMemorySessions ? "in memory" : "durable"}, v${version})`, async () => {
        const world = new DoorWorld({ inMemorySessions });
        const first = connect(world, version);
        await world.settle();
        subscribe(first, "d/#", 2);
        await world.settle();
        first.received.length = 0;
        const pub = await world.connected("pub");
        for (const [i, payload] of ["a", "b", "c"].entries())
          publish(pub, "d/x", payload, 2, i + 1);
        await world.settle();
        expect(seen(first)).toEqual(["d/x a #1", "d/x b #2", "d/x c #3"]);
        ack(first, "pubrec", 1); // PUBREL 1 comes; no PUBCOMP: it goes again
        ack(first, "pubrec", 3); // "c" done, out of order: not again
        await world.settle();
        ack(first, "pubcomp", 3);
        await world.settle();
        expect(seen(first)).toEqual(["PUBREL #1", "PUBREL #3"]);
        first.drop();
        await world.settle();
        publish(pub, "d/x", "d", 2, 4);
        await world.settle();
        const second = connect(world, version);
        await world.settle();
        expect(second.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
        expect(seen(second)).toEqual(["PUBREL #1", "d/x b #2 dup", "d/x d #3"]);
        ack(second, "pubcomp", 1);
        ack(second, "pubrec", 2);
        ack(second, "pubrec", 3);
        await world.settle();
        expect(seen(second)).toEqual(["PUBREL #2", "PUBREL #3"]);
        ack(second, "pubcomp", 2);
        ack(second, "pubcomp", 3);
        await world.settle();
        second.drop();
        await world.settle();
        // Everything acknowledged: nothing comes again.
        const third = connect(world, version);
        await world.settle();
        expect(seen(third)).toEqual([]);
      });
});

describe("MQTT session: wills on takeover and reconnection [MQTT-3.1.2-8]", () => {
  const connectWithWill = (
    world: DoorWorld,
    version: 4 | 5,
    clean: boolean,
    will: { delayS?: number } | null,
  ) => {
    const client = world.client(version);
    client.send({
      type: "connect",
      protocolVersion: version,
      clientId: "willer",
      cleanStart: clean,
      keepAlive: 0,
      will:
        will === null
          ? undefined
          : {
              topic: "will/test",
              payload: bytesOf("LWT"),
              qos: 0,
              retain: false,
              properties: will.delayS === undefined ? {} : { willDelayInterval: will.delayS },
            },
      properties: version === 5 ? { sessionExpiryInterval: clean ? 0 : 60 } : {},
    });
    return client;
  };
  const wills = (client: Client) => client.take("publish").map((p) => text(p.payload));

  for (const version of [4, 5] as const)
    for (const clean1 of [true, false])
      for (const clean2 of [true, false])
        test(`takeover, v${version}, clean ${clean1} then ${clean2}: the will only when the session ends`, async () => {
          const world = new DoorWorld();
          const watcher = await world.connected("watcher");
          subscribe(watcher, "will/#", 0);
          await world.settle();
          const old = connectWithWill(world, version, clean1, {});
          await world.settle();
          connectWithWill(world, version, clean2, null);
          await world.settle();
          expect(old.take("connack").length).toBe(1);
          old.drop();
          await world.advance(1_000_000);
          expect(wills(watcher)).toEqual(clean1 || clean2 ? ["LWT"] : []);
        });

  test("a reconnection within the will delay cancels the will, with clean start too", async () => {
    for (const clean of [false, true]) {
      const world = new DoorWorld();
      const watcher = await world.connected("watcher");
      subscribe(watcher, "will/#", 0);
      await world.settle();
      const first = connectWithWill(world, 5, false, { delayS: 3 });
      await world.settle();
      first.drop();
      await world.advance(1_000_000);
      connectWithWill(world, 5, clean, null);
      await world.advance(4_000_000);
      expect(wills(watcher)).toEqual([]);
    }
  });
});

test("an assigned client id is auto- and a UUID's shape, each its own; DISCONNECT giving an expiry after 0 is 0x82", async () => {
  const world = new DoorWorld();
  const ids: string[] = [];
  const clients: Client[] = [];
  for (let i = 0; i < 2; i++) {
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "",
      cleanStart: true,
      keepAlive: 10,
      properties: {},
    });
    await world.settle();
    ids.push(client.take("connack")[0].properties.assignedClientIdentifier ?? "");
    clients.push(client);
  }
  for (const id of ids)
    expect(id).toMatch(/^auto-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  expect(ids[0]).not.toBe(ids[1]);
  clients[0].send({ type: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 1 } });
  await world.settle();
  expect(clients[0].take("disconnect").map((p) => p.reasonCode)).toEqual([0x82]);
});

test("No Local: a subscription does not get what its own connection published [MQTT-3.8.3-3]", async () => {
  const world = new DoorWorld();
  const self = await world.connected("self");
  subscribe(self, "n/#", 1, { noLocal: true });
  await world.settle();
  self.send({
    type: "subscribe",
    packetId: 8,
    subscriptions: [
      { filter: "n/+", qos: 0, noLocal: false, retainAsPublished: false, retainHandling: 0 },
    ],
    properties: { subscriptionIdentifiers: [2] },
  });
  await world.settle();
  const other = await world.connected("other");
  publish(self, "n/x", "mine", 1, 1);
  await world.settle();
  publish(other, "n/y", "theirs", 1, 1);
  await world.settle();
  const got = self
    .take("publish")
    .map((p) => [text(p.payload), p.properties.subscriptionIdentifiers?.[0] ?? "no local"]);
  expect(got).toEqual([
    ["mine", 2],
    ["theirs", "no local"],
    ["theirs", 2],
  ]);
});

test("in-flight payloads past MQTT_FLIGHT_KEPT_BYTES_MAX are not kept: those come again from the log as new PUBLISHes", async () => {
  const world = new DoorWorld({ inMemorySessions: true });
  const connect = () => {
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "big",
      cleanStart: false,
      keepAlive: 0,
      properties: { sessionExpiryInterval: 60 },
    });
    return client;
  };
  const first = connect();
  await world.settle();
  subscribe(first, "big/#", 1);
  await world.settle();
  const pub = await world.connected("pub");
  const payload = "x".repeat(600 * 1024);
  publish(pub, "big/a", payload, 1, 1);
  publish(pub, "big/b", payload, 1, 2);
  await world.settle();
  const shape = (client: Client) =>
    client.take("publish").map((p) => `${p.topic} #${p.packetId}${p.dup ? " dup" : ""}`);
  expect(shape(first)).toEqual(["big/a #1", "big/b #2"]);
  first.drop();
  await world.settle();
  const second = connect();
  await world.settle();
  // 600 KiB kept, the next 600 KiB over the 1 MiB bound: a new PUBLISH, new id, DUP 0.
  expect(shape(second)).toEqual(["big/a #1 dup", "big/b #2"]);
});
