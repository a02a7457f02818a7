// Publish and catch-up read throughput of the client, to compare the Node dialer with Bun's:
//   node packages/client/bench/throughput.mjs URL [N]        (the built package, node:net)
//   bun packages/client/bench/throughput.mjs URL [N] bun     (the repository's mod.ts, Bun.connect)
// against one `aria serve`. Publishes N messages of 100 bytes (10,000 in flight), then reads
// them back from the first seq (untilCaughtUp); prints one JSON line with msg/s of each phase
// and a checksum of the payloads read (so nothing is skipped). Not part of the package's files.
const [url, count = "200000", which = "node"] = process.argv.slice(2);
const N = Number(count);
const { connect } =
  which === "bun" ? await import("../../../mod.ts") : await import("../dist/index.js");
const client = await connect(url, { clientName: `throughput-${which}` });
const payload = new Uint8Array(100).fill(7);
const topic = `bench/${which}/${process.pid}`;

let started = performance.now();
let firstSeq = 0;
const WINDOW = 10_000;
for (let sent = 0; sent < N; sent += WINDOW) {
  const seqs = await Promise.all(
    Array.from({ length: Math.min(WINDOW, N - sent) }, () => client.publish(topic, payload)),
  );
  if (sent === 0) firstSeq = seqs[0];
}
const publishMs = performance.now() - started;

started = performance.now();
let received = 0;
let checksum = 0;
for await (const batch of client
  .subscribe(topic, { from: firstSeq, untilCaughtUp: true })
  .batches()) {
  for (const message of batch) checksum = (checksum + message.payload[99]) | 0;
  received += batch.length;
  if (received >= N) break;
}
const readMs = performance.now() - started;
await client.close();
console.log(
  JSON.stringify({
    client: which,
    runtime: typeof Bun === "undefined" ? `node ${process.version}` : `bun ${Bun.version}`,
    messages: N,
    publishMsgPerS: Math.round(N / (publishMs / 1000)),
    readMsgPerS: Math.round(received / (readMs / 1000)),
    received,
    checksum,
  }),
);
