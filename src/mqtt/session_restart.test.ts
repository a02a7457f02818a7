/**
 * Persistent MQTT sessions across a restart of the server: a real broker (memory store, kept
 * across the restart) and the real consumers file in a temporary directory, written as the server
 * writes it (fsync always) and reopened without being closed, as after `kill -9`. Each test checks
 * one part of issue 30's session state: flights again with DUP and their packet ids, PUBREL again,
 * an inbound QoS 2 id, wills waiting for their delay, the expiry clock, subscription options.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { userFromRecord, Users } from "../auth/mod.ts";
import { ConsumerFile } from "../runtime/consumer_file.ts";
import { nativeCrc32 } from "../runtime/crc32.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { DoorWorld } from "./mqtt_door_test_support.ts";
import type { Packet, Will } from "./packets.ts";

const root = mkdtempSync(join(tmpdir(), "aria-mqtt-restart-"));
/** Every file opened (a "killed" server's is closed only at the end). */
const files: ConsumerFile[] = [];
afterAll(async () => {
  for (const file of files) await file.close();
  rmSync(root, { recursive: true, force: true });
});
let dirs = 0;
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const bytesOf = (s: string) => new TextEncoder().encode(s);

/** A server: a broker on `store`, its door, and the consumers file of `dir`. */
async function server(store: MemoryStore, dir: string, timeUs: number, users?: Users) {
  const file = await ConsumerFile.open(dir, { fsync: "always", crc32: nativeCrc32 });
  files.push(file);
  const world = new DoorWorld({ store, consumerStore: file, sessions: file, timeUs, users });
  // The file's writes settle too (a PUBREC waits for one).
  const settle = world.settle.bind(world);
  world.settle = async () => {
    await settle();
    await file.flush();
    await settle();
  };
  await world.settle();
  return { world, file };
}

function connect(
  world: DoorWorld,
  clientId: string,
  options: { expiryS?: number; will?: Will; cleanStart?: boolean } = {},
) {
  const client = world.client(5);
  client.send({
    type: "connect",
    protocolVersion: 5,
    clientId,
    cleanStart: options.cleanStart ?? false,
    keepAlive: 0,
    will: options.will,
    properties: { sessionExpiryInterval: options.expiryS ?? 3600 },
  });
  return client;
}

function publish(
  client: ReturnType<DoorWorld["client"]>,
  topic: string,
  payload: string,
  qos: 0 | 1 | 2,
  packetId?: number,
  dup = false,
) {
  client.send({
    type: "publish",
    topic,
    payload: bytesOf(payload),
    qos,
    retain: false,
    dup,
    packetId,
    properties: {},
  });
}

/** What a replay of `filter` from the earliest message holds (payloads). */
async function replay(world: DoorWorld, filter: string): Promise<string[]> {
  const reader = world.client(5);
  reader.send({
    type: "connect",
    protocolVersion: 5,
    clientId: `reader-${dirs++}`,
    cleanStart: true,
    keepAlive: 0,
    properties: {},
  });
  reader.send({
    type: "subscribe",
    packetId: 1,
    subscriptions: [
      { filter, qos: 0, noLocal: false, retainAsPublished: false, retainHandling: 2 },
    ],
    properties: { userProperties: [["aria-from", "earliest"]] },
  });
  await world.settle();
  return reader.take("publish").map((p) => text(p.payload));
}

const T0 = 1_800_000_000_000_000;

