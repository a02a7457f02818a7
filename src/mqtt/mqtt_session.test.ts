/**
 * The MQTT session machine over a real broker on a memory store (DoorWorld): connect, publish and
 * subscribe, persistent sessions (durable consumers), QoS and flow control, keep alive and wills,
 * bad input, topic names, PUBLISH properties, retained messages (one not yet durable too) and
 * shared subscriptions. The wire is the codec's; the broker is the one the server runs.
 */
import { describe, expect, test } from "bun:test";
import { encodePacket } from "./codec_encode.ts";
import { MemoryConsumerStore } from "../testing/memory_consumer_store.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { DoorWorld } from "./mqtt_door_test_support.ts";
import { MqttDoor } from "./mqtt_door.ts";
import { ariaTopicMapping } from "./topic_mapping.ts";

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
      ["a/b/c", "m0", 0, [["aria-seq", "1"]]],
      ["a/b/c", "m1", 1, [["aria-seq", "2"]]],
      ["a/b/c", "m2", 1, [["aria-seq", "3"]]],
    ]);
  });
});

type World = DoorWorld;
type Client = Awaited<ReturnType<DoorWorld["connected"]>>;

function subscribe(
  client: Client,
  filter: string,
  qos: 0 | 1 | 2,
  userProperties?: [string, string][],
): void {
  client.send({
    type: "subscribe",
    packetId: 7,
    subscriptions: [{ filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0 }],
    properties: userProperties === undefined ? {} : { userProperties },
  });
}

function publish(client: Client, topic: string, payload: string, qos: 0 | 1 | 2 = 0, id = 1) {
  client.send({
    type: "publish",
    topic,
    payload: bytesOf(payload),
    qos,
    retain: false,
    dup: false,
    packetId: qos === 0 ? undefined : id,
    properties: {},
  });
}

async function publishAll(world: World, topic: string, payloads: string[]): Promise<void> {
  const pub = await world.connected(`pub-${payloads[0]}`);
  // At QoS 2: each subscriber gets its subscription's QoS (the lower of the two).
  for (const [i, payload] of payloads.entries()) publish(pub, topic, payload, 2, i + 1);
  await world.settle();
  pub.send({ type: "disconnect", reasonCode: 0, properties: {} });
  await world.settle();
}

const payloads = (client: Client) => client.take("publish").map((p) => text(p.payload));

describe("MQTT session: persistent sessions", () => {
  test("a session with an expiry gets what was published while its client was away", async () => {
    const world = new DoorWorld();
    const first = await world.connected("keeper", { cleanStart: false, expiryS: 3600 });
    subscribe(first, "t/#", 1);
    await world.settle();
    await publishAll(world, "t/x", ["a", "b"]);
    expect(payloads(first)).toEqual(["a", "b"]);
    // "b" is never acknowledged: it comes again (QoS 1), "a" does not.
    first.send({ type: "puback", packetId: 1, reasonCode: 0, properties: {} });
    await world.settle();
    first.drop();
    await world.settle();
    await publishAll(world, "t/y", ["c", "d"]);
    const again = world.client(5);
    again.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "keeper",
      cleanStart: false,
      keepAlive: 0,
      properties: { sessionExpiryInterval: 3600 },
    });
    await world.settle();
    expect(again.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
    expect(payloads(again)).toEqual(["b", "c", "d"]);
  });

  test("clean start discards the session; expiry 0 keeps none", async () => {
    const world = new DoorWorld();
    const first = await world.connected("c1", { expiryS: 3600 });
    subscribe(first, "t/#", 0);
    await world.settle();
    first.drop();
    await world.settle();
    const clean = await world.connected("c1", { cleanStart: true });
    await publishAll(world, "t/x", ["a"]);
    expect(payloads(clean)).toEqual([]);
    expect(world.door.stats().sessionsStored).toBe(0);
  });

  test("a session expires after its interval", async () => {
    const world = new DoorWorld();
    const first = await world.connected("c2", { cleanStart: false, expiryS: 10 });
    subscribe(first, "t/#", 1);
    await world.settle();
    first.drop();
    await world.settle();
    expect(world.door.stats().sessionsStored).toBe(1);
    await world.advance(11_000_000);
    expect(world.door.stats().sessionsStored).toBe(0);
  });

  test("a second connection of a client id takes the session over (DISCONNECT 0x8E)", async () => {
    const world = new DoorWorld();
    const first = await world.connected("same", { cleanStart: false, expiryS: 60 });
    subscribe(first, "t/#", 1);
    await world.settle();
    const second = world.client(5);
    second.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "same",
      cleanStart: false,
      keepAlive: 0,
      properties: { sessionExpiryInterval: 60 },
    });
    await world.settle();
    expect(first.take("disconnect").map((p) => p.reasonCode)).toEqual([0x8e]);
    expect(first.closed).toBe(true);
    expect(second.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
    await publishAll(world, "t/x", ["z"]);
    expect(payloads(second)).toEqual(["z"]);
    expect(payloads(first)).toEqual([]);
  });
});

