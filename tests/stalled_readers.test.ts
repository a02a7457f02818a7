/**
 * End to end: fifty subscribers of `**` that never read, beside a healthy subscriber and a
 * publisher, against the built server. The healthy subscriber receives every message, in order;
 * the server's RSS grows by less than RSS_GROWTH_BYTES_MAX over a warm-up publish of the same
 * size; /metrics says how long the event loop paused. Before stalled subscribers cost a position
 * only, each held its 4 MiB send queue and a writer grown to match (~8 MB each, 400 MB here).
 *
 * The server runs with BUN_JSC_gcMaxHeapSize=64MiB (as in e2e_stall.test.ts) so collections keep
 * up and RSS follows live memory, not garbage between collections.
 */
import { expect, test } from "bun:test";
import type { Socket } from "bun";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { connect } from "../src/server/mod.ts";
import { Filter } from "../src/topic/filter.ts";
import { serverForFile } from "./fixtures/e2e_server.ts";
import { framesBytes } from "./fixtures/e2e_raw.ts";

const STALLED = 50;
const PAYLOAD_BYTES = 1024;
const BATCH_MESSAGES = 256;
/** 32 MiB a publish. */
const BATCHES = 128;
/**
 * How much RSS may grow once the stalled subscribers joined: 50 × 256 KiB of send queue and
 * writer (12.5 MiB) and garbage between collections. Holding a copy of the stream for each
 * would grow it by hundreds of MiB.
 */
const RSS_GROWTH_BYTES_MAX = 128 * 1024 * 1024;

const server = serverForFile({
  // Larger than what is published: no subscription falls off the tip into a disk read here (what
  // disk readers hold is bounded by their count, DISK_READERS_MAX, not measured by this test).
  tipBytes: "64MiB",
  fsync: "never",
  env: { BUN_JSC_gcMaxHeapSize: String(64 * 1024 * 1024) },
});

test("50 stalled subscribers: the healthy subscriber gets every message, server RSS stays bounded", async () => {
  const aria = server();
  const publisher = await connect(aria.tcpUrl);
  const subscriber = await connect(aria.tcpUrl);
  const subscription = subscriber.subscribe("**", { from: "live" });
  await subscription.caughtUpAt;
  let received = 0;
  let lastSeq = 0;
  let outOfOrder = 0;
  const consuming = (async () => {
    for await (const frame of subscription.frames()) {
      while (frame.next()) {
        if (lastSeq !== 0 && frame.seq !== lastSeq + 1) outOfOrder++;
        lastSeq = frame.seq;
        received++;
      }
    }
  })().catch(() => undefined);
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(7);
  const batch = Array.from({ length: BATCH_MESSAGES }, (_, i) => ({
    topic: `e2e/p${i % 8}/t${i % 32}`,
    payload,
  }));
  const publishAll = async () => {
    const inFlight: Promise<unknown>[] = [];
    for (let b = 0; b < BATCHES; b++) {
      inFlight.push(publisher.publishBatch(batch));
      if (inFlight.length >= 8) await inFlight.shift();
    }
    await Promise.all(inFlight);
  };
  const waitReceived = async (count: number) => {
    const deadline = Date.now() + 60_000;
    while (received < count && Date.now() < deadline) await Bun.sleep(20);
  };

  // Warm-up: the tip's 64 MiB touched once, the store's buffers grown.
  await publishAll();
  await publishAll();
  await waitReceived(2 * BATCHES * BATCH_MESSAGES);
  const rssBefore = aria.rssBytes();

  const [host, port] = aria.tcpUrl.slice("tcp://".length).split(":");
  const hello = framesBytes([
    { kind: "hello", version: PROTOCOL_VERSION, clientName: "stalled", authToken: null },
    { kind: "subscribe", subscriptionId: 1, start: { kind: "live" }, filter: Filter.of("**") },
  ]);
  const stalled: Socket<undefined>[] = [];
  for (let i = 0; i < STALLED; i++) {
    const socket = await Bun.connect({
      hostname: host,
      port: Number(port),
      socket: { data() {}, close() {}, error() {} },
    });
    socket.pause();
    socket.write(hello);
    stalled.push(socket);
  }
  while ((await aria.stats()).broker.subscriptionsByPhase.live < STALLED + 1) await Bun.sleep(20);

  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, aria.rssBytes());
  }, 50);
  await publishAll();
  await waitReceived(3 * BATCHES * BATCH_MESSAGES);
  clearInterval(sampler);
  rssPeak = Math.max(rssPeak, aria.rssBytes());

  expect(received).toBe(3 * BATCHES * BATCH_MESSAGES);
  expect(outOfOrder).toBe(0);
  expect(rssPeak - rssBefore).toBeLessThan(RSS_GROWTH_BYTES_MAX);
  const metrics = await (await fetch(`${aria.adminUrl}/metrics`)).text();
  expect(metrics).toMatch(/^aria_event_loop_lag_max_seconds \d/m);

  for (const socket of stalled) socket.end();
  await subscriber.close();
  await consuming;
  await publisher.close();
}, 120_000);
