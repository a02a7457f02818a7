/**
 * End to end: a stalled subscriber. A raw connection subscribes to everything from the start and
 * then stops reading, while a publisher pushes 256 MiB through the server (a 1 MiB tip, a 128 KiB
 * per-connection send limit). The server must stop that subscription instead of buffering for it:
 * its RSS (VmRSS from /proc) stays within a fixed bound, while a well-behaved live subscriber on
 * another connection keeps getting everything. When the stalled connection reads again it
 * catches up — from disk, the ring moved on long ago — and then live, every message intact, in
 * order, once.
 *
 * RSS and garbage: every received chunk is garbage soon after, and JSC lets its heap grow to a
 * few hundred MiB before a full collection, which would hide a leak of the same size. The server
 * runs with BUN_JSC_gcMaxHeapSize=64MiB so collections keep up and RSS follows live memory: then
 * the bounded server stays ~100 MiB above its baseline, and buffering the 256 MiB would not.
 * (Run in-process with a forced GC, the server stays within ~40 MiB of its baseline.) The good
 * subscriber follows a small side topic, so its own traffic does not add garbage to the measure.
 */
import { expect, test } from "bun:test";
import { connect } from "../src/server/mod.ts";
import { serverForFile, waitFor } from "./fixtures/e2e_server.ts";
import { HELLO, RawConnection } from "./fixtures/e2e_raw.ts";

const PAYLOAD_BYTES = 64 * 1024;
const BATCH_MESSAGES = 16;
/** 256 batches of 1 MiB. */
const BATCHES = 256;
/**
 * How much the server's RSS may grow while the subscriber is stalled: the tip (1 MiB), the
 * stalled connection's send queue (128 KiB plus one message), the store's write buffers,
 * and garbage between collections. Measured: 80-100 MiB. Buffering for the stalled
 * subscriber would grow it by the 256 MiB published.
 */
const RSS_GROWTH_BYTES_MAX = 176 * 1024 * 1024;

const server = serverForFile({
  tipBytes: "1MiB",
  fsync: "never",
  env: { BUN_JSC_gcMaxHeapSize: String(64 * 1024 * 1024) },
});

const TEMPLATES = Array.from({ length: 251 }, (_, t) => {
  const bytes = new Uint8Array(PAYLOAD_BYTES);
  for (let i = 4; i < bytes.length; i++) bytes[i] = (t * 31 + i) & 0xff;
  return bytes;
});

/** The payload of the `index`-th message: its index, then a pattern that depends on it. */
function payloadOf(index: number): Uint8Array {
  const bytes = TEMPLATES[index % TEMPLATES.length].slice();
  new DataView(bytes.buffer).setUint32(0, index, true);
  return bytes;
}

/** Does `payload` hold exactly the `index`-th message's payload? */
function isPayloadOf(payload: Uint8Array, index: number): boolean {
  if (payload.length !== PAYLOAD_BYTES) return false;
  if (new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, true) !== index)
    return false;
  return Buffer.compare(payload.subarray(4), TEMPLATES[index % TEMPLATES.length].subarray(4)) === 0;
}