describe("MQTT session: QoS and flow", () => {
  test("a QoS 2 packet id resent before PUBREL is published once", async () => {
    const world = new DoorWorld();
    const sub = await world.connected("s");
    subscribe(sub, "q/#", 0);
    const pub = await world.connected("p");
    publish(pub, "q/a", "once", 2, 5);
    await world.settle();
    publish(pub, "q/a", "once", 2, 5);
    await world.settle();
    expect(pub.take("pubrec").map((p) => p.packetId)).toEqual([5, 5]);
    pub.send({ type: "pubrel", packetId: 5, reasonCode: 0, properties: {} });
    await world.settle();
    expect(pub.take("pubcomp").map((p) => p.reasonCode)).toEqual([0]);
    expect(payloads(sub)).toEqual(["once"]);
    expect(world.store.nextSeq).toBe(2);
    // Now the id is free: the same id publishes anew.
    publish(pub, "q/a", "twice", 2, 5);
    await world.settle();
    expect(payloads(sub)).toEqual(["twice"]);
  });

  test("no more than the client's Receive Maximum in flight; PUBACK lets the next go", async () => {
    const world = new DoorWorld();
    const sub = world.client(5);
    sub.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "slow",
      cleanStart: true,
      keepAlive: 0,
      properties: { receiveMaximum: 2 },
    });
    await world.settle();
    subscribe(sub, "w/#", 1);
    await world.settle();
    await publishAll(world, "w/x", ["1", "2", "3", "4", "5"]);
    const first = sub.take("publish");
    expect(first.map((p) => text(p.payload))).toEqual(["1", "2"]);
    sub.send({ type: "puback", packetId: first[0].packetId ?? 0, reasonCode: 0, properties: {} });
    await world.settle();
    expect(payloads(sub)).toEqual(["3"]);
  });

  test("a message larger than the client's Maximum Packet Size is skipped", async () => {
    const world = new DoorWorld();
    const sub = world.client(5);
    sub.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "small",
      cleanStart: true,
      keepAlive: 0,
      properties: { maximumPacketSize: 100 },
    });
    await world.settle();
    subscribe(sub, "m/#", 1);
    await world.settle();
    await publishAll(world, "m/x", ["x".repeat(200), "ok"]);
    expect(payloads(sub)).toEqual(["ok"]);
  });

  test("aria-from earliest replays the log, then live", async () => {
    const world = new DoorWorld();
    await publishAll(world, "r/x", ["old1", "old2"]);
    const sub = await world.connected("replayer");
    subscribe(sub, "r/#", 0, [["aria-from", "earliest"]]);
    await world.settle();
    await publishAll(world, "r/x", ["new"]);
    const got = sub.take("publish");
    expect(got.map((p) => text(p.payload))).toEqual(["old1", "old2", "new"]);
    expect(got.map((p) => p.properties.userProperties?.[0][1])).toEqual(["1", "2", "3"]);
    subscribe(sub, "r/+", 0, [["aria-from", "yesterday"]]);
    await world.settle();
    expect(sub.take("suback").at(-1)?.reasonCodes).toEqual([0x83]);
  });
});

