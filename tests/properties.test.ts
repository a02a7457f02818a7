/**
 * Message properties end to end, through the client and a server in this process: published with
 * `publish(topic, payload, { properties })`, received byte for byte by a subscription with
 * `{ properties: true }` (empty when a message has none), by a plain subscription as v1 DATA
 * with the same payload; and read back the same from the data directory after a restart.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AriaError, connect, startServer } from "../mod.ts";
import type { AriaClient, ClientSubscription } from "../mod.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function start(dataDir: string) {
  return startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir,
    tipBytes: 1024 * 1024,
    fsync: "never",
  });
}

const PROPS = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff);
const published = [
  { topic: "p/a", payload: "one", properties: PROPS },
  { topic: "p/b", payload: "two", properties: undefined },
  { topic: "p/a", payload: "", properties: Uint8Array.of(0x26, 0, 1, 0x6b) },
];

async function take(subscription: ClientSubscription, count: number) {
  const got: { seq: number; topic: string; payload: string; properties: number[] }[] = [];
  for await (const message of subscription) {
    got.push({
      seq: message.seq,
      topic: message.topic,
      payload: new TextDecoder().decode(message.payload),
      properties: [...message.properties],
    });
    if (got.length === count) break;
  }
  return got;
}

const expected = (withProperties: boolean) =>
  published.map((m, i) => ({
    seq: i + 1,
    topic: m.topic,
    payload: m.payload,
    properties: withProperties && m.properties !== undefined ? [...m.properties] : [],
  }));

async function publishAll(client: AriaClient): Promise<void> {
  for (const m of published) await client.publish(m.topic, m.payload, { properties: m.properties });
}

test("properties: live, v1 subscribers, and from disk after a restart", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aria-properties-"));
  dirs.push(dir);
  const first = await start(dir);
  try {
    const client = await connect(first.tcpUrl);
    const withProperties = client.subscribe("p/**", { properties: true });
    const plain = client.subscribe("p/**");
    await withProperties.caughtUpAt;
    await plain.caughtUpAt;
    const live = [take(withProperties, 3), take(plain, 3)];
    await publishAll(client);
    expect(await Promise.all(live)).toEqual([expected(true), expected(false)]);
    // Over the limit: refused before anything is sent.
    const tooLarge = client.publish("p/a", "x", { properties: new Uint8Array(8193) });
    await expect(tooLarge).rejects.toBeInstanceOf(AriaError);
    await expect(tooLarge).rejects.toMatchObject({ code: "ARIA_ERR_PROPERTIES_TOO_LARGE" });
    await client.close();
  } finally {
    await first.stop();
  }
  const second = await start(dir);
  try {
    const client = await connect(second.tcpUrl);
    const again = client.subscribe("p/**", { properties: true, from: "earliest" });
    expect(await take(again, 3)).toEqual(expected(true));
    await client.close();
  } finally {
    await second.stop();
  }
});
