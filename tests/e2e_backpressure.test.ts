/**
 * End to end, in one process over real loopback sockets: a server whose store has tiny sorting
 * budgets (500 unsorted records, 512 KiB of journals kept) gets publishes faster than its sorter
 * closes segments over 200 partitions. The broker must stop reading the publishing connection
 * (Bun's socket.pause) while the store is backlogged and read it again when the sorter has
 * caught up (socket.resume): unsorted records stay near their bound instead of growing with the
 * publish, and every message is acknowledged and then delivered once, in order.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, startServer } from "../src/server/mod.ts";

const PENDING_RECORDS_MAX = 500;
const BATCH = 400;
const BATCHES = 150;
const IN_FLIGHT = 8;
/**
 * The store is backlogged past twice the budget; the broker pauses the publisher after the frame
 * that passed it, but handles the frames already read or buffered, which are at most the
 * client's IN_FLIGHT unacknowledged batches. (Without the pause, the acks keep coming and
 * unsorted records grew past 56,000 in this test.)
 */
const PENDING_SEEN_MAX = 2 * PENDING_RECORDS_MAX + 8 * BATCH;

const dir = mkdtempSync(join(tmpdir(), "aria-e2e-backpressure-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a store whose sorter falls behind pauses its publishers; every message is acknowledged and delivered once, in order", async () => {
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir: dir,
    tipBytes: 1024 * 1024,
    fsync: "never",
    storeLimits: {
      pendingRecordsMax: PENDING_RECORDS_MAX,
      journalBytesMax: 128 * 1024,
      journalRetainedBytesMax: 512 * 1024,
    },
  });
  try {
    const publisher = await connect(server.tcpUrl);
    let pendingSeen = 0;
    const sampler = setInterval(() => {
      pendingSeen = Math.max(pendingSeen, server.store.stats().pendingRecords);
    }, 1);
    const inFlight: Promise<unknown>[] = [];
    let acked = 0;
    for (let b = 0; b < BATCHES; b++) {
      const batch = Array.from({ length: BATCH }, (_, i) => ({
        topic: `bp/${(b * BATCH + i) % 200}`,
        payload: `m${b * BATCH + i}`,
      }));
      inFlight.push(publisher.publishBatch(batch).then(() => acked++));
      if (inFlight.length >= IN_FLIGHT) await inFlight.shift();
    }
    await Promise.all(inFlight);
    clearInterval(sampler);
    expect(acked).toBe(BATCHES);
    expect(server.broker.stats().publishersPaused).toBeGreaterThan(0);
    expect(pendingSeen).toBeLessThanOrEqual(PENDING_SEEN_MAX);

    const reader = await connect(server.tcpUrl);
    let expected = 0;
    for await (const message of reader.subscribe("**", { from: "earliest", untilCaughtUp: true })) {
      expect(message.seq).toBe(expected + 1);
      expect(new TextDecoder().decode(message.payload)).toBe(`m${expected}`);
      expected++;
    }
    expect(expected).toBe(BATCHES * BATCH);
    await reader.close();
    await publisher.close();
  } finally {
    await server.stop();
  }
}, 60_000);