describe("MQTT session: keep alive, will, bad input", () => {
  test("a client silent for 1.5x its keep alive is disconnected (0x8D) and its will sent", async () => {
    const world = new DoorWorld();
    const watcher = await world.connected("watcher");
    subscribe(watcher, "will/#", 0);
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "quiet",
      cleanStart: true,
      keepAlive: 10,
      will: {
        topic: "will/quiet",
        payload: bytesOf("gone"),
        qos: 1,
        retain: false,
        properties: {},
      },
      properties: {},
    });
    await world.settle();
    await world.advance(14_000_000);
    expect(client.closed).toBe(false);
    await world.advance(2_000_000);
    expect(client.take("disconnect").map((p) => p.reasonCode)).toEqual([0x8d]);
    await world.advance(1_000_000);
    expect(payloads(watcher)).toEqual(["gone"]);
    expect(world.broker.stats().connections).toBe(1);
  });

  test("a normal DISCONNECT discards the will; a delayed will waits, and a return in time cancels it", async () => {
    const world = new DoorWorld();
    const watcher = await world.connected("watcher");
    subscribe(watcher, "will/#", 0);
    const connect = (clientId: string, delay: number) => {
      const client = world.client(5);
      client.send({
        type: "connect",
        protocolVersion: 5,
        clientId,
        cleanStart: false,
        keepAlive: 0,
        will: {
          topic: `will/${clientId}`,
          payload: bytesOf(clientId),
          qos: 0,
          retain: false,
          properties: { willDelayInterval: delay },
        },
        properties: { sessionExpiryInterval: 100 },
      });
      return client;
    };
    const polite = connect("polite", 0);
    await world.settle();
    polite.send({ type: "disconnect", reasonCode: 0, properties: {} });
    const delayed = connect("delayed", 5);
    const back = connect("back", 5);
    await world.settle();
    delayed.drop();
    back.drop();
    await world.advance(1_000_000);
    connect("back", 5);
    await world.advance(3_000_000);
    expect(payloads(watcher)).toEqual([]);
    await world.advance(2_000_000);
    expect(payloads(watcher)).toEqual(["delayed"]);
  });

  test("a second CONNECT is a protocol error (0x82); PUBLISH before CONNECT closes", async () => {
    const world = new DoorWorld();
    const client = await world.connected("twice");
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "twice",
      cleanStart: true,
      keepAlive: 0,
      properties: {},
    });
    await world.settle();
    expect(client.take("disconnect").map((p) => p.reasonCode)).toEqual([0x82]);
    expect(client.closed).toBe(true);
    const early = world.client(4);
    publish(early, "a/b", "x");
    await world.settle();
    expect(early.closed).toBe(true);
    expect(early.received).toEqual([]);
    expect(world.store.nextSeq).toBe(1);
    await world.settle();
    expect(world.broker.stats().connections).toBe(0);
    expect(world.door.stats().connections).toBe(0);
  });

  test("a wrong token gets CONNACK 0x86 (3.1.1: return code 4) and the connection closes", async () => {
    for (const version of [5, 4] as const) {
      const world = new DoorWorld({ authToken: "secret" });
      const client = world.client(version);
      client.send({
        type: "connect",
        protocolVersion: version,
        clientId: "x",
        cleanStart: true,
        keepAlive: 0,
        ...(version === 5 ? { password: bytesOf("wrong") } : { username: "wrong" }),
        properties: {},
      });
      await world.advance(6_000_000);
      expect(client.take("connack").map((p) => p.reasonCode)).toEqual([0x86]);
      expect(client.closed).toBe(true);
      const good = world.client(version);
      good.send({
        type: "connect",
        protocolVersion: version,
        clientId: "y",
        cleanStart: true,
        keepAlive: 0,
        ...(version === 5 ? { password: bytesOf("secret") } : { username: "secret" }),
        properties: {},
      });
      await world.settle();
      expect(good.take("connack").map((p) => p.reasonCode)).toEqual([0]);
    }
  });
});

