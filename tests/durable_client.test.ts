/**
 * Durable consumers through the TypeScript client and a server in this process:
 * `subscribe(filter, { durable, ack })` — "auto" acknowledges each DATA frame once the
 * application asked for the message after its last; "manual" acknowledges with message.ack().
 * A later client of the same name starts after the acknowledged position; the admin API lists
 * and removes consumers (409 while one is open).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, startServer } from "../mod.ts";
import type { ClientSubscription } from "../mod.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function start() {
  const dir = mkdtempSync(join(tmpdir(), "aria-durable-"));
  dirs.push(dir);
  return startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir: dir,
    tipBytes: 1024 * 1024,
    fsync: "never",
  });
}

/** Seqs of the next `count` messages (the iterator left open unless `close`). */
async function take(subscription: ClientSubscription, count: number): Promise<number[]> {
  const iterator = subscription[Symbol.asyncIterator]();
  const seqs: number[] = [];
  while (seqs.length < count) {
    const next = await iterator.next();
    if (next.done === true) break;
    seqs.push(next.value.seq);
  }
  return seqs;
}

const waitFor = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await Bun.sleep(10);
  }
  throw new Error("waitFor: timed out");
};

test("auto ack: a frame is acknowledged once the application asks for more; a new client resumes after it", async () => {
  const server = await start();
  try {
    const publisher = await connect(server.tcpUrl);
    await publisher.publishBatch(
      Array.from({ length: 5 }, (_, i) => ({ topic: "d/a", payload: `${i}` })),
    );
    const first = await connect(server.tcpUrl);
    const subscription = first.subscribe("d/**", { durable: "auto1", from: "earliest" });
    expect(await take(subscription, 5)).toEqual([1, 2, 3, 4, 5]);
    // Nothing acknowledged yet: the fifth message is still being processed.
    const consumer = () => server.broker.consumerList().find((c) => c.name === "auto1");
    expect(consumer()?.ackedSeq).toBe(0);
    // Asking for the next one acknowledges the frame.
    const sixth = take(subscription, 1);
    await waitFor(async () => consumer()?.ackedSeq === 5);
    await first.close();
    await sixth.catch(() => {});
    await publisher.publish("d/b", "6");
    const second = await connect(server.tcpUrl);
    const resumed = second.subscribe("d/**", { durable: "auto1", from: "earliest" });
    expect(await take(resumed, 1)).toEqual([6]);
    await second.close();
    await publisher.close();
  } finally {
    await server.stop();
  }
});

test("manual ack: message.ack() acknowledges it and every earlier one; unacknowledged ones come again", async () => {
  const server = await start();
  try {
    const publisher = await connect(server.tcpUrl);
    await publisher.publishBatch(
      Array.from({ length: 5 }, (_, i) => ({ topic: "d/a", payload: `${i}` })),
    );
    const first = await connect(server.tcpUrl);
    const subscription = first.subscribe("d/**", {
      durable: "m1",
      ack: "manual",
      from: "earliest",
    });
    const messages = [];
    const consumer = () => server.broker.consumerList().find((c) => c.name === "m1");
    for await (const message of subscription) {
      messages.push(message);
      if (messages.length < 5) continue;
      messages[2].ack();
      messages[0].ack();
      await waitFor(async () => consumer()?.ackedSeq === 3);
      break;
    }
    const admin = `${server.adminUrl}/api/consumers`;
    const listed = (await (await fetch(admin)).json()) as { consumers: { name: string }[] };
    expect(listed.consumers.map((c) => c.name)).toEqual(["m1"]);
    await first.close();
    const second = await connect(server.tcpUrl);
    const again = second.subscribe("d/**", { durable: "m1", ack: "manual" });
    expect(await take(again, 2)).toEqual([4, 5]);
    expect((await fetch(`${admin}/m1`, { method: "DELETE" })).status).toBe(409);
    await second.close();
    await waitFor(async () => consumer()?.members === 0);
    expect((await fetch(`${admin}/m1`, { method: "DELETE" })).status).toBe(204);
    expect((await fetch(`${admin}/m1`, { method: "DELETE" })).status).toBe(404);
    await publisher.close();
  } finally {
    await server.stop();
  }
});

test("a second subscription of a durable consumer is refused with CONSUMER_BUSY", async () => {
  const server = await start();
  try {
    const one = await connect(server.tcpUrl);
    const two = await connect(server.tcpUrl);
    const held = one.subscribe("d/**", { durable: "b1" });
    await held.caughtUpAt;
    const refused = two.subscribe("d/**", { durable: "b1" });
    await expect(take(refused, 1)).rejects.toMatchObject({ code: "ARIA_ERR_CONSUMER_BUSY" });
    expect(() => two.subscribe("d/**", { durable: "a b" })).toThrow("outside");
    await one.close();
    await two.close();
  } finally {
    await server.stop();
  }
});
