/**
 * Users in the broker: HELLO signs in as a user (a token verified off the event loop, then
 * remembered), a failed sign-in is counted, logged and answered after a delay that grows per
 * address, a publish or subscription outside the user's permissions is refused naming the topic
 * or entry, and a reload keeps connections while it applies the new permissions.
 */
import { createLog } from "../stdx/log.ts";
import { expect, test } from "bun:test";
import { FailureThrottle, type User, userFromRecord, Users } from "../auth/mod.ts";
import { PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type ErrorFrame,
  FrameDecoder,
  FrameWriter,
  type OutgoingFrame,
} from "../protocol/mod.ts";
import { MemoryStore } from "../testing/memory_store.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Broker } from "./broker.ts";

const ENCODER = new TextEncoder();

function user(name: string, publish: string[], subscribe: string[], deny: string[] = []): User {
  return userFromRecord({
    name,
    tokenHash: `fake$${name}-secret`,
    certSubject: null,
    publish: { allow: publish, deny },
    subscribe: { allow: subscribe, deny },
    roles: [],
  });
}

/** A client connection that decodes what the broker writes to it. */
class Client {
  id = 0;
  closed = false;
  /** While true the connection takes no byte (a client that does not read). */
  blocked = false;
  readonly frames: { kind: string; [key: string]: unknown }[] = [];
  private readonly decoder = new FrameDecoder();
  readonly connection = {
    remoteAddress: "10.0.0.7",
    write: (bytes: Uint8Array) => {
      if (this.blocked) return 0;
      this.decoder.push(bytes.slice());
      for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next())
        this.frames.push(frame.kind === "data" ? { kind: "data" } : (frame as never));
      return bytes.length;
    },
    close: () => {
      this.closed = true;
    },
  };
  errors(): string[] {
    return (this.frames.filter((f) => f.kind === "error") as unknown as ErrorFrame[]).map(
      (e) => `${e.code}${e.fatal ? " fatal" : ""}: ${e.reason}`,
    );
  }
  kinds(): string[] {
    return this.frames.map((f) => f.kind);
  }
}

function world(users: User[]) {
  const topics = new TopicTable();
  const tasks: (() => void)[] = [];
  const timers: { delayMs: number; run: () => void }[] = [];
  const logged: string[] = [];
  const verified: string[] = [];
  const registry = new Users(users, {
    verify: async (secret, stored) => {
      verified.push(secret);
      return stored === `fake$${secret}`;
    },
    digest: (token) => `digest:${token}`,
  });
  let timeUs = 1_000_000;
  const broker = new Broker({
    topics,
    tip: new Tip(topics, { capacityBytes: 1 << 16, poolBlocks: 16 }),
    store: new MemoryStore(),
    clock: { nowUs: () => (timeUs += 10) },
    scheduler: { soon: (task) => tasks.push(task) },
    signIn: {
      users: registry,
      throttle: new FailureThrottle(),
      scheduleAfter: (delayMs, run) => timers.push({ delayMs, run }),
    },
    log: createLog({
      level: "info",
      format: "text",
      sink: (line) => logged.push(line),
      nowMs: () => Date.UTC(2026, 11, 3),
    }),
  });
  const send = (client: Client, ...frames: OutgoingFrame[]) => {
    const writer = new FrameWriter();
    for (const frame of frames) encodeFrame(writer, frame);
    broker.receive(client.id, writer.bytes().slice());
  };
  const connect = (address = "10.0.0.7") => {
    const client = new Client();
    client.id = broker.open({ ...client.connection, remoteAddress: address });
    return client;
  };
  const hello = (token: string | null): OutgoingFrame => ({
    kind: "hello",
    version: PROTOCOL_VERSION,
    clientName: "t",
    authToken: token,
  });
  const settle = async () => {
    for (let round = 0; round < 1000; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      if (tasks.length === 0) return;
      for (const task of tasks.splice(0)) task();
    }
  };
  /** A client signed in with `token`. */
  const signedIn = async (token: string) => {
    const client = connect();
    send(client, hello(token));
    await settle();
    expect(client.kinds()).toEqual(["welcome"]);
    return client;
  };
  return { broker, registry, send, connect, hello, settle, signedIn, timers, logged, verified };
}

