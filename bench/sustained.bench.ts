/**
 * Sustained ingestion over many partitions against a running server: one connection publishes
 * 1 KiB messages over `--topics` topics (`g<p%100>/p<p>/events`, so as many partitions), 1,024
 * per PUBLISH frame and up to 16 frames unacknowledged, for `--seconds`, and every 2 s prints
 * the server's published bytes, journal bytes, unsorted records, segments and publisher pauses
 * (from its admin API). It shows whether the store keeps up, and the back-pressure when it does
 * not (journals bounded at twice JOURNAL_RETAINED_BYTES_MAX, docs/storage.md).
 *
 *   aria serve --port 0 --admin-port 0 --fsync interval --retain-bytes 100GiB --data-dir DIR
 *   bun bench/sustained.bench.ts --url tcp://127.0.0.1:PORT --admin http://127.0.0.1:PORT [--topics 10000] [--seconds 20]
 */
import { parseArgs } from "node:util";
import { connect } from "../mod.ts";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    admin: { type: "string" },
    topics: { type: "string" },
    seconds: { type: "string" },
  },
});
if (values.url === undefined || values.admin === undefined)
  throw new Error("--url tcp://HOST:PORT and --admin http://HOST:PORT are required");
const topicCount = Number(values.topics ?? 10_000);
const seconds = Number(values.seconds ?? 20);
const BATCH = 1024;
const IN_FLIGHT = 16;

const client = await connect(values.url);
const payload = new Uint8Array(1024);
const topics = Array.from({ length: topicCount }, (_, p) => `g${p % 100}/p${p}/events`);
let sent = 0;
const batch = () =>
  Array.from({ length: BATCH }, () => ({
    topic: topics[((sent++ * 2654435761) % topicCount) >>> 0],
    payload,
  }));
const start = performance.now();
const inFlight: Promise<unknown>[] = [];
let lastReport = start;
console.log(
  "| s | published MB | journals | journal MB | unsorted records | segments | publisher pauses |",
);
console.log("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
while (performance.now() - start < seconds * 1000) {
  inFlight.push(client.publishBatch(batch()));
  if (inFlight.length >= IN_FLIGHT) await inFlight.shift();
  if (performance.now() - lastReport >= 2000) {
    lastReport = performance.now();
    const stats = await (await fetch(`${values.admin}/api/stats`)).json();
    const mb = (bytes: number) => (bytes / 1e6).toFixed(0);
    console.log(
      `| ${((lastReport - start) / 1000).toFixed(0)} | ${mb(stats.broker.bytesPublished)} | ${stats.store.journals} | ${mb(stats.store.journalBytes)} | ${stats.store.pendingRecords} | ${stats.store.segments} | ${stats.broker.publishersPaused} |`,
    );
  }
}
await Promise.all(inFlight);
await client.close();