test("QoS 1 and 2 in flight come again after a restart: DUP, their packet ids, in order; PUBREL again; options and identifier kept", async () => {
  const store = new MemoryStore();
  const dir = mkdtempSync(join(root, "flights-"));
  const first = await server(store, dir, T0);
  const sub = connect(first.world, "keeper");
  sub.send({
    type: "subscribe",
    packetId: 3,
    subscriptions: [
      { filter: "f/#", qos: 2, noLocal: true, retainAsPublished: true, retainHandling: 2 },
    ],
    properties: { subscriptionIdentifiers: [42] },
  });
  await first.world.settle();
  const pub = connect(first.world, "pub", { expiryS: 0, cleanStart: true });
  publish(pub, "f/a", "m1", 1, 1);
  publish(pub, "f/a", "m2", 2, 2);
  publish(pub, "f/b", "m3", 2, 3);
  publish(pub, "f/b", "m4", 1, 4);
  await first.world.settle();
  const sent = sub.take("publish");
  expect(sent.map((p) => [text(p.payload), p.qos, p.dup])).toEqual([
    ["m1", 1, false],
    ["m2", 2, false],
    ["m3", 2, false],
    ["m4", 1, false],
  ]);
  const ids = sent.map((p) => p.packetId ?? 0);
  // m4 acknowledged out of order; m3 received (PUBREC): PUBREL awaits PUBCOMP.
  sub.send({ type: "puback", packetId: ids[3], reasonCode: 0, properties: {} });
  sub.send({ type: "pubrec", packetId: ids[2], reasonCode: 0, properties: {} });
  await first.world.settle();
  expect(sub.take("pubrel").map((p) => p.packetId)).toEqual([ids[2]]);
  // kill -9: the file is not closed; a new server reads what was written.
  const second = await server(store, dir, T0 + 5_000_000);
  const again = connect(second.world, "keeper");
  await second.world.settle();
  expect(again.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
  const order = again.received.filter((p) => p.type === "publish" || p.type === "pubrel");
  const seen = order.map((p: Packet) =>
    p.type === "pubrel"
      ? ["pubrel", p.packetId]
      : p.type === "publish"
        ? [
            text(p.payload),
            p.packetId,
            p.qos,
            p.dup,
            p.retain,
            p.properties.subscriptionIdentifiers,
          ]
        : [],
  );
  expect(seen).toEqual([
    ["pubrel", ids[2]],
    ["m1", ids[0], 1, true, false, [42]],
    ["m2", ids[1], 2, true, false, [42]],
  ]);
  again.take("publish");
  again.take("pubrel");
  // No Local came back: the client's own publish is not delivered to it; another's is, with a
  // packet id none of the restored ones use.
  publish(again, "f/own", "own", 1, 9);
  await second.world.settle();
  const pub2 = connect(second.world, "pub", { expiryS: 0, cleanStart: true });
  publish(pub2, "f/c", "m5", 1, 1);
  await second.world.settle();
  const later = again.take("publish");
  expect(later.map((p) => text(p.payload))).toEqual(["m5"]);
  expect(ids.slice(0, 3)).not.toContain(later[0].packetId);
  // Acknowledging the restored flights lets the session's position move past them.
  again.send({ type: "puback", packetId: ids[0], reasonCode: 0, properties: {} });
  again.send({ type: "pubrec", packetId: ids[1], reasonCode: 0, properties: {} });
  again.send({ type: "pubcomp", packetId: ids[2], reasonCode: 0, properties: {} });
  await second.world.settle();
  expect(again.take("pubrel").map((p) => p.packetId)).toEqual([ids[1]]);
  expect(again.closed).toBe(false);
});

test("an inbound QoS 2 id awaiting PUBREL survives a restart: the resent PUBLISH gets PUBREC and is published once", async () => {
  const store = new MemoryStore();
  const dir = mkdtempSync(join(root, "inbound-"));
  const first = await server(store, dir, T0);
  const client = connect(first.world, "q2");
  await first.world.settle();
  publish(client, "in/x", "once", 2, 9);
  await first.world.settle();
  expect(client.take("pubrec").map((p) => p.packetId)).toEqual([9]);
  const second = await server(store, dir, T0 + 1_000_000);
  const again = connect(second.world, "q2");
  await second.world.settle();
  publish(again, "in/x", "once", 2, 9, true);
  await second.world.settle();
  expect(again.take("pubrec").map((p) => [p.packetId, p.reasonCode])).toEqual([[9, 0]]);
  again.send({ type: "pubrel", packetId: 9, reasonCode: 0, properties: {} });
  await second.world.settle();
  expect(again.take("pubcomp").map((p) => [p.packetId, p.reasonCode])).toEqual([[9, 0]]);
  expect(await replay(second.world, "in/#")).toEqual(["once"]);
});

test("a will waiting for its delay fires after a restart at its time, or at once when overdue", async () => {
  const store = new MemoryStore();
  const dir = mkdtempSync(join(root, "wills-"));
  const first = await server(store, dir, T0);
  const will = (topic: string, delayS: number): Will => ({
    topic,
    payload: bytesOf(`gone:${topic}`),
    qos: 1,
    retain: false,
    properties: { willDelayInterval: delayS },
  });
  const late = connect(first.world, "late", { will: will("wills/late", 30), expiryS: 100 });
  const soon = connect(first.world, "soon", { will: will("wills/soon", 5), expiryS: 100 });
  await first.world.settle();
  late.drop();
  soon.drop();
  await first.world.advance(2_000_000);
  expect(await replay(first.world, "wills/#")).toEqual([]);
  // The server stops at T0 + 2 s and starts at T0 + 20 s: "soon" is overdue, "late" is not.
  const second = await server(store, dir, T0 + 20_000_000);
  expect(await replay(second.world, "wills/#")).toEqual(["gone:wills/soon"]);
  await second.world.advance(5_000_000);
  expect(await replay(second.world, "wills/#")).toEqual(["gone:wills/soon"]);
  await second.world.advance(6_000_000);
  expect(await replay(second.world, "wills/#")).toEqual(["gone:wills/soon", "gone:wills/late"]);
  // Published once: a third start publishes neither again.
  await second.world.settle();
  const third = await server(store, dir, T0 + 40_000_000);
  await third.world.advance(1_000_000);
  expect(await replay(third.world, "wills/#")).toEqual(["gone:wills/soon", "gone:wills/late"]);
});

test("on a server with users, a restored will is published as its client's user, with that user's permissions", async () => {
  const user = (name: string, allow: string[]) =>
    userFromRecord({
      name,
      tokenHash: `fake$${name}-secret`,
      certSubject: null,
      publish: { allow, deny: [] },
      subscribe: { allow: ["**"], deny: [] },
      roles: [],
    });
  const users = () =>
    new Users([user("alice", ["**"]), user("bob", ["bob/**"])], {
      verify: async (secret, stored) => stored === `fake$${secret}`,
      digest: (token) => `digest:${token}`,
    });
  const store = new MemoryStore();
  const dir = mkdtempSync(join(root, "user-wills-"));
  const first = await server(store, dir, T0, users());
  for (const [name, topic] of [
    ["alice", "wills/alice"],
    ["bob", "wills/bob"], // outside bob's publish permission: refused after the restart too
  ]) {
    const client = first.world.client(5);
    client.send({
      type: "connect",
      protocolVersion: 5,
      clientId: `c-${name}`,
      cleanStart: false,
      keepAlive: 0,
      username: name,
      password: bytesOf(`${name}-secret`),
      will: {
        topic,
        payload: bytesOf(`gone:${name}`),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 30 },
      },
      properties: { sessionExpiryInterval: 100 },
    });
    await first.world.settle();
    expect(client.take("connack").map((p) => p.reasonCode)).toEqual([0]);
    client.drop();
  }
  await first.world.settle();
  const second = await server(store, dir, T0 + 60_000_000, users());
  await second.world.advance(1_000_000);
  const reader = second.world.client(5);
  reader.send({
    type: "connect",
    protocolVersion: 5,
    clientId: "reader",
    cleanStart: true,
    keepAlive: 0,
    username: "alice",
    password: bytesOf("alice-secret"),
    properties: {},
  });
  reader.send({
    type: "subscribe",
    packetId: 1,
    subscriptions: [
      { filter: "wills/#", qos: 0, noLocal: false, retainAsPublished: false, retainHandling: 2 },
    ],
    properties: { userProperties: [["aria-from", "earliest"]] },
  });
  await second.world.settle();
  expect(reader.take("publish").map((p) => text(p.payload))).toEqual(["gone:alice"]);
});

