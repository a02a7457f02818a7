/**
 * The replica's apply path over real stores in temp dirs: Broker.replicate appends a leader's
 * DATA batches with the leader's seqs and times (never its own clock), refuses a gap, a repeat or
 * a time going back without appending anything, and what it appended survives a restart as it
 * was. The follower against an in-process leader: it copies the log byte for byte, and refuses a
 * data directory that is ahead of its leader, disagrees with it, or needs a seq the leader's
 * retention removed.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AriaClient, MessageBatch } from "../client/mod.ts";
import { AriaError, type DataFrame, type DataMessage, FrameDecoder } from "../protocol/mod.ts";
import { encodeAll } from "../protocol/test_support.ts";
import { connect, type RunningServer, type ServerOptions, startServer } from "../server/mod.ts";
import { processLog } from "../runtime/mod.ts";

const dirs: string[] = [];
const servers: RunningServer[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => {});
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "aria-replica-"));
  dirs.push(dir);
  return dir;
}

const quiet = processLog({ level: (process.env.REP_LOG as "info") ?? "error", format: "text" });

async function serve(dataDir: string, extra: Partial<ServerOptions> = {}): Promise<RunningServer> {
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir,
    tipBytes: 1024 * 1024,
    fsync: "always",
    log: quiet,
    ...extra,
  });
  servers.push(server);
  return server;
}

/** A DATA batch of `messages`, as the client hands it out (a copy of its own). */
function batchOf(messages: DataMessage[]): MessageBatch {
  const decoder = new FrameDecoder();
  decoder.push(encodeAll([{ kind: "data", subscriptionId: 1, messages, properties: true }]));
  const frame = decoder.next() as DataFrame;
  return frame.messages.copy() as MessageBatch;
}

const text = (s: string) => new TextEncoder().encode(s);

/** Every message of the server's log, read whole (properties too). */
async function readAll(url: string): Promise<DataMessage[]> {
  const client = await connect(url);
  const out: DataMessage[] = [];
  const subscription = client.subscribe("**", {
    from: "earliest",
    untilCaughtUp: true,
    properties: true,
  });
  for await (const m of subscription)
    out.push({
      seq: m.seq,
      timeUs: m.timeUs,
      topic: m.topic,
      // Plain copies: a payload may come as a Buffer (a view of the decoder's), and toEqual
      // tells a Buffer from a Uint8Array of the same bytes.
      payload: new Uint8Array(m.payload),
      properties: new Uint8Array(m.properties),
    });
  await client.close();
  return out;
}

// Times in 2001: a replica reading its own clock would give 2026's.
const T0 = 978_307_200_000_000;
const leaderMessages: DataMessage[] = [
  { seq: 1, timeUs: T0, topic: "a/b", payload: text("one"), properties: text("p1") },
  { seq: 2, timeUs: T0, topic: "a/c", payload: text("two"), properties: new Uint8Array(0) },
  { seq: 3, timeUs: T0 + 5, topic: "z", payload: new Uint8Array([0, 255]), properties: text("q") },
];

test("replicate appends with the leader's seqs and times, refuses gaps, and survives a restart", async () => {
  const dir = tempDir();
  const server = await serve(dir);
  const broker = server.broker;
  expect(broker.replicate(batchOf(leaderMessages.slice(0, 2)))).toBeNull();
  // A gap (seq 4 where 3 is next), a repeat, a time going back: nothing appended.
  const gap = { ...leaderMessages[2], seq: 4 };
  expect(broker.replicate(batchOf([gap]))).toContain("seq 4 arrived where seq 3 was next");
  expect(broker.replicate(batchOf([leaderMessages[1]]))).toContain("where seq 3 was next");
  const back = { ...leaderMessages[2], timeUs: T0 - 1 };
  expect(broker.replicate(batchOf([back]))).toContain("is before");
  // A batch whose second message skips is refused whole.
  const skipping = [leaderMessages[2], { ...leaderMessages[2], seq: 5 }];
  expect(broker.replicate(batchOf(skipping))).toContain("seq 5 arrived where seq 4 was next");
  expect(broker.nextSeq).toBe(3);
  expect(broker.replicate(batchOf([leaderMessages[2]]))).toBeNull();
  await broker.whenVisible(4);
  expect(await readAll(server.tcpUrl)).toEqual(leaderMessages);
  await server.stop();
  const again = await serve(dir);
  expect(await readAll(again.tcpUrl)).toEqual(leaderMessages);
  expect(again.broker.nextSeq).toBe(4);
  await again.stop();
});

test("a replica refuses publishes with NOT_LEADER naming its leader", async () => {
  const server = await serve(tempDir());
  server.broker.follow("tcp://leader.example:7400");
  const client = await connect(server.tcpUrl);
  const refused = await client.publish("a", "x").catch((error) => error);
  expect(refused).toBeInstanceOf(AriaError);
  expect((refused as AriaError).code).toBe("ARIA_ERR_NOT_LEADER");
  expect((refused as AriaError).message).toContain("tcp://leader.example:7400");
  await client.close();
  await server.stop();
});