describe("MQTT session: topic names", () => {
  test("names Aria cannot spell are mapped there and back; # does not match $ topics", async () => {
    const world = new DoorWorld();
    const all = await world.connected("all");
    subscribe(all, "#", 0);
    const dollar = await world.connected("dollar");
    subscribe(dollar, "$sys/#", 0);
    const empty = await world.connected("empty");
    subscribe(empty, "a/+/+", 0);
    await world.settle();
    const pub = await world.connected("pub");
    publish(pub, "a//b c", "odd");
    publish(pub, "$sys/x", "sys");
    await world.settle();
    expect(all.take("publish").map((p) => p.topic)).toEqual(["a//b c"]);
    expect(dollar.take("publish").map((p) => p.topic)).toEqual(["$sys/x"]);
    expect(empty.take("publish").map((p) => p.topic)).toEqual(["a//b c"]);
    const stored = world.store.messages.map((m) => m.topic);
    expect(stored).toEqual(["a/%/b%20c", "$sys/x"]);
  });
});

describe("MQTT session: PUBLISH properties", () => {
  test("kept with the message and given to MQTT 5 subscribers; expired ones skipped", async () => {
    const world = new DoorWorld();
    const pub = await world.connected("pub");
    const sent = (payload: string, expiryS?: number) =>
      pub.send({
        type: "publish",
        topic: "p/x",
        payload: bytesOf(payload),
        qos: 1,
        retain: false,
        dup: false,
        packetId: 1,
        properties: {
          contentType: "text/plain",
          correlationData: Uint8Array.from([1, 2, 3]),
          responseTopic: "p/reply",
          userProperties: [
            ["k", "v1"],
            ["k", "v2"],
          ],
          ...(expiryS === undefined ? {} : { messageExpiryInterval: expiryS }),
        },
      });
    sent("kept");
    sent("short", 5);
    sent("long", 100);
    await world.settle();
    await world.advance(10_000_000);
    const sub = await world.connected("sub");
    subscribe(sub, "p/#", 0, [["aria-from", "earliest"]]);
    await world.settle();
    const got = sub.take("publish");
    expect(got.map((p) => text(p.payload))).toEqual(["kept", "long"]);
    expect(got[0].properties).toEqual({
      contentType: "text/plain",
      correlationData: Uint8Array.from([1, 2, 3]),
      responseTopic: "p/reply",
      userProperties: [
        ["k", "v1"],
        ["k", "v2"],
        ["aria-seq", "1"],
      ],
    });
    expect(got[1].properties.messageExpiryInterval).toBe(90);
  });
});

test("payload format indicator 1 with bytes that are not UTF-8: PUBACK 0x99, nothing stored", async () => {
  const world = new DoorWorld();
  const pub = await world.connected("pub");
  pub.send({
    type: "publish",
    topic: "u/x",
    payload: Uint8Array.from([0xff, 0xfe]),
    qos: 1,
    retain: false,
    dup: false,
    packetId: 3,
    properties: { payloadFormatIndicator: 1 },
  });
  await world.settle();
  expect(pub.take("puback").map((p) => p.reasonCode)).toEqual([0x99]);
  expect(world.store.nextSeq).toBe(1);
});

test("packets pipelined behind CONNECT wait for CONNACK and then run in order", async () => {
  const world = new DoorWorld();
  const client = world.client(5);
  const connect = encodePacket(
    {
      type: "connect",
      protocolVersion: 5,
      clientId: "eager",
      cleanStart: true,
      keepAlive: 0,
      properties: {},
    },
    5,
  );
  const sub = encodePacket(
    {
      type: "subscribe",
      packetId: 1,
      subscriptions: [
        { filter: "e/#", qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 },
      ],
      properties: {},
    },
    5,
  );
  const pub = encodePacket(
    {
      type: "publish",
      topic: "e/x",
      payload: bytesOf("mine"),
      qos: 1,
      retain: false,
      dup: false,
      packetId: 2,
      properties: {},
    },
    5,
  );
  client.sendBytes(Uint8Array.from([...connect, ...sub, ...pub]));
  await world.settle();
  expect(client.received.map((p) => p.type)).toEqual(["connack", "suback", "puback", "publish"]);
});

