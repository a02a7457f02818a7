/**
 * The client against servers that refuse, misbehave or drop it, over an in-memory network to a
 * real Broker (tests/fixtures/client_net.ts) or a fake server: every failed connect settles and
 * leaves nothing dialling; a reconnect is one loop that ends with one connection; a subscription
 * made during a handshake is sent once; back-pressure holds across a reconnect and ends with a
 * failed subscription; bad arguments throw before anything is encoded.
 */
import { expect, test } from "bun:test";
import { AriaClient } from "../src/client/client.ts";
import { encodeError, encodeWelcome, FrameWriter, serverLimits } from "../src/protocol/mod.ts";
import type { DialHandlers, Dialer } from "../src/client/mod.ts";
import { Net, sleep } from "./fixtures/client_net.ts";

/** A fake server: `onConnect` gets each connection's handlers to push bytes or close. */
function fakeServer(onConnect: (handlers: DialHandlers, index: number) => void): {
  dial: Dialer;
  dials: () => number;
} {
  let dials = 0;
  const dial: Dialer = async (_host, _port, handlers) => {
    const index = dials++;
    setImmediate(() => onConnect(handlers, index));
    return { write: (bytes) => bytes.length, end: () => {}, pause: () => {}, resume: () => {} };
  };
  return { dial, dials: () => dials };
}

function welcome(limits = serverLimits()): Uint8Array {
  const writer = new FrameWriter();
  encodeWelcome(writer, { version: 1, limits, nextSeq: 1 });
  return writer.bytes().slice();
}

const outcomeOf = (promise: Promise<unknown>, ms: number) =>
  Promise.race([
    promise.then(
      () => "resolved",
      (error: { code?: string }) => `rejected ${error.code}`,
    ),
    sleep(ms).then(() => "pending"),
  ]);

test("a connect to a server whose first bytes are not a WELCOME (a banner, another version, a zero limit) rejects, and dials nothing more", async () => {
  const banner = new TextEncoder().encode("SSH-2.0-OpenSSH_9.6\r\n");
  const otherVersion = welcome();
  otherVersion[8] = 2;
  const cases: [string, Uint8Array][] = [
    ["banner", banner],
    ["version 2", otherVersion],
    ["zero batch limit", welcome({ ...serverLimits(), publishBatchMessagesMax: 0 })],
  ];
  for (const [what, bytes] of cases) {
    const fake = fakeServer((handlers) => handlers.data(bytes));
    const outcome = await outcomeOf(
      AriaClient.connect("tcp://x:1", fake.dial, { reconnectDelayMs: 5 }),
      500,
    );
    expect(`${what}: ${outcome}`).toMatch(/rejected ARIA_ERR_/);
    await sleep(100);
    expect(`${what}: ${fake.dials()} dials`).toBe(`${what}: 1 dials`);
  }
});

test("after a fatal ERROR (a user the server removed), later publishes are refused with that error, not 'client closed'", async () => {
  const writer = new FrameWriter();
  const fake = fakeServer((handlers) => {
    handlers.data(welcome());
    setTimeout(() => {
      encodeError(writer, {
        code: "ARIA_ERR_AUTH_FAILED",
        fatal: true,
        reason: 'user "fresh4" was removed',
        relatedKind: "none",
        relatedId: 0,
      });
      handlers.data(writer.bytes().slice());
    }, 20);
  });
  const client = await AriaClient.connect("tcp://x:1", fake.dial, { reconnectDelayMs: 5 });
  await sleep(60);
  const refused = await client.publish("a/b", "x").then(
    () => "resolved",
    (error: { code: string; message: string }) => `${error.code}: ${error.message}`,
  );
  expect(refused).toBe('ARIA_ERR_AUTH_FAILED: user "fresh4" was removed');
  await client.close();
});

test("a connection closed before WELCOME fails the connect and starts no reconnect", async () => {
  const fake = fakeServer((handlers) => handlers.close());
  expect(
    await outcomeOf(
      AriaClient.connect("tcp://x:1", fake.dial, { reconnectDelayMs: 5, reconnectAttemptsMax: 5 }),
      500,
    ),
  ).toBe("rejected ARIA_ERR_CONNECTION_LOST");
  await sleep(300);
  expect(fake.dials()).toBe(1);
});

test("a server at its connection limit refuses with a fatal TOO_MANY_CONNECTIONS: the connect rejects with it, no reconnect storm", async () => {
  const net = new Net({ connectionsMax: 1 });
  const first = await AriaClient.connect("tcp://x:1", net.dial);
  expect(
    await outcomeOf(
      AriaClient.connect("tcp://x:1", net.dial, { reconnectDelayMs: 5, reconnectAttemptsMax: 4 }),
      500,
    ),
  ).toBe("rejected ARIA_ERR_TOO_MANY_CONNECTIONS");
  await sleep(300);
  expect(net.links.length).toBe(2);
  await first.close();
});

