/**
 * End to end: crash and restart. Several client connections publish to `aria serve --fsync always`
 * and record every message whose publish resolved (acknowledged); the server is killed with
 * SIGKILL at a random moment (seeded by FC_SEED), restarted on the same data dir (a new port), and
 * read back with `aria sub ** --from earliest --until-caught-up`: every acknowledged
 * (seq, topic, payload) is there, seqs run 1..N with no hole and no duplicate, every message read
 * is one that was sent, and the next publish gets N+1. Several rounds on one data dir (3 in CI,
 * E2E_KILL_ROUNDS to change), so recovery also runs over files an earlier recovery cut.
 *
 * Also: client connections outlive a graceful restart on the same port — while the server is
 * down they retry without opening a storm of sockets, then the subscriber resumes with no gap or
 * duplicate and queued publishes go through.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AriaClient } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  parseSubLines,
  payloadOfLine,
  runAria,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";
import { fillDataDir } from "./fixtures/split_data.ts";

const ROUNDS = Number(process.env.E2E_KILL_ROUNDS ?? 3);
const PUBLISHERS = 4;
const TOPICS = ["crash/a/x", "crash/a/y", "crash/b", "other/q/r", "solo"];

interface Sent {
  topic: string;
  payload: Uint8Array;
}

const key = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

afterAll(cleanupAll);

/** Publishes in random batches until the connection is lost; records what was acknowledged. */
async function publishUntilLost(
  client: AriaClient,
  name: string,
  prng: Prng,
  sent: Map<string, Sent>,
  acked: Map<number, Sent>,
): Promise<void> {
  for (let n = 0; ; ) {
    const batch: Sent[] = [];
    const size = 1 + prng.nextInt(40);
    for (let i = 0; i < size; i++, n++) {
      const text = `${name}-${n}-${"z".repeat(prng.nextInt(200))}`;
      const payload =
        n % 7 === 3
          ? new Uint8Array([0xff, 0xfe, ...new TextEncoder().encode(text)])
          : new TextEncoder().encode(text);
      const message = { topic: TOPICS[prng.nextInt(TOPICS.length)], payload };
      sent.set(key(payload), message);
      batch.push(message);
    }
    const results = await Promise.allSettled(batch.map((m) => client.publish(m.topic, m.payload)));
    let lost = false;
    results.forEach((result, i) => {
      if (result.status === "fulfilled") {
        if (acked.has(result.value)) throw new Error(`seq ${result.value} acknowledged twice`);
        acked.set(result.value, batch[i]);
      } else {
        lost = true;
      }
    });
    if (lost) return;
  }
}