describe("MQTT session: persistent sessions are durable consumers", () => {
  const connectKeeper = (world: DoorWorld, cleanStart: boolean) => {
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "keeper",
      cleanStart,
      keepAlive: 0,
      properties: { sessionExpiryInterval: 3600 },
    });
    return client;
  };
  const consumers = (world: DoorWorld) => world.broker.consumerList().map((c) => c.name);

  test("a session survives a restart of the server: what was not acknowledged comes again", async () => {
    const store = new MemoryStore();
    const consumerStore = new MemoryConsumerStore();
    const before = new DoorWorld({ store, consumerStore });
    const first = connectKeeper(before, false);
    await before.settle();
    subscribe(first, "r/#", 1);
    await before.settle();
    expect(consumers(before)).toEqual([expect.stringMatching(/^mqtt\/keeper\.[0-9a-f]{12}\/1/)]);
    await publishAll(before, "r/x", ["a", "b"]);
    const got = first.take("publish");
    first.send({ type: "puback", packetId: got[0].packetId ?? 0, reasonCode: 0, properties: {} });
    await before.settle();
    // The server stops; a new one opens the same store and consumers.
    const after = new DoorWorld({ store, consumerStore });
    await publishAll(after, "r/y", ["c"]);
    const again = connectKeeper(after, false);
    await after.settle();
    expect(again.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
    const redelivered = again.take("publish");
    expect(redelivered.map((p) => [p.topic, text(p.payload), p.qos])).toEqual([
      ["r/x", "b", 1],
      ["r/y", "c", 1],
    ]);
  });

  test("clean start, UNSUBSCRIBE and the session's expiry remove its consumers", async () => {
    const world = new DoorWorld();
    const first = connectKeeper(world, false);
    await world.settle();
    subscribe(first, "u/#", 1);
    subscribe(first, "v/#", 0);
    await world.settle();
    expect(consumers(world).length).toBe(2);
    first.send({ type: "unsubscribe", packetId: 9, filters: ["u/#"], properties: {} });
    await world.settle();
    expect(consumers(world).length).toBe(1);
    first.drop();
    await world.settle();
    const clean = connectKeeper(world, true);
    await world.settle();
    expect(clean.take("connack").map((p) => p.sessionPresent)).toEqual([false]);
    expect(consumers(world)).toEqual([]);
    subscribe(clean, "w/#", 1);
    await world.settle();
    clean.send({ type: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 5 } });
    await world.settle();
    expect(consumers(world).length).toBe(1);
    await world.advance(6_000_000);
    expect(consumers(world)).toEqual([]);
  });
});

