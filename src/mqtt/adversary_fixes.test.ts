/**
 * What an outside adversary found in the MQTT door (issue 30): each test fails without its fix.
 */
import { describe, expect, test } from "bun:test";
import { userFromRecord, Users } from "../auth/mod.ts";
import {
  type DoorWorld as World,
  DoorWorld,
  type FakeMqttClient,
} from "./mqtt_door_test_support.ts";
import { Filter } from "../topic/mod.ts";
import type { ProtocolVersion } from "./packets.ts";
import { decodeStoredProperties } from "./stored_properties.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const bytesOf = (s: string) => new TextEncoder().encode(s);

function payloads(client: FakeMqttClient): string[] {
  return client.take("publish").map((p) => text(p.payload));
}

function subscribe(client: FakeMqttClient, filter: string, qos: 0 | 1 | 2 = 0): void {
  client.send({
    type: "subscribe",
    packetId: 1,
    subscriptions: [{ filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0 }],
    properties: {},
  });
}

function publishQos2(client: FakeMqttClient, topic: string, payload: string, dup: boolean): void {
  client.send({
    type: "publish",
    topic,
    payload: bytesOf(payload),
    qos: 2,
    retain: false,
    dup,
    packetId: 10,
    properties: {},
  });
}

function reconnect(world: World, clientId: string, version: ProtocolVersion): FakeMqttClient {
  const client = world.client(version);
  client.send({
    type: "connect",
    protocolVersion: version,
    clientId,
    cleanStart: false,
    keepAlive: 0,
    properties: version === 5 ? { sessionExpiryInterval: 3600 } : {},
  });
  return client;
}