const publish = (requestId: number, ...topics: string[]): OutgoingFrame => ({
  kind: "publish",
  requestId,
  messages: topics.map((topic) => ({ topic, payload: ENCODER.encode("x") })),
});
const subscribe = (subscriptionId: number, ...filter: string[]): OutgoingFrame => ({
  kind: "subscribe",
  subscriptionId,
  start: { kind: "live" },
  filter: Filter.of(...filter),
});

test("a publish outside the user's permissions is refused whole, naming the topic", async () => {
  const w = world([user("orders", ["app/orders/**"], [], ["app/orders/audit/**"])]);
  const client = await w.signedIn("orders:orders-secret");
  w.send(client, publish(1, "app/orders/eu"));
  w.send(client, publish(2, "app/orders/eu", "app/payments/eu", "app/orders/us"));
  w.send(client, publish(3, "app/orders/audit/x"));
  await w.settle();
  expect(client.errors()).toEqual([
    'ARIA_ERR_PERMISSION_DENIED: user "orders" may not publish to "app/payments/eu"',
    'ARIA_ERR_PERMISSION_DENIED: user "orders" may not publish to "app/orders/audit/x"',
  ]);
  const acks = client.frames.filter((f) => f.kind === "publish_ack");
  expect(acks.map((a) => [a.requestId, a.count])).toEqual([[1, 1]]);
  expect(w.broker.stats().messagesPublished).toBe(1);
  expect(client.closed).toBe(false);
});

test("a subscription reaching outside is refused, never narrowed", async () => {
  const w = world([user("reader", [], ["app/orders/**"])]);
  const client = await w.signedIn("reader:reader-secret");
  w.send(client, subscribe(1, "app/**"), subscribe(2, "app/orders/eu", "app/x"));
  w.send(client, subscribe(3, "app/orders/**"));
  await w.settle();
  expect(client.errors()).toEqual([
    'ARIA_ERR_PERMISSION_DENIED: user "reader" may not subscribe to "app/**" (a filter is refused whole, never narrowed)',
    'ARIA_ERR_PERMISSION_DENIED: user "reader" may not subscribe to "app/x" (a filter is refused whole, never narrowed)',
  ]);
  expect(w.broker.stats().subscriptions).toBe(1);
});

test("a token is verified once, off the event loop; frames sent behind HELLO wait for it", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  const client = w.connect();
  // HELLO and a PUBLISH in one chunk: the PUBLISH is read only after WELCOME.
  w.send(client, w.hello("orders:orders-secret"), publish(1, "app/a"));
  expect(client.kinds()).toEqual([]);
  await w.settle();
  expect(client.kinds()).toEqual(["welcome", "publish_ack"]);
  // A reconnect with the same token is answered at once, without the KDF.
  const again = w.connect();
  w.send(again, w.hello("orders:orders-secret"));
  expect(again.kinds()).toEqual(["welcome"]);
  expect(w.verified).toEqual(["orders-secret"]);
});