test("a returning client cancels its restored will; the expiry clock goes on across a restart", async () => {
  const store = new MemoryStore();
  const dir = mkdtempSync(join(root, "expiry-"));
  const first = await server(store, dir, T0);
  const subscribeTo = (client: ReturnType<DoorWorld["client"]>, filter: string) =>
    client.send({
      type: "subscribe",
      packetId: 1,
      subscriptions: [
        { filter, qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 2 },
      ],
      properties: {},
    });
  const short = connect(first.world, "short", { expiryS: 10 });
  const long = connect(first.world, "long", {
    expiryS: 1000,
    will: {
      topic: "w/long",
      payload: bytesOf("x"),
      qos: 0,
      retain: false,
      properties: { willDelayInterval: 60 },
    },
  });
  subscribeTo(short, "s/#");
  subscribeTo(long, "l/#");
  await first.world.settle();
  short.drop();
  long.drop();
  await first.world.settle();
  const names = (world: DoorWorld) => world.broker.consumerList().map((c) => c.name.split(".")[0]);
  expect(names(first.world).sort()).toEqual(["mqtt/long", "mqtt/short"]);
  // Down for 30 s: "short" (10 s) expired meanwhile and goes at start-up with its consumer.
  const second = await server(store, dir, T0 + 30_000_000);
  expect(names(second.world)).toEqual(["mqtt/long"]);
  const back = connect(second.world, "long");
  await second.world.settle();
  expect(back.take("connack").map((p) => p.sessionPresent)).toEqual([true]);
  await second.world.advance(120_000_000);
  expect(await replay(second.world, "w/#")).toEqual([]);
  const gone = connect(second.world, "short");
  await second.world.settle();
  expect(gone.take("connack").map((p) => p.sessionPresent)).toEqual([false]);
});