describe("MQTT session: retained messages", () => {
  const subscribeWith = (client: Client, filter: string, retainHandling: 0 | 1 | 2) =>
    client.send({
      type: "subscribe",
      packetId: 4,
      subscriptions: [{ filter, qos: 1, noLocal: false, retainAsPublished: false, retainHandling }],
      properties: {},
    });
  const seen = (client: Client) =>
    client
      .take("publish")
      .map((p) => `${p.topic}=${text(p.payload)}${p.retain ? " (retained)" : ""}`);

  test("SUBSCRIBE gets each matching topic's newest message, retain flag set; empty ones clear", async () => {
    const world = new DoorWorld();
    const pub = await world.connected("pub");
    for (const [topic, payload] of [
      ["r/1", "a"],
      ["r/1", "b"],
      ["r/2", "c"],
      ["r/3", "x"],
      ["r/3", ""],
      ["$r/4", "dollar"],
    ])
      publish(pub, topic, payload);
    await world.settle();
    const sub = await world.connected("sub");
    subscribeWith(sub, "#", 0);
    await world.settle();
    expect(seen(sub)).toEqual(["r/1=b (retained)", "r/2=c (retained)"]);
    publish(pub, "r/1", "live");
    await world.settle();
    expect(seen(sub)).toEqual(["r/1=live"]);
    // Retain handling 0 sends them again on a SUBSCRIBE of the same filter; 1 and 2 do not.
    subscribeWith(sub, "#", 1);
    await world.settle();
    expect(seen(sub)).toEqual([]);
    subscribeWith(sub, "#", 0);
    await world.settle();
    expect(seen(sub)).toEqual(["r/2=c (retained)", "r/1=live (retained)"]);
    const never = await world.connected("never");
    subscribeWith(never, "r/#", 2);
    await world.settle();
    expect(seen(never)).toEqual([]);
  });
});

describe("MQTT session: a retained message not yet durable", () => {
  test("PUBLISH then SUBSCRIBE before the store commits: the message comes once, as retained", async () => {
    const world = new DoorWorld();
    const pub = await world.connected("pub");
    world.store.holdCommits = true;
    publish(pub, "h/1", "held");
    await world.settle();
    const subscribeH = (client: Client, retainHandling: 0 | 2) =>
      client.send({
        type: "subscribe",
        packetId: 4,
        subscriptions: [
          { filter: "h/#", qos: 1, noLocal: false, retainAsPublished: false, retainHandling },
        ],
        properties: {},
      });
    const sub = await world.connected("sub");
    subscribeH(sub, 0);
    const never = await world.connected("never");
    subscribeH(never, 2);
    await world.settle();
    world.store.holdCommits = false;
    world.store.release();
    await world.settle();
    // Retain handling 2: no retained messages, and this one came before the subscription.
    expect(never.take("publish")).toEqual([]);
    // It was published before the subscription: a retained message (retain flag 1), not a live one.
    expect(
      sub
        .take("publish")
        .map((p) => `${p.topic}=${text(p.payload)}${p.retain ? " (retained)" : ""}`),
    ).toEqual(["h/1=held (retained)"]);
  });
});

describe("MQTT session: shared subscriptions", () => {
  test("$share/G/f: each message to one member; a leaver's unacknowledged ones go to another", async () => {
    const world = new DoorWorld();
    const one = await world.connected("one");
    const two = await world.connected("two");
    subscribe(one, "$share/g/s/#", 1);
    subscribe(two, "$share/g/s/#", 1);
    await world.settle();
    expect([...one.take("suback"), ...two.take("suback")].map((p) => p.reasonCodes)).toEqual([
      [1],
      [1],
    ]);
    const topics = Array.from({ length: 8 }, (_, i) => `s/t${i}`);
    const pub = await world.connected("pub");
    for (const [i, topic] of topics.entries()) publish(pub, topic, `m${i}`, 1, i + 1);
    await world.settle();
    const toOne = payloads(one);
    const toTwo = payloads(two);
    expect([...toOne, ...toTwo].sort()).toEqual(topics.map((_, i) => `m${i}`).sort());
    expect(toOne.length).toBeGreaterThan(0);
    expect(toTwo.length).toBeGreaterThan(0);
    // "one" leaves without acknowledging: "two" gets its messages.
    one.drop();
    await world.settle();
    expect(payloads(two).sort()).toEqual([...toOne].sort());
    expect(world.broker.consumerList().map((c) => c.shared)).toEqual([true]);
  });
});