test("reconnects whose handshakes fail are one loop: it ends on one open connection, one server subscription, and the subscription resumes", async () => {
  const net = new Net();
  const client = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnectDelayMs: 5,
    reconnectAttemptsMax: 8,
  });
  const publisher = await AriaClient.connect("tcp://x:1", net.dial);
  // The client's reconnects 2–4 are accepted and closed before their WELCOME.
  net.onLink = (link, index) => {
    if (index >= 2 && index <= 4) setImmediate(() => link.drop());
  };
  const subscription = client.subscribe("a/b", { from: "earliest" });
  await subscription.caughtUpAt;
  net.links[0].drop();
  await sleep(400);
  const open = net.links.filter((link) => !link.closed);
  expect(open.length).toBe(2); // the publisher's and the client's new one
  expect(net.links.length).toBe(6); // 0 and 1 first, then 2–4 refused, 5 accepted: no second loop
  expect(net.broker.stats().subscriptions).toBe(1);
  for (let i = 0; i < 5; i++) await publisher.publish("a/b", `m${i}`);
  const got: string[] = [];
  for await (const message of subscription) {
    got.push(new TextDecoder().decode(message.payload));
    if (got.length === 5) break;
  }
  expect(got).toEqual(["m0", "m1", "m2", "m3", "m4"]);
  await client.close();
  await publisher.close();
});

test("a subscribe() while a reconnect waits for its WELCOME is sent once, after it", async () => {
  const net = new Net();
  net.onLink = (link, index) => {
    if (index === 1) link.hold = true; // the reconnect's WELCOME held back
  };
  const client = await AriaClient.connect("tcp://x:1", net.dial, { reconnectDelayMs: 5 });
  net.links[0].drop();
  await sleep(50);
  expect(net.links.length).toBe(2);
  const subscription = client.subscribe("a/b", { from: "live" });
  net.links[1].hold = false;
  net.links[1].flushSoon();
  expect(await outcomeOf(subscription.caughtUpAt, 500)).toBe("resolved");
  expect(net.broker.stats().subscriptions).toBe(1);
  const publisher = await AriaClient.connect("tcp://x:1", net.dial);
  await publisher.publish("a/b", "x");
  const iterator = subscription[Symbol.asyncIterator]();
  expect((await iterator.next()).value?.topic).toBe("a/b");
  await client.close();
  await publisher.close();
});

test("back-pressure holds across a reconnect, and a subscription that fails while it paused the connection lets go", async () => {
  const net = new Net();
  const publisher = await AriaClient.connect("tcp://x:1", net.dial);
  const client = await AriaClient.connect("tcp://x:1", net.dial, { reconnectDelayMs: 5 });
  const slow = client.subscribe("t/x", { from: "live" });
  await slow.caughtUpAt;
  const batch = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ topic: "t/x", payload: `m${i}` }));
  await publisher.publishBatch(batch(9000));
  await sleep(100);
  expect(net.links[1].clientPaused).toBe(true);
  net.links[1].drop();
  await sleep(100);
  const again = net.links[2];
  for (let i = 0; i < 5; i++) await publisher.publishBatch(batch(8000));
  await sleep(300);
  // The new connection is paused too: the queue stays near its high mark, not 49,000.
  expect(again.clientPaused).toBe(true);
  expect((slow as unknown as { queued: number }).queued).toBeLessThan(20_000);

  // The paused subscription fails (the server reports a storage failure): the pause ends with it.
  const other = client.subscribe("t/y", { from: "live" });
  (client as unknown as { serverError(frame: object): void }).serverError({
    kind: "error",
    code: "ARIA_ERR_STORAGE_FAILED",
    wireCode: 19,
    fatal: false,
    relatedKind: "subscription",
    relatedId: slow.id,
    reason: "disk read failed",
  });
  expect(again.clientPaused).toBe(false);
  await sleep(50);
  await publisher.publish("t/y", "hello");
  const iterator = other[Symbol.asyncIterator]();
  expect(await outcomeOf(iterator.next(), 500)).toBe("resolved");
  await client.close();
  await publisher.close();
});

test("a bad start or an over-long name throws before anything is encoded: the client goes on working", async () => {
  const net = new Net();
  await expect(
    AriaClient.connect("tcp://x:1", net.dial, { clientName: "n".repeat(65) }),
  ).rejects.toMatchObject({ code: "ARIA_ERR_INVALID_ARGUMENT" });
  const client = await AriaClient.connect("tcp://x:1", net.dial);
  for (const from of [1.5, 0, -3, Number.NaN, new Date(-1000), { seq: 2 ** 60 }, { timeUs: -1 }]) {
    expect(() => client.subscribe("a/b", { from })).toThrow(
      expect.objectContaining({ code: "ARIA_ERR_INVALID_START" }),
    );
  }
  const subscription = client.subscribe("a/c", { from: "live" });
  expect(await outcomeOf(subscription.caughtUpAt, 500)).toBe("resolved");
  expect(await outcomeOf(client.publish("a/c", "x"), 500)).toBe("resolved");
  await client.close();
});

test("close() while a reconnect waits for its WELCOME ends the handshake and the loop: nothing more is dialled", async () => {
  const net = new Net();
  net.onLink = (link, index) => {
    if (index >= 1) link.hold = true; // every reconnect's WELCOME held back
  };
  const client = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnectDelayMs: 5,
    reconnectAttemptsMax: 50,
  });
  net.links[0].drop();
  await sleep(50);
  expect(net.links.length).toBe(2);
  await client.close();
  await sleep(200);
  expect(net.links.length).toBe(2);
  expect(net.links[1].closed).toBe(true);
});