test("session state bytes: decode(encode(s)) gives s back; cut or unknown bytes decode to null", async () => {
  const { decodeSessionState, encodeSessionState } = await import("./session_state.ts");
  const state = {
    clientId: "c-é",
    signedInAs: '["u",""]',
    expiryS: 0xffff_ffff,
    releasedUs: T0,
    connected: false,
    subscriptions: [
      {
        filter: "a/+/#",
        options: {
          filter: "a/+/#",
          qos: 2 as const,
          noLocal: true,
          retainAsPublished: false,
          retainHandling: 1 as const,
        },
        identifier: 7,
        startSeq: 12,
        below: 40,
        again: [13, 20],
        flights: [{ seq: 14, packetId: 65_535, qos: 2 as const }],
      },
    ],
    pubrelIds: [3],
    qos2Received: [1, 2],
    will: {
      topic: "w",
      payload: bytesOf("p"),
      properties: Uint8Array.of(1, 0),
      qos: 1 as const,
      delayS: 5,
      dueUs: T0 + 5,
    },
  };
  const bytes = encodeSessionState(state);
  expect(decodeSessionState(bytes)).toEqual(state);
  // Consecutive seqs and packet ids (wrapping after 65,535) are runs: a window costs a few bytes.
  const window = Array.from({ length: 1024 }, (_, i) => ({
    seq: 1000 + i,
    packetId: ((65_000 + i - 1) % 65_535) + 1,
    qos: 1 as const,
  }));
  const held = Array.from({ length: 5000 }, (_, i) => 3000 + i);
  const sub = { ...state.subscriptions[0], below: 9000, again: held, flights: window };
  const busy = { ...state, subscriptions: [sub] };
  const busyBytes = encodeSessionState(busy);
  expect(busyBytes.length).toBeLessThan(bytes.length + 64);
  expect(decodeSessionState(busyBytes)).toEqual(busy);
  expect(decodeSessionState(bytes.subarray(0, bytes.length - 1))).toBeNull();
  expect(decodeSessionState(Uint8Array.of(9, ...bytes.subarray(1)))).toBeNull();
});

test("a persistent session's PUBREC waits until the QoS 2 id is durable (a clean session's does not)", async () => {
  // A store whose writes happen only when the test says: what was saved, and who waits.
  const saved = new Map<string, () => Uint8Array | null>();
  let waiting: (() => void)[] = [];
  const written = new Map<string, Uint8Array | null>();
  const sessions = {
    loadStates: () => new Map<string, Uint8Array>(),
    saveState: (name: string, encode: () => Uint8Array | null) => void saved.set(name, encode),
    whenDurable: (done: () => void) => void waiting.push(done),
  };
  const write = () => {
    for (const [name, encode] of saved) written.set(name, encode());
    saved.clear();
    for (const done of waiting.splice(0)) done();
    waiting = [];
  };
  const world = new DoorWorld({ store: new MemoryStore(), sessions, timeUs: T0 });
  const kept = connect(world, "kept");
  const clean = connect(world, "clean", { expiryS: 0, cleanStart: true });
  await world.settle();
  publish(kept, "d/x", "k", 2, 5);
  publish(clean, "d/x", "c", 2, 6);
  await world.settle();
  expect(clean.take("pubrec").map((p) => p.packetId)).toEqual([6]);
  expect(kept.take("pubrec")).toEqual([]);
  write();
  expect(kept.take("pubrec").map((p) => p.packetId)).toEqual([5]);
  const { decodeSessionState, sessionStateName } = await import("./session_state.ts");
  const state = written.get(sessionStateName("kept"));
  expect(state && decodeSessionState(state)?.qos2Received).toEqual([5]);
});