test("failed sign-ins are counted, logged and answered after a delay growing per address", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  const tries = ["orders:wrong", null, "no-colon", "nobody:x"];
  const clients = [];
  for (const token of tries) {
    const client = w.connect();
    w.send(client, w.hello(token), publish(1, "app/a"));
    await w.settle();
    // Nothing yet: the ERROR waits for its delay.
    expect(client.kinds()).toEqual([]);
    clients.push(client);
  }
  // Three ERRORs wait; the fourth token waits out the address's penalty before its KDF runs.
  expect(w.timers.map((t) => Math.round(t.delayMs))).toEqual([100, 200, 400, 400]);
  expect(w.verified).toEqual(["wrong"]);
  const [verifyFourth] = w.timers.splice(3, 1);
  verifyFourth.run();
  await w.settle();
  expect(w.timers.map((t) => Math.round(t.delayMs)).at(-1)).toBe(800);
  for (const timer of w.timers.splice(0)) timer.run();
  expect(clients.map((c) => c.errors())).toEqual([
    ["ARIA_ERR_AUTH_FAILED fatal: wrong auth token"],
    ["ARIA_ERR_AUTH_FAILED fatal: this server requires an auth token"],
    ["ARIA_ERR_AUTH_FAILED fatal: wrong auth token"],
    ["ARIA_ERR_AUTH_FAILED fatal: wrong auth token"],
  ]);
  expect(w.broker.stats().authFailures).toBe(4);
  expect(w.broker.stats().messagesPublished).toBe(0);
  expect(w.logged.filter((line) => line.includes("sign-in failed"))[0]).toMatch(
    /^2026-12-03T00:00:00\.000Z WARN sign-in failed session=\d+ address=10\.0\.0\.7 reason="wrong auth token" errorAfterMs=100\n$/,
  );
  // A token naming no user runs the KDF too (against another user's hash): no name oracle.
  expect(w.verified).toEqual(["wrong", "x"]);
});

test("parallel guesses from one address are verified one per penalty step", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  await w.signedIn("orders:orders-secret");
  const guesses = [1, 2, 3, 4, 5].map((i) => {
    const client = w.connect();
    w.send(client, w.hello(`orders:wrong${i}`));
    return client;
  });
  await w.settle();
  // One verified at once; the others wait for the address's turn.
  expect(w.verified).toEqual(["orders-secret", "wrong1"]);
  // From an address at the penalty, a token verified before is answered at once (a SHA-256),
  // a new token (right or wrong) waits in the address's queue.
  const known = w.connect();
  w.send(known, w.hello("orders:orders-secret"));
  expect(known.kinds()).toEqual(["welcome"]);
  const other = w.connect("10.0.0.8");
  w.send(other, w.hello("orders:elsewhere"));
  await w.settle();
  // Another address is not held up by this one's penalty.
  expect(w.verified).toEqual(["orders-secret", "wrong1", "elsewhere"]);
  const waits: number[] = [];
  for (let step = 2; step <= 5; step++) {
    // The timer before the next verification: the previous failure's delay.
    const wait = w.timers.findLast((t) => t.delayMs > 0 && t.delayMs % 100 !== 0);
    if (wait === undefined) throw new Error(`no wait before guess ${step}`);
    waits.push(Math.round(wait.delayMs));
    w.timers.splice(w.timers.indexOf(wait), 1);
    wait.run();
    await w.settle();
    expect(w.verified.at(-1)).toBe(`wrong${step}`);
  }
  expect(waits).toEqual([100, 200, 400, 800]);
  for (const timer of w.timers.splice(0)) timer.run();
  expect(guesses.map((c) => c.errors().length)).toEqual([1, 1, 1, 1, 1]);
});

test("a guess whose connection closes while it waits its turn is never verified", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  const first = w.connect();
  w.send(first, w.hello("orders:wrong1"));
  await w.settle();
  const second = w.connect();
  w.send(second, w.hello("orders:wrong2"));
  w.broker.closed(second.id);
  const third = w.connect();
  w.send(third, w.hello("orders:wrong3"));
  await w.settle();
  // The second's turn passes to the third, which waits the penalty again from then.
  for (let round = 0; round < 3; round++) {
    for (const timer of w.timers.splice(0)) timer.run();
    await w.settle();
  }
  expect(w.verified).toEqual(["wrong1", "wrong3"]);
  expect(third.errors()).toEqual(["ARIA_ERR_AUTH_FAILED fatal: wrong auth token"]);
});

