/**
 * shared_groups: how fast a shared group delivers a backlog, beside a plain durable consumer of
 * the same filter, against the built binary (`--fsync never`), in one run. N messages (64-byte
 * payloads over T topics) are published first; then, in turns, a durable consumer (one member)
 * and shared groups of 1 and 3 members (one connection each, auto ACK) read all of them from
 * the earliest message. Each turn is a new consumer name; medians over R rounds.
 *
 *   bun bench/shared_groups.ts [BIN=dist/aria] [N=200000] [T=100] [R=3] [P=64]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "../mod.ts";
import { startServedBinary } from "./served_binary.ts";

const [
  bin = "dist/aria",
  countText = "200000",
  topicsText = "100",
  roundsText = "3",
  payloadText = "64",
] = process.argv.slice(2);
const count = Number(countText);
const topics = Number(topicsText);
const rounds = Number(roundsText);

const dataDir = mkdtempSync(join(tmpdir(), "aria-bench-shared-"));
const server = await startServedBinary(bin, dataDir, "256MiB");
try {
  const publisher = await connect(server.tcpUrl);
  const payload = new Uint8Array(Number(payloadText));
  for (let from = 0; from < count; from += 5000) {
    await publisher.publishBatch(
      Array.from({ length: Math.min(5000, count - from) }, (_, i) => ({
        topic: `bench/t${(from + i) % topics}`,
        payload,
      })),
    );
  }
  await publisher.close();

  /** Milliseconds until `members` subscriptions of one new consumer got all `count` messages. */
  async function readAll(name: string, members: number, shared: boolean): Promise<number> {
    const clients = await Promise.all(
      Array.from({ length: members }, () => connect(server.tcpUrl)),
    );
    const started = performance.now();
    let received = 0;
    await new Promise<void>((resolve) => {
      for (const client of clients) {
        const subscription = client.subscribe("bench/**", {
          durable: name,
          shared,
          from: "earliest",
        });
        void (async () => {
          for await (const batch of subscription.batches()) {
            received += batch.length;
            if (received >= count) resolve();
          }
        })().catch(() => {});
      }
    });
    const ms = performance.now() - started;
    await Promise.all(clients.map((client) => client.close()));
    return ms;
  }

  const cases = [
    { label: "durable consumer", members: 1, shared: false },
    { label: "shared group, 1 member", members: 1, shared: true },
    { label: "shared group, 3 members", members: 3, shared: true },
  ];
  const times = new Map<string, number[]>(cases.map((c) => [c.label, []]));
  for (let round = 0; round < rounds; round++) {
    for (const c of cases) {
      const ms = await readAll(`${c.shared ? "g" : "d"}${c.members}r${round}`, c.members, c.shared);
      times.get(c.label)!.push(ms);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  const baseline = median(times.get("durable consumer")!);
  console.log(
    `${count} messages of ${payload.length} B over ${topics} topics, median of ${rounds} rounds`,
  );
  for (const c of cases) {
    const ms = median(times.get(c.label)!);
    const rate = Math.round(count / (ms / 1000));
    console.log(
      `${c.label.padEnd(26)} ${ms.toFixed(0).padStart(6)} ms  ${rate} msg/s  x${(ms / baseline).toFixed(2)} of the durable consumer's time`,
    );
  }
} finally {
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
