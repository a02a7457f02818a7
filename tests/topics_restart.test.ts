/**
 * The topic browser's data, `/api/topics`, after a restart of the compiled binary: it shows what
 * the data directory holds, so a clean stop (the journal sorted into segments) and a `kill -9`
 * (the journal replayed) give the same tree as before. It was counted in memory since start,
 * and empty after any restart.
 */
import { afterAll, expect, test } from "bun:test";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";

afterAll(() => cleanupAll());

/** The whole tree, and the root one level deep as the topic browser asks for it. */
async function topics(server: AriaServer): Promise<unknown[]> {
  const deep = await (await fetch(`${server.adminUrl}/api/topics?depth=8`)).json();
  const browser = await (await fetch(`${server.adminUrl}/api/topics?depth=1`)).json();
  return [deep, browser];
}

async function publish(url: string, topic: string, lines: number, size: number): Promise<void> {
  const payload = Array.from({ length: lines }, (_, i) => `${i}`.padEnd(size, "x")).join("\n");
  const run = await runAria(["pub", "--url", url, topic], { stdin: payload });
  expect([run.exitCode, run.stdout]).toEqual([0, ""]);
}

test("/api/topics after a clean restart and after kill -9 equals what it was before", async () => {
  const dir = makeTempDir("aria-topics-restart-");
  const first = await startAria({ dataDir: dir });
  await publish(first.tcpUrl, "app/orders/created", 30, 40);
  await publish(first.tcpUrl, "app/orders/paid", 10, 100);
  await publish(first.tcpUrl, "app/orders", 3, 5);
  await publish(first.tcpUrl, "ops/logs/web/eu", 50, 20);
  await publish(first.tcpUrl, "solo", 2, 7);
  const published = await topics(first);
  const root = published[1] as {
    source: string;
    node: { messages: number; bytes: number; topics: number };
  };
  expect(root.source).toBe("persisted");
  expect(root.node).toMatchObject({
    messages: 95,
    topics: 5,
    bytes: 30 * 40 + 10 * 100 + 3 * 5 + 50 * 20 + 2 * 7,
  });
  // Published since start, the same on a fresh server.
  const live = (await (await fetch(`${first.adminUrl}/api/topics?depth=8&source=live`)).json()) as {
    node: unknown;
  };
  expect(live.node).toEqual((published[0] as { node: unknown }).node);

  expect(await first.stop()).toBe(0); // sorts the journal into segments
  const second = await startAria({ dataDir: dir });
  expect(await topics(second)).toEqual(published);

  await publish(second.tcpUrl, "app/orders/paid", 5, 100);
  await publish(second.tcpUrl, "new/topic", 4, 9);
  const grown = await topics(second);
  expect((grown[1] as { node: { messages: number } }).node.messages).toBe(104);
  await second.kill9(); // the new messages are in the journal only
  const third = await startAria({ dataDir: dir });
  expect(await topics(third)).toEqual(grown);
  expect(await third.stop()).toBe(0);
});