test("a payload or properties over the native limits get 0x97 (PUBACK has no 0x95), not a crash", async () => {
  const world = new DoorWorld();
  const pub = await world.connected("big");
  const send = (payloadBytes: number, propertyBytes: number, packetId: number) =>
    pub.send({
      type: "publish",
      topic: "big/x",
      payload: new Uint8Array(payloadBytes),
      qos: 1,
      retain: false,
      dup: false,
      packetId,
      properties: { userProperties: [["k", "v".repeat(propertyBytes)]] },
    });
  send(1024 * 1024 + 1, 0, 1);
  send(10, 9000, 2);
  send(1024 * 1024, 100, 3);
  await world.settle();
  expect(pub.take("puback").map((p) => [p.packetId, p.reasonCode])).toEqual([
    [1, 0x97],
    [2, 0x97],
    [3, 0],
  ]);
  expect(world.store.nextSeq).toBe(2);
});

test("CONNECT with a credential or client id longer than HELLO carries, or an oversize will: refused, no crash", async () => {
  const world = new DoorWorld();
  const connect = (clientId: string, extra: Record<string, unknown>) => {
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId,
      cleanStart: true,
      keepAlive: 0,
      properties: {},
      ...extra,
    });
    return client;
  };
  const longPassword = connect("p", { password: bytesOf("x".repeat(2000)) });
  const wideId = connect("é".repeat(60), {});
  // A will's payload has a two-byte length; its properties may pass the native limit.
  const bigWill = connect("w", {
    will: {
      topic: "w/x",
      payload: bytesOf("bye"),
      qos: 0,
      retain: false,
      properties: { userProperties: [["k", "v".repeat(9000)]] },
    },
  });
  await world.settle();
  expect(longPassword.take("connack").map((p) => p.reasonCode)).toEqual([0x86]);
  expect(wideId.take("connack").map((p) => p.reasonCode)).toEqual([0]);
  expect(bigWill.take("connack").map((p) => p.reasonCode)).toEqual([0x95]);
});

test("while a sign-in is verified, what a client sends behind CONNECT is held up to 256 KiB, then it is not read", async () => {
  // A broker that never answers HELLO (a sign-in still being verified).
  const broker = { open: () => 1, receive: () => {}, writable: () => {}, closed: () => {} };
  const tasks: (() => void)[] = [];
  const door = new MqttDoor({
    broker,
    clock: { nowUs: () => 1e15 },
    scheduler: { soon: (task) => tasks.push(task) },
    mapping: ariaTopicMapping,
  });
  let paused = false;
  let closed = false;
  const id = door.open({
    write: (bytes) => bytes.length,
    close: () => {
      closed = true;
    },
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
    },
  });
  const connect = { type: "connect", protocolVersion: 5, clientId: "slow" } as const;
  door.receive(id, encodePacket({ ...connect, cleanStart: true, keepAlive: 0, properties: {} }, 5));
  const publish = (size: number) =>
    encodePacket(
      {
        type: "publish",
        topic: "h/x",
        payload: new Uint8Array(size),
        qos: 0,
        retain: false,
        dup: false,
        properties: {},
      },
      5,
    );
  for (let i = 0; i < 20; i++) door.receive(id, publish(10_000));
  expect(paused).toBe(false);
  for (let i = 0; i < 10; i++) door.receive(id, publish(10_000));
  expect(paused).toBe(true);
  expect(closed).toBe(false);
});