describe("QoS 2 exactly once across a reconnect (MQTT-4.3.3: the received ids are session state)", () => {
  for (const [version, how] of [
    [5, "drop"],
    [4, "drop"],
    [5, "takeover"],
  ] as const) {
    test(`MQTT ${version === 5 ? "5" : "3.1.1"}, ${how}: PUBLISH pid 10, reconnect, DUP PUBLISH pid 10, PUBREL: once`, async () => {
      const world = new DoorWorld();
      const sub = await world.connected("sub");
      subscribe(sub, "q2/#");
      const first = await world.connected("pub", { version, cleanStart: false, expiryS: 3600 });
      publishQos2(first, "q2/a", "once", false);
      await world.settle();
      if (how === "drop") {
        first.drop();
        await world.settle();
      }
      const again = reconnect(world, "pub", version);
      await world.settle();
      expect(again.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
      publishQos2(again, "q2/a", "once", true);
      await world.settle();
      expect(again.take("pubrec").map((p) => [p.packetId, p.reasonCode])).toEqual([[10, 0]]);
      again.send({ type: "pubrel", packetId: 10, reasonCode: 0, properties: {} });
      await world.settle();
      expect(again.take("pubcomp").map((p) => [p.packetId, p.reasonCode])).toEqual([[10, 0]]);
      expect(payloads(sub)).toEqual(["once"]);
      // The id is free again: a new PUBLISH with it is a new message.
      publishQos2(again, "q2/a", "next", false);
      await world.settle();
      expect(payloads(sub)).toEqual(["next"]);
    });
  }

  test("a clean start forgets them: the same id is a new message", async () => {
    const world = new DoorWorld();
    const sub = await world.connected("sub");
    subscribe(sub, "q2/#");
    const first = await world.connected("pub", { cleanStart: false, expiryS: 3600 });
    publishQos2(first, "q2/a", "one", false);
    await world.settle();
    first.drop();
    await world.settle();
    const clean = await world.connected("pub", { cleanStart: true });
    publishQos2(clean, "q2/a", "two", false);
    await world.settle();
    expect(payloads(sub)).toEqual(["one", "two"]);
  });
});

describe("retained messages are read in bounded batches under the session's back-pressure", () => {
  const TOPICS = 2_000;
  const PAYLOAD = "x".repeat(1_000);

  /** A world with TOPICS retained messages of 1 KB, and a count of the messages Latest reads. */
  async function world(): Promise<{ world: World; reads: () => number }> {
    const world = new DoorWorld();
    const pub = await world.connected("pub");
    for (let i = 0; i < TOPICS; i++)
      pub.send({
        type: "publish",
        topic: `dt/${i}`,
        payload: bytesOf(PAYLOAD),
        qos: 0,
        retain: true,
        dup: false,
        properties: {},
      });
    await world.settle();
    // Latest reads every message it gives from the tip first (then the store), old code or new.
    const latest = (world.broker as unknown as { latest: Record<string, unknown> }).latest;
    let reads = 0;
    const fromTip = latest.fromTip as (...args: unknown[]) => unknown;
    latest.fromTip = function (this: unknown, ...args: unknown[]) {
      reads++;
      return fromTip.apply(this, args);
    };
    return { world, reads: () => reads };
  }

  const subscribeAll = (client: FakeMqttClient, times: number) => {
    for (let i = 0; i < times; i++) subscribe(client, "dt/#", 1);
  };

  test("a client that does not read: 20 SUBSCRIBEs read a bounded number, none after it left", async () => {
    const { world: w, reads } = await world();
    const client = await w.connected("slow");
    client.budget = 0; // its socket takes nothing
    subscribeAll(client, 20);
    await w.settle();
    const whileConnected = reads();
    // Old: 20 x 2,000 messages read and held. Now: what fills the held bytes, a batch or so more.
    expect(whileConnected).toBeGreaterThan(0);
    expect(whileConnected).toBeLessThan(1_000);
    client.drop();
    await w.settle();
    subscribeAll(await w.connected("other"), 0);
    await w.settle();
    expect(reads()).toBe(whileConnected);
  });

  test("a client that reads a little at a time gets every retained message once", async () => {
    const { world: w, reads } = await world();
    const client = await w.connected("reader");
    client.budget = 0;
    subscribe(client, "dt/#", 0);
    await w.settle();
    const before = reads();
    expect(before).toBeLessThan(1_000);
    for (let round = 0; round < 1_000 && client.received.length < TOPICS; round++) {
      client.read(64 * 1024);
      await w.settle();
    }
    const got = client.take("publish");
    expect(got.length).toBe(TOPICS);
    expect(new Set(got.map((p) => p.topic)).size).toBe(TOPICS);
    expect(got.every((p) => p.retain)).toBe(true);
    expect(reads()).toBe(TOPICS);
  });
});

test("user properties named aria-… are Aria's: a publisher's aria-seq/aria-from are dropped", async () => {
  const world = new DoorWorld();
  const sub = await world.connected("sub");
  subscribe(sub, "up/#");
  await world.settle();
  const pub = await world.connected("pub");
  pub.send({
    type: "publish",
    topic: "up/a",
    payload: bytesOf("m"),
    qos: 0,
    retain: false,
    dup: false,
    properties: {
      userProperties: [
        ["aria-seq", "999"],
        ["k", "v"],
        ["aria-from", "earliest"],
        ["aria-x", "y"],
      ],
    },
  });
  await world.settle();
  const [got] = sub.take("publish");
  expect(got.properties.userProperties).toEqual([
    ["k", "v"],
    ["aria-seq", "1"],
  ]);
  // Nor does the log keep them (a native subscriber, a later retained read).
  const [stored] = await world.broker.latestOf(Filter.of("up/a"));
  expect(decodeStoredProperties(stored.properties).properties.userProperties).toEqual([["k", "v"]]);
  // A native publisher's (raw properties bytes) are not given to MQTT subscribers either.
  const str = (v: string) => [0, v.length, ...bytesOf(v)];
  const native = Uint8Array.from([
    0x26,
    ...str("aria-seq"),
    ...str("999"),
    0x26,
    ...str("k"),
    ...str("v"),
  ]);
  expect(decodeStoredProperties(native).properties.userProperties).toEqual([["k", "v"]]);
});

describe("a kept session belongs to its user", () => {
  const everyone = (name: string) =>
    userFromRecord({
      name,
      tokenHash: `fake$${name}-secret`,
      certSubject: null,
      publish: { allow: ["**"], deny: [] },
      subscribe: { allow: ["**"], deny: [] },
      roles: [],
    });
  const users = () =>
    new Users([everyone("alice"), everyone("bob")], {
      verify: async (secret, stored) => stored === `fake$${secret}`,
      digest: (token) => `digest:${token}`,
    });
  const signIn = (world: World, user: string) => {
    const client = world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: "same",
      cleanStart: false,
      keepAlive: 0,
      username: user,
      password: bytesOf(`${user}-secret`),
      properties: { sessionExpiryInterval: 3600 },
    });
    return client;
  };

  test("another user with the same client id gets no session: not its subscriptions, not its consumers", async () => {
    const world = new DoorWorld({ users: users() });
    const alice = signIn(world, "alice");
    await world.settle();
    expect(alice.take("connack").map((p) => p.reasonCode)).toEqual([0]);
    subscribe(alice, "t/#", 1);
    await world.settle();
    alice.drop();
    await world.settle();
    const pub = signIn(world, "alice");
    await world.settle();
    pub.send({
      type: "publish",
      topic: "t/x",
      payload: bytesOf("for alice"),
      qos: 0,
      retain: false,
      dup: false,
      properties: {},
    });
    await world.settle();
    pub.send({ type: "disconnect", reasonCode: 0, properties: {} });
    await world.settle();
    const bob = signIn(world, "bob");
    await world.settle();
    expect(bob.take("connack").map((p) => p.sessionPresent)).toEqual([false]);
    expect(payloads(bob)).toEqual([]);
    // Subscribing to the same filter: alice's consumer is not bob's.
    subscribe(bob, "t/#", 1);
    await world.settle();
    expect(bob.take("suback").map((p) => p.reasonCodes)).toEqual([[0x87]]);
    expect(payloads(bob)).toEqual([]);
  });
});
