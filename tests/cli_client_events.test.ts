/**
 * The client's connection events (`onConnectionEvent`), over the in-memory network to a real
 * Broker (tests/fixtures/client_net.ts): a dropped connection is one "disconnected" with its
 * reason, the reconnect one "reconnected" after which each subscription's `startSent` is the seq
 * it resumed from; handshakes that fail during the reconnects report nothing more; giving up is
 * one "reconnect_failed"; a first connect that fails and the application's close report nothing.
 * `aria sub` prints these (tests/cli_reconnect.test.ts).
 */
import { expect, test } from "bun:test";
import { AriaClient, type ConnectionEvent } from "../src/client/client.ts";
import { Net, sleep } from "./fixtures/client_net.ts";

/** Events as short strings, with each "reconnected" saying where the subscription resumed. */
function recorder(): {
  events: string[];
  options: { onConnectionEvent(event: ConnectionEvent): void };
  watch(read: () => string): void;
} {
  const events: string[] = [];
  let describe = () => "";
  return {
    events,
    watch: (read) => {
      describe = read;
    },
    options: {
      onConnectionEvent: (event) => {
        if (event.kind === "disconnected")
          events.push(`disconnected reconnecting=${event.reconnecting}: ${event.reason}`);
        else if (event.kind === "reconnected")
          events.push(`reconnected after ${event.attempts}: ${describe()}`);
        else events.push(`reconnect_failed after ${event.attempts}: ${event.reason}`);
      },
    },
  };
}

test("a drop is one 'disconnected'; the reconnect one 'reconnected', the subscription resuming from the seq after the last received", async () => {
  const net = new Net();
  const record = recorder();
  const client = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnectDelayMs: 5,
    reconnectAttemptsMax: 8,
    ...record.options,
  });
  const publisher = await AriaClient.connect("tcp://x:1", net.dial);
  for (let i = 0; i < 3; i++) await publisher.publish("a/b", `m${i}`);
  const subscription = client.subscribe("a/b", { from: "earliest" });
  record.watch(() => JSON.stringify(subscription.startSent));
  expect(subscription.startSent).toEqual({ kind: "earliest" });
  const got: string[] = [];
  const iterator = subscription[Symbol.asyncIterator]();
  for (let i = 0; i < 3; i++)
    got.push(new TextDecoder().decode((await iterator.next()).value?.payload));
  await subscription.caughtUpAt;
  expect(subscription.resumeSeq).toBe(4);
  // The client's reconnects 2 and 3 are accepted and closed before their WELCOME: no event each.
  net.onLink = (link, index) => {
    if (index === 2 || index === 3) setImmediate(() => link.drop());
  };
  net.links[0].drop();
  await sleep(300);
  expect(record.events).toEqual([
    "disconnected reconnecting=true: connection to x:1 lost",
    'reconnected after 3: {"kind":"seq","seq":4}',
  ]);
  await publisher.publish("a/b", "m3");
  got.push(new TextDecoder().decode((await iterator.next()).value?.payload));
  expect(got).toEqual(["m0", "m1", "m2", "m3"]);
  await client.close();
  await publisher.close();
  expect(record.events).toHaveLength(2); // close() reports nothing
});

test("reconnects that all fail end with one 'reconnect_failed'; a first connect that fails reports nothing", async () => {
  const net = new Net();
  const record = recorder();
  const client = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnectDelayMs: 2,
    reconnectAttemptsMax: 3,
    ...record.options,
  });
  const subscription = client.subscribe("a/b");
  await subscription.caughtUpAt;
  net.onLink = (link) => setImmediate(() => link.drop());
  net.links[0].drop();
  await sleep(200);
  expect(record.events).toEqual([
    "disconnected reconnecting=true: connection to x:1 lost",
    "reconnect_failed after 3: connection to x:1 lost",
  ]);
  await expect(subscription[Symbol.asyncIterator]().next()).rejects.toThrow(
    "connection to x:1 lost",
  );

  const never = recorder();
  await expect(
    AriaClient.connect("tcp://x:1", net.dial, { reconnectDelayMs: 2, ...never.options }),
  ).rejects.toThrow();
  await sleep(50);
  expect(never.events).toEqual([]);
});

test("with reconnect: false a drop is one 'disconnected' that says no reconnect follows; a throwing callback harms nothing", async () => {
  const net = new Net();
  const record = recorder();
  const client = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnect: false,
    ...record.options,
  });
  net.links[0].drop();
  await sleep(20);
  expect(record.events).toEqual(["disconnected reconnecting=false: connection to x:1 lost"]);
  await client.close();

  const throwing = await AriaClient.connect("tcp://x:1", net.dial, {
    reconnectDelayMs: 5,
    onConnectionEvent: () => {
      throw new Error("the application's bug");
    },
  });
  const subscription = throwing.subscribe("a/c");
  await subscription.caughtUpAt;
  net.links[net.links.length - 1].drop();
  await sleep(100);
  const publisher = await AriaClient.connect("tcp://x:1", net.dial);
  await publisher.publish("a/c", "after");
  expect(
    new TextDecoder().decode((await subscription[Symbol.asyncIterator]().next()).value?.payload),
  ).toBe("after");
  await throwing.close();
  await publisher.close();
});