async function publishSome(client: AriaClient, prefix: string, count: number): Promise<void> {
  const batch = [];
  for (let i = 0; i < count; i++)
    batch.push({
      topic: `${prefix}/${i % 5}`,
      payload: text(`${prefix}-${i}-${"x".repeat(i % 50)}`),
      properties: i % 3 === 0 ? text(`prop-${i}`) : undefined,
    });
  await client.publishBatch(batch);
}

async function caughtUp(replica: RunningServer, leader: RunningServer): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (replica.broker.durableSeq < leader.broker.nextSeq - 1) {
    if (Date.now() > deadline) throw new Error("the replica did not catch up");
    await Bun.sleep(5);
  }
}

function follow(url: string) {
  return { follow: { url, backoffMs: 10 } };
}

test("a follower copies its leader's log byte for byte, across its own restart", async () => {
  const leader = await serve(tempDir());
  const publisher = await connect(leader.tcpUrl);
  await publishSome(publisher, "before", 300);
  const replicaDir = tempDir();
  let replica = await serve(replicaDir, follow(leader.tcpUrl));
  await publishSome(publisher, "during", 300);
  await caughtUp(replica, leader);
  await replica.stop();
  await publishSome(publisher, "between", 50);
  replica = await serve(replicaDir, follow(leader.tcpUrl));
  await publishSome(publisher, "after", 50);
  await caughtUp(replica, leader);
  const [leaderLog, replicaLog] = await Promise.all([
    readAll(leader.tcpUrl),
    readAll(replica.tcpUrl),
  ]);
  expect(leaderLog.length).toBe(700);
  expect(replicaLog).toEqual(leaderLog);
  await publisher.close();
  await replica.stop();
  await leader.stop();
});

/** Starts a replica of `leaderUrl` on `dir` and waits for its fatal condition. */
async function fatalOf(dir: string, leaderUrl: string): Promise<{ code: number; text: string }> {
  const replica = await serve(dir, follow(leaderUrl));
  const failed = await Promise.race([replica.failed, Bun.sleep(5000).then(() => null)]);
  await replica.stop();
  if (failed === null) throw new Error("the replica did not fail");
  return { code: failed.exitCode, text: failed.message };
}

test("a replica ahead of its leader, or disagreeing with it, is refused", async () => {
  const leaderA = await serve(tempDir());
  const leaderB = await serve(tempDir());
  const a = await connect(leaderA.tcpUrl);
  const b = await connect(leaderB.tcpUrl);
  await publishSome(a, "a", 5);
  await publishSome(b, "b", 5);
  const replicaDir = tempDir();
  const replica = await serve(replicaDir, follow(leaderA.tcpUrl));
  await caughtUp(replica, leaderA);
  await replica.stop();
  // B's seq 5 is another message: the logs disagree.
  const diverged = await fatalOf(replicaDir, leaderB.tcpUrl);
  expect(diverged.code).toBe(9);
  expect(diverged.text).toContain("differs from the leader's");
  // A leader with fewer messages than the replica holds.
  const leaderC = await serve(tempDir());
  const c = await connect(leaderC.tcpUrl);
  await publishSome(c, "a", 2);
  const ahead = await fatalOf(replicaDir, leaderC.tcpUrl);
  expect(ahead.code).toBe(9);
  expect(ahead.text).toContain("the leader's next seq is 3");
  for (const client of [a, b, c]) await client.close();
});

test("past the leader's retention: an empty replica begins at its oldest; one behind it exits 8", async () => {
  // A small tip: the oldest messages are on disk only, where retention removes them.
  const leader = await serve(tempDir(), {
    tipBytes: 4096,
    storeLimits: { segmentBytesMax: 4096, journalBytesMax: 64 * 1024 },
  });
  const publisher = await connect(leader.tcpUrl);
  await publishSome(publisher, "early", 10);
  // A replica that copied seqs 1..10, then stopped.
  const behindDir = tempDir();
  const early = await serve(behindDir, follow(leader.tcpUrl));
  await caughtUp(early, leader);
  await early.stop();
  // Enough for the journal to roll: retention then removes seq 11 for good.
  const filler = text("x".repeat(200));
  for (let round = 0; round < 60; round++)
    await publisher.publishBatch(
      Array.from({ length: 50 }, () => ({ topic: "t", payload: filler })),
    );
  const store = leader.store;
  for (let i = 0; i < 100 && (store.firstSeqHeld ?? 1) <= 11; i++) {
    store.maintain(Date.now() * 1000 + 3_600_000_000);
    await store.retain({ bytes: 1 }, Date.now() * 1000);
    await Bun.sleep(10);
  }
  const oldest = store.firstSeqHeld ?? 1;
  expect(oldest).toBeGreaterThan(11);
  // Not empty, and behind the leader's oldest: its log would have a hole.
  const stopped = await fatalOf(behindDir, leader.tcpUrl);
  expect(stopped.code).toBe(8);
  expect(stopped.text).toContain("the leader no longer holds seq 11");
  // Empty: it begins at the leader's oldest held seq and copies the log from there. (The
  // leader's tip may still hold a few seqs its store no longer does: the oldest held is theirs.)
  const heldBefore = await readAll(leader.tcpUrl);
  expect(heldBefore[0].seq).toBe(Math.min(oldest, leader.tip.records.firstSeq));
  const replicaDir = tempDir();
  let replica = await serve(replicaDir, follow(leader.tcpUrl));
  // Copied before the leader's tip moves on (it holds only a few 200-byte messages).
  await caughtUp(replica, leader);
  await publishSome(publisher, "during", 20);
  await caughtUp(replica, leader);
  const newest = heldBefore[heldBefore.length - 1].seq;
  const after = (await readAll(leader.tcpUrl)).filter((message) => message.seq > newest);
  expect(after.length).toBe(20);
  expect(await readAll(replica.tcpUrl)).toEqual([...heldBefore, ...after]);
  // Durably: after a restart it goes on from where it was, not from seq 1.
  await replica.stop();
  await publishSome(publisher, "after", 5);
  replica = await serve(replicaDir, follow(leader.tcpUrl));
  await caughtUp(replica, leader);
  const [replicaLog, leaderLog] = [await readAll(replica.tcpUrl), await readAll(leader.tcpUrl)];
  expect(replicaLog.map((message) => message.seq)).toEqual(
    Array.from(
      { length: leader.broker.nextSeq - heldBefore[0].seq },
      (_, i) => heldBefore[0].seq + i,
    ),
  );
  expect(replicaLog.slice(0, heldBefore.length + 20)).toEqual([...heldBefore, ...after]);
  expect(replicaLog.slice(-leaderLog.length)).toEqual(leaderLog);
  await replica.stop();
  await publisher.close();
});