describe("MQTT session: what mosquitto's suite found", () => {
  test("a malformed 3.1.1 CONNECT closes without CONNACK; an unknown protocol level gets return code 1", async () => {
    const world = new DoorWorld();
    const reservedFlag = world.client(4);
    // CONNECT, 3.1.1, connect flags 0x03: clean session and the reserved bit.
    reservedFlag.sendBytes(Uint8Array.from([0x10, 12, 0, 4, 77, 81, 84, 84, 4, 0x03, 0, 0, 0, 0]));
    const level6 = world.client(4);
    // CONNECT, MQTT level 6 (no such version; 3.1 is accepted: mqtt31.test.ts).
    level6.sendBytes(Uint8Array.from([0x10, 12, 0, 4, 77, 81, 84, 84, 6, 0x02, 0, 0, 0, 0]));
    await world.settle();
    expect(reservedFlag.received).toEqual([]);
    expect(reservedFlag.closed).toBe(true);
    expect(level6.take("connack").map((p) => p.reasonCode)).toEqual([0x84]);
  });

  test("an acknowledgement of the wrong kind for a message in flight is a protocol error", async () => {
    const world = new DoorWorld();
    const sub = await world.connected("sub");
    subscribe(sub, "k/#", 2);
    await world.settle();
    await publishAll(world, "k/x", ["two"]);
    const [message] = sub.take("publish");
    sub.send({ type: "puback", packetId: message.packetId ?? 0, reasonCode: 0, properties: {} });
    await world.settle();
    expect(sub.take("disconnect").map((p) => p.reasonCode)).toEqual([0x82]);
  });

  test("a client with a small Maximum Packet Size still gets CONNACK's limits", async () => {
    const world = new DoorWorld();
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "tiny",
      cleanStart: true,
      keepAlive: 60,
      properties: { maximumPacketSize: 20 },
    });
    await world.settle();
    const [connack] = client.take("connack");
    expect(connack.properties.receiveMaximum).toBe(1024);
    expect(connack.properties.topicAliasMaximum).toBe(64);
  });
});

test("a PUBLISH that fits the client's Maximum Packet Size only without aria-seq goes without it", async () => {
  const world = new DoorWorld();
  const sub = world.client(5);
  sub.send({
    type: "connect",
    protocolVersion: 5,
    clientId: "twenty",
    cleanStart: true,
    keepAlive: 10,
    properties: { maximumPacketSize: 20 },
  });
  await world.settle();
  subscribe(sub, "test/topic", 0);
  await world.settle();
  await publishAll(world, "test/topic", ["12345678901234567890", "67890"]);
  const got = sub.take("publish");
  expect(got.map((p) => [text(p.payload), p.properties])).toEqual([["67890", {}]]);
});

describe("MQTT session: No Local across connections", () => {
  const subscribeNoLocal = (client: Client, filter: string, from?: string) =>
    client.send({
      type: "subscribe",
      packetId: 8,
      subscriptions: [
        { filter, qos: 1, noLocal: true, retainAsPublished: false, retainHandling: 0 },
      ],
      properties: from === undefined ? {} : { userProperties: [["aria-from", from]] },
    });

  test("what an earlier connection of the client id published is not delivered back, after a restart too", async () => {
    const store = new MemoryStore();
    const before = new DoorWorld({ store });
    const first = await before.connected("nl");
    publish(first, "n/x", "mine-1", 1, 1);
    await before.settle();
    first.send({ type: "disconnect", reasonCode: 0, properties: {} });
    await publishAll(before, "n/x", ["theirs-1"]);
    // A new connection of the same client id replays the log with No Local: its own are skipped.
    const second = await before.connected("nl");
    subscribeNoLocal(second, "n/#", "earliest");
    await before.settle();
    expect(payloads(second)).toEqual(["theirs-1"]);
    // The retained message of a topic (its newest) published by this client id: not sent either.
    publish(second, "n/own", "mine-2", 1, 2);
    await before.settle();
    const third = await before.connected("nl");
    subscribeNoLocal(third, "n/own");
    await before.settle();
    expect(payloads(third)).toEqual([]);
    // After a restart of the server: the origin is in the log, not in the door's memory.
    const after = new DoorWorld({ store });
    const fourth = await after.connected("nl");
    subscribeNoLocal(fourth, "n/#", "earliest");
    await after.settle();
    expect(payloads(fourth)).toEqual(["theirs-1"]);
    // Another client id gets them all, without the door's aria-origin.
    const other = await after.connected("other");
    subscribe(other, "n/#", 1, [["aria-from", "earliest"]]);
    await after.settle();
    const got = other.take("publish");
    expect(got.map((p) => text(p.payload))).toEqual(["mine-1", "theirs-1", "mine-2"]);
    for (const p of got)
      expect(p.properties.userProperties?.map(([name]) => name)).toEqual(["aria-seq"]);
  });
});