test(`kill -9 during publishing with --fsync always (${ROUNDS} rounds): every acknowledged message survives, seqs continue without a hole`, async () => {
  const prng = new Prng(Number(process.env.FC_SEED ?? 0x41524941));
  const dataDir = makeTempDir("aria-e2e-kill-");
  const sent = new Map<string, Sent>();
  const acked = new Map<number, Sent>();
  let server: AriaServer = await startAria({ dataDir, fsync: "always", tipBytes: "1MiB" });
  let ackedBefore = 0;

  for (let round = 0; round < ROUNDS; round++) {
    const clients = await Promise.all(
      Array.from({ length: PUBLISHERS }, (_, p) =>
        connect(server.tcpUrl, { clientName: `crash${p}`, reconnect: false }),
      ),
    );
    const publishing = clients.map((client, p) =>
      publishUntilLost(client, `r${round}p${p}`, new Prng(prng.nextU32()), sent, acked),
    );
    const killAfterMs = prng.nextRange(150, 700);
    await Bun.sleep(killAfterMs);
    const killed = server;
    await killed.kill9();
    expect(killed.process.signalCode).toBe("SIGKILL");
    await Promise.all(publishing);
    for (const client of clients) await client.close();
    expect(acked.size).toBeGreaterThan(ackedBefore);

    server = await startAria({ dataDir, fsync: "always", tipBytes: "1MiB" });
    expect(server.tcpUrl).not.toBe(killed.tcpUrl);
    const run = await runAria(
      ["sub", "--url", server.tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
      { timeoutMs: 30_000 },
    );
    expect(run.exitCode).toBe(0);
    const lines = parseSubLines(run.stdout);
    const n = lines.length;

    const seen = new Set<string>();
    lines.forEach((line, index) => {
      if (line.seq !== index + 1)
        throw new Error(
          `round ${round}: line ${index} has seq ${line.seq}, expected ${index + 1} (a hole or a duplicate)`,
        );
      const payload = payloadOfLine(line);
      const payloadKey = key(payload);
      const original = sent.get(payloadKey);
      if (original === undefined || original.topic !== line.topic)
        throw new Error(`round ${round}: seq ${line.seq} is a message nobody sent`);
      if (seen.has(payloadKey))
        throw new Error(`round ${round}: the message of seq ${line.seq} was stored twice`);
      seen.add(payloadKey);
      const ack = acked.get(line.seq);
      if (ack !== undefined && key(ack.payload) !== payloadKey)
        throw new Error(
          `round ${round}: seq ${line.seq} holds another message than the one acknowledged`,
        );
    });
    for (const seq of acked.keys()) {
      if (seq > n)
        throw new Error(
          `round ${round}: acknowledged seq ${seq} is missing after the restart (the stream ends at ${n})`,
        );
    }
    // Messages sequenced but not acknowledged before the kill may survive: they now count as acknowledged.
    for (const line of lines)
      if (!acked.has(line.seq)) acked.set(line.seq, sent.get(key(payloadOfLine(line)))!);

    const client = await connect(server.tcpUrl, { clientName: "after-restart" });
    const payload = new TextEncoder().encode(`after-restart-${round}`);
    sent.set(key(payload), { topic: "crash/b", payload });
    const seq = await client.publish("crash/b", payload);
    expect(seq).toBe(n + 1);
    acked.set(seq, { topic: "crash/b", payload });
    await client.close();
    ackedBefore = acked.size;
  }
  await server.stop();
}, 60_000);

test("clients outlive a restart on the same port: no reconnect storm, the subscriber resumes without gap or duplicate", async () => {
  const dataDir = makeTempDir("aria-e2e-reconnect-");
  const first = await startAria({ dataDir, fsync: "always" });
  const port = Number(first.tcpUrl.split(":")[2]);
  const publisher = await connect(first.tcpUrl, {
    clientName: "reconnect-pub",
    reconnectDelayMs: 20,
  });
  const subscriberClient = await connect(first.tcpUrl, {
    clientName: "reconnect-sub",
    reconnectDelayMs: 20,
  });
  const received: { seq: number; payload: string }[] = [];
  const reading = (async () => {
    for await (const message of subscriberClient.subscribe("re/**", { from: "earliest" }))
      received.push({ seq: message.seq, payload: new TextDecoder().decode(message.payload) });
  })();
  const expected: { seq: number; payload: string }[] = [];
  const publish = async (from: number, to: number) => {
    const payloads = Array.from({ length: to - from }, (_, i) => `msg-${from + i}`);
    const seqs = await Promise.all(
      payloads.map((payload, i) => publisher.publish(`re/t${i % 3}`, payload)),
    );
    for (const [i, seq] of seqs.entries()) expected.push({ seq, payload: payloads[i] });
  };
  await publish(0, 200);
  await waitFor(() => received.length === 200, "the subscriber to get the first 200 messages");

  try {
    // Down for 1 s: the clients retry with back-off, each attempt one socket at most.
    const fdsBefore = readdirSync("/proc/self/fd").length;
    expect(await first.stop()).toBe(0);
    let fdsMax = fdsBefore;
    for (let i = 0; i < 50; i++) {
      await Bun.sleep(20);
      fdsMax = Math.max(fdsMax, readdirSync("/proc/self/fd").length);
    }
    expect(fdsMax - fdsBefore).toBeLessThan(20);

    const second = await startAria({ dataDir, fsync: "always", port });
    expect(second.tcpUrl).toBe(first.tcpUrl);
    await publish(200, 400);
    expect(expected.map((m) => m.seq)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    await waitFor(
      () => received.length >= 400,
      "the subscriber to resume and get all 400 messages",
    );
    expect(received).toEqual(expected);
    await second.stop();
  } finally {
    await publisher.close();
    await subscriberClient.close();
    await reading.catch(() => undefined);
  }
}, 30_000);

test("damage in the newest stored records: serve exits 5 with the file and offset, the store closed and the lock released", async () => {
  const dataDir = makeTempDir("aria-e2e-damaged-");
  await fillDataDir(dataDir, 3000);
  const pack = readdirSync(join(dataDir, "segments"))
    .filter((name) => name.endsWith(".pak"))
    .sort()
    .at(-1) as string;
  const path = join(dataDir, "segments", pack);
  const bytes = readFileSync(path);
  const at = Math.floor(bytes.length * 0.9);
  bytes[at] ^= 0x20;
  writeFileSync(path, bytes);
  const run = await runAria(["serve", "--port", "0", "--admin-port", "0", "--data-dir", dataDir]);
  expect(run.exitCode).toBe(5);
  expect(run.stderr).toContain("Cannot read the newest messages");
  expect(run.stderr).toMatch(/at offset \d+/);
  expect(run.stderr).not.toMatch(/^\s+at /m); // no stack trace
  expect(existsSync(join(dataDir, "LOCK"))).toBe(false);
});