test("a leader holding no message at all: a replica behind it exits 8 at once, an empty one begins at its next seq", async () => {
  const leaderDir = tempDir();
  const limits = { storeLimits: { segmentBytesMax: 4096, journalBytesMax: 64 * 1024 } };
  let leader = await serve(leaderDir, { tipBytes: 4096, ...limits });
  let publisher = await connect(leader.tcpUrl);
  await publishSome(publisher, "early", 10);
  const behindDir = tempDir();
  const early = await serve(behindDir, follow(leader.tcpUrl));
  await caughtUp(early, leader);
  await early.stop();
  await publishSome(publisher, "later", 10);
  // Retention removes everything; restarted, the leader's tip holds nothing either.
  const store = leader.store;
  for (let i = 0; i < 100 && (store.firstSeqHeld ?? 1) < store.nextSeq; i++) {
    store.maintain(Date.now() * 1000 + 3_600_000_000);
    await store.retain({ bytes: 1 }, Date.now() * 1000);
    await Bun.sleep(10);
  }
  expect(store.firstSeqHeld).toBe(21);
  await publisher.close();
  await leader.stop();
  leader = await serve(leaderDir, { tipBytes: 4096, ...limits });
  expect(await readAll(leader.tcpUrl)).toEqual([]);
  // Behind: exits 8 without waiting for a new message.
  const stopped = await fatalOf(behindDir, leader.tcpUrl);
  expect(stopped.code).toBe(8);
  expect(stopped.text).toContain("the leader no longer holds seq 11");
  expect(stopped.text).toContain("its next seq is 21");
  // Empty: begins at seq 21 and copies what comes.
  const replica = await serve(tempDir(), follow(leader.tcpUrl));
  const deadline = Date.now() + 5000;
  while (replica.broker.nextSeq !== 21 && Date.now() < deadline) await Bun.sleep(5);
  expect(replica.broker.nextSeq).toBe(21);
  publisher = await connect(leader.tcpUrl);
  await publishSome(publisher, "after", 3);
  await caughtUp(replica, leader);
  expect(await readAll(replica.tcpUrl)).toEqual(await readAll(leader.tcpUrl));
  expect((await readAll(replica.tcpUrl))[0].seq).toBe(21);
  await publisher.close();
  await replica.stop();
  await leader.stop();
});

test("a server following itself is refused and exits 9", async () => {
  const free = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = free.port;
  free.stop(true);
  const server = await serve(tempDir(), {
    port,
    nodeId: "self",
    follow: { url: `tcp://127.0.0.1:${port}`, backoffMs: 10 },
  });
  const failed = await Promise.race([server.failed, Bun.sleep(5000).then(() => null)]);
  expect(failed?.exitCode).toBe(9);
  expect(failed?.message).toContain('a server cannot follow itself (node id "self")');
  expect(server.broker.replicas.list()).toEqual([]);
  await server.stop();
  // Another node's replica is taken as before (a chain: a follower of a follower).
  const leader = await serve(tempDir());
  const middle = await serve(tempDir(), { nodeId: "m", ...follow(leader.tcpUrl) });
  const last = await serve(tempDir(), { nodeId: "l", ...follow(middle.tcpUrl) });
  const publisher = await connect(leader.tcpUrl);
  await publishSome(publisher, "chain", 5);
  await caughtUp(middle, leader);
  await caughtUp(last, leader);
  expect(middle.broker.replicas.list()).toMatchObject([{ id: "l", connected: true }]);
  await publisher.close();
  for (const s of [last, middle, leader]) await s.stop();
});