test("a reload keeps connections and applies the new permissions to them", async () => {
  const w = world([user("orders", ["app/**"], ["app/**"]), user("old", ["x"], [])]);
  const client = await w.signedIn("orders:orders-secret");
  const removed = await w.signedIn("old:old-secret");
  w.send(client, subscribe(1, "app/orders/**"), subscribe(2, "app/payments/**"));
  await w.settle();
  w.registry.replace([user("orders", ["app/orders/**"], ["app/orders/**"])]);
  w.broker.usersReplaced();
  await w.settle();
  expect(client.closed).toBe(false);
  expect(client.errors()).toEqual([
    'ARIA_ERR_PERMISSION_DENIED: user "orders" may no longer subscribe to "app/payments/**": subscription 2 ended',
  ]);
  expect(w.broker.stats().subscriptions).toBe(1); // orders keeps subscription 1
  w.send(client, publish(7, "app/payments/eu"), publish(8, "app/orders/eu"));
  await w.settle();
  expect(client.errors().at(-1)).toBe(
    'ARIA_ERR_PERMISSION_DENIED: user "orders" may not publish to "app/payments/eu"',
  );
  expect(client.frames.filter((f) => f.kind === "publish_ack").map((a) => a.requestId)).toEqual([
    8,
  ]);
  expect(removed.errors()).toEqual(['ARIA_ERR_AUTH_FAILED fatal: user "old" was removed']);
});

test("bytes held while a sign-in is pending are bounded; past the bound the connection ends", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  const client = w.connect();
  w.send(client, w.hello("orders:orders-secret"));
  // 300 KiB of publishes arrive before the verification answers: more than the 256 KiB held.
  const payload = new Uint8Array(60 * 1024);
  for (let i = 0; i < 5; i++)
    w.send(client, { kind: "publish", requestId: i + 1, messages: [{ topic: "app/a", payload }] });
  await w.settle();
  expect(client.errors()).toEqual([
    "ARIA_ERR_HANDSHAKE_REQUIRED fatal: 307330 bytes sent before the HELLO was answered; wait for WELCOME",
  ]);
  expect(w.broker.stats().messagesPublished).toBe(0);
});

test("a certificate subject signs in as its user without a token", async () => {
  const alice = userFromRecord({
    name: "alice",
    tokenHash: null,
    certSubject: "CN=alice,O=Example",
    publish: { allow: ["app/**"], deny: [] },
    subscribe: { allow: [], deny: [] },
    roles: [],
  });
  const w = world([alice]);
  const client = new Client();
  client.id = w.broker.open({ ...client.connection, peerSubject: "CN=alice,O=Example" });
  w.send(client, w.hello(null), publish(1, "app/a"));
  await w.settle();
  expect(client.kinds()).toEqual(["welcome", "publish_ack"]);
  const stranger = new Client();
  stranger.id = w.broker.open({ ...stranger.connection, peerSubject: "CN=mallory" });
  w.send(stranger, w.hello(null));
  for (const timer of w.timers) timer.run();
  expect(stranger.errors()).toEqual([
    'ARIA_ERR_AUTH_FAILED fatal: no user has the certificate subject "CN=mallory"',
  ]);
});

test("a connection that floods while its failed sign-in waits gets one fatal ERROR, not two", async () => {
  const w = world([user("orders", ["app/**"], [])]);
  const client = w.connect();
  w.send(client, w.hello("orders:wrong"));
  await w.settle();
  // It does not read either: its ERROR waits in the queue, the session closing but not closed.
  client.blocked = true;
  const payload = new Uint8Array(60 * 1024);
  for (let i = 0; i < 5; i++)
    w.send(client, { kind: "publish", requestId: i + 1, messages: [{ topic: "app/a", payload }] });
  for (const timer of w.timers) timer.run();
  client.blocked = false;
  w.broker.writable(client.id);
  expect(client.errors()).toEqual([
    "ARIA_ERR_HANDSHAKE_REQUIRED fatal: 307330 bytes sent before the HELLO was answered; wait for WELCOME",
  ]);
});