test("a stalled subscriber: server RSS stays bounded, others are unaffected, it later catches up intact", async () => {
  const url = server().tcpUrl;
  const problems: string[] = [];

  // The stalled subscriber. Messages of stall/** carry consecutive indexes in their payloads, so
  // it checks each one as it arrives (a decoded frame dies after the call): in order, no gap,
  // no duplicate, every byte.
  let nextIndex = 0;
  let lastSeq = 0;
  const seqOfIndex: number[] = [];
  let caughtUp = 0;
  const stalled = await RawConnection.open(url, (frame) => {
    if (frame.kind === "caught_up") caughtUp++;
    if (frame.kind === "error") problems.push(`server error ${frame.code}: ${frame.reason}`);
    if (frame.kind !== "data") return;
    const messages = frame.messages;
    while (messages.next()) {
      if (messages.seq <= lastSeq)
        problems.push(`stalled subscriber: seq ${messages.seq} after ${lastSeq}`);
      lastSeq = messages.seq;
      if (!isPayloadOf(messages.payload, nextIndex))
        problems.push(`stalled subscriber: seq ${messages.seq} is not message ${nextIndex}`);
      seqOfIndex[nextIndex++] = messages.seq;
    }
  });
  stalled.send(HELLO, {
    kind: "subscribe",
    subscriptionId: 1,
    start: { kind: "earliest" },
    filter: ["stall/**"],
  });
  stalled.pause();

  // The well-behaved subscriber, on its own connection, follows a side topic live.
  const goodClient = await connect(url, { clientName: "good" });
  const good = goodClient.subscribe("good/**", { from: "live" });
  await good.caughtUpAt;
  const beatSentMs: number[] = [];
  let beatsReceived = 0;
  let beatLatencyMsMax = 0;
  const goodReading = (async () => {
    for await (const message of good) {
      const beat = Number(new TextDecoder().decode(message.payload));
      if (beat !== beatsReceived)
        problems.push(`good subscriber: beat ${beat}, expected ${beatsReceived}`);
      beatLatencyMsMax = Math.max(beatLatencyMsMax, performance.now() - beatSentMs[beat]);
      beatsReceived++;
    }
  })();

  const publisher = await connect(url, { clientName: "publisher" });
  const ackedSeqOfIndex: number[] = [];
  let index = 0;
  const publishBatch = async () => {
    const first = index;
    index += BATCH_MESSAGES;
    beatSentMs.push(performance.now());
    const beat = publisher.publish("good/beat", String(beatSentMs.length - 1));
    const seqs = await Promise.all(
      Array.from({ length: BATCH_MESSAGES }, (_, i) =>
        publisher.publish(`stall/t${(first + i) % 5}`, payloadOf(first + i)),
      ),
    );
    for (const [i, seq] of seqs.entries()) ackedSeqOfIndex[first + i] = seq;
    await beat;
  };

  // Warm up, then take the baseline.
  await publishBatch();
  await waitFor(() => beatsReceived === 1, "the good subscriber to get the first beat");
  const rssBaseline = server().rssBytes();
  let rssMax = rssBaseline;
  for (let batch = 0; batch < BATCHES; batch++) {
    await publishBatch();
    rssMax = Math.max(rssMax, server().rssBytes());
  }
  await waitFor(() => beatsReceived === beatSentMs.length, "the good subscriber to get every beat");
  expect(beatLatencyMsMax).toBeLessThan(2000);
  rssMax = Math.max(rssMax, server().rssBytes());
  const growth = rssMax - rssBaseline;
  if (growth > RSS_GROWTH_BYTES_MAX) {
    throw new Error(
      `server RSS grew by ${(growth / 2 ** 20).toFixed(1)} MiB (baseline ${(rssBaseline / 2 ** 20).toFixed(1)} MiB) with a stalled subscriber`,
    );
  }
  const stats = await server().stats();
  expect(stats.broker.subscriptionsByPhase.stalled).toBe(1);
  // It read nothing, and the ring moved past it: catching up must go through the disk.
  expect(nextIndex).toBe(0);
  expect(stats.tip.firstSeq).toBeGreaterThan(stats.tip.nextSeq / 2);

  // It reads again while publishing goes on, until it is close to the live end and a while after.
  stalled.resume();
  const deadline = Date.now() + 20_000;
  let batchesNearLive = 0;
  while (batchesNearLive < 10 && Date.now() < deadline) {
    await publishBatch();
    if (index - nextIndex < 4 * BATCH_MESSAGES) batchesNearLive++;
    await Bun.sleep(2);
  }
  await waitFor(
    () => nextIndex === index,
    `the stalled subscriber to get all ${index} messages`,
    20_000,
  ).catch(() => undefined);
  expect(problems).toEqual([]);
  expect(batchesNearLive).toBe(10);
  expect(nextIndex).toBe(index);
  expect(seqOfIndex).toEqual(ackedSeqOfIndex);
  expect(caughtUp).toBeGreaterThanOrEqual(1);
  expect(stalled.serverDecodeErrors).toEqual([]);
  await waitFor(() => beatsReceived === beatSentMs.length, "the good subscriber to get every beat");
  expect(server().alive()).toBe(true);

  stalled.close();
  await publisher.close();
  await goodClient.close();
  await goodReading;
}, 60_000);
