/**
 * The leader's replica tracker: the seq acks may go up to under leader, quorum and all; the
 * in-sync set (joined when caught up, left when behind by more than the bound or disconnected);
 * and, against in-process servers, a replica's reported durable seq, `--acks quorum` holding a
 * PUBLISH_ACK until the replica has the message durably, and the `$replica/` names refused to
 * ordinary clients.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AriaError } from "../protocol/mod.ts";
import { processLog } from "../runtime/mod.ts";
import { connect, type RunningServer, type ServerOptions, startServer } from "../server/mod.ts";
import { type AckMode, ReplicaTracker } from "./tracker.ts";

/** A leader log whose seq s was published at s ms; its clock reads `now` (µs). */
function fakeLog(durableSeq: number) {
  const log = {
    durableSeq,
    now: durableSeq * 1000,
    timeOfSeq: (seq: number) => (seq >= 1 && seq <= log.durableSeq ? seq * 1000 : null),
    nowUs: () => log.now,
  };
  return log;
}

function tracker(acks: AckMode, log = fakeLog(100), isrMaxLagUs = 10_000) {
  return { log, tracker: new ReplicaTracker(log, { acks, isrMaxLagUs }) };
}

test("ackableSeq: leader alone, a majority, every in-sync replica", () => {
  const a = {};
  const b = {};
  for (const acks of ["leader", "quorum", "all"] as const) {
    const { tracker: t, log } = tracker(acks);
    // No replica yet: the leader alone.
    expect(t.ackableSeq()).toBe(100);
    t.attach("$replica/a", a);
    t.attach("$replica/b", b);
    t.ack(a, 100);
    t.ack(b, 100); // both caught up: in the in-sync set
    log.durableSeq = 110;
    log.now = 110_000;
    t.ack(a, 105);
    t.ack(b, 102); // behind by 4 and 7 ms, within the bound: still in sync
    expect(t.ackableSeq()).toBe(acks === "leader" ? 110 : acks === "quorum" ? 105 : 102);
    // b reports less than it did (a reconnect after a crash): its durable seq stays.
    t.ack(b, 50);
    expect(t.list().find((r) => r.id === "b")?.durableSeq).toBe(102);
  }
  const { tracker: all } = tracker("all");
  all.attach("$replica/a", a);
  all.ack(a, 95);
  // Never caught up: not in the in-sync set, so acks do not wait for it.
  expect(all.ackableSeq()).toBe(100);
  all.ack(a, 100);
  expect(all.ackableSeq()).toBe(100);
  expect(all.list()[0].inSync).toBe(true);
  // Disconnected: out of the ISR, acks go on without it (docs/cluster.md).
  all.detach(a);
  expect(all.list()[0]).toMatchObject({ connected: false, inSync: false, durableSeq: 100 });
  expect(all.ackableSeq()).toBe(100);
  // Quorum counts a disconnected replica's durable seq: it is still durable there.
  const { tracker: quorum } = tracker("quorum");
  quorum.attach("$replica/a", a);
  quorum.ack(a, 90);
  quorum.detach(a);
  expect(quorum.ackableSeq()).toBe(90);
});

test("--replicas N: quorum counts the replicas expected, seen or not", () => {
  const log = fakeLog(100);
  const t = new ReplicaTracker(log, { acks: "quorum", replicasExpected: 2 });
  // A leader just restarted, no replica back yet: a majority of 3 is not there.
  expect(t.ackableSeq()).toBe(0);
  const a = {};
  t.attach("$replica/a", a);
  t.ack(a, 90);
  expect(t.ackableSeq()).toBe(90);
  // Expecting 4: a majority of 5 is the leader and 2 replicas.
  const four = new ReplicaTracker(log, { acks: "quorum", replicasExpected: 4 });
  four.attach("$replica/a", a);
  four.ack(a, 90);
  expect(four.ackableSeq()).toBe(0);
});

test("the in-sync set: left when behind by more than the bound, rejoined when caught up", () => {
  const log = fakeLog(100);
  const t = new ReplicaTracker(log, { acks: "all", isrMaxLagUs: 10_000 });
  const a = {};
  t.attach("$replica/a", a);
  t.ack(a, 95);
  // Its first missing seq (96) was published 4 ms ago, but it was never caught up: it joins only
  // once it holds everything the leader holds durably (Kafka's rule), not while behind.
  expect(t.list()[0]).toMatchObject({ inSync: false, lagMessages: 5, lagMs: 4 });
  t.ack(a, 100);
  expect(t.list()[0]).toMatchObject({ inSync: true, lagMessages: 0, lagMs: 0 });
  log.durableSeq = 120; // the leader moved on, the replica did not
  log.now = 120_000;
  t.reviewAll();
  expect(t.list()[0]).toMatchObject({ inSync: false, lagMessages: 20, lagMs: 19 });
  expect(t.isrShrinks).toBe(1);
  t.ack(a, 118); // within the bound again, but not caught up: still out
  expect(t.list()[0].inSync).toBe(false);
  t.ack(a, 120);
  expect(t.list()[0]).toMatchObject({ inSync: true, lagMessages: 0, lagMs: 0 });
});

test("a quiet spell longer than the bound does not count against a caught-up replica", () => {
  const log = fakeLog(100);
  const t = new ReplicaTracker(log, { acks: "all", isrMaxLagUs: 10_000 });
  const a = {};
  t.attach("$replica/a", a);
  t.ack(a, 100);
  expect(t.list()[0]).toMatchObject({ inSync: true, lagMs: 0 });
  // 50 ms without a publish (the timer reviews nothing), then seq 101 at 150 ms: the replica was
  // caught up until then, it stays in sync and seq 101 waits for it.
  log.now = 150_000;
  log.durableSeq = 101;
  log.timeOfSeq = (seq) => (seq === 101 ? 150_000 : seq >= 1 && seq <= 100 ? seq * 1000 : null);
  t.reviewAll();
  expect(t.list()[0]).toMatchObject({ inSync: true, lagMessages: 1, lagMs: 0 });
  expect(t.ackableSeq()).toBe(100);
  // Still stalled once the bound has passed since: out, the ack goes without it.
  log.now = 160_001;
  t.reviewAll();
  expect(t.list()[0]).toMatchObject({ inSync: false, lagMs: 10.001 });
  expect(t.ackableSeq()).toBe(101);
});

test("a replica rebuilt empty under the same node id holds nothing: its new start resets it", () => {
  const log = fakeLog(100);
  const t = new ReplicaTracker(log, { acks: "all", isrMaxLagUs: 10_000 });
  const a = {};
  t.attach("$replica/a", a, 1);
  t.ack(a, 100);
  expect(t.list()[0]).toMatchObject({ inSync: true, durableSeq: 100 });
  t.detach(a);
  // Rebuilt on an empty data directory: its SUBSCRIBE starts at seq 1.
  const b = {};
  t.attach("$replica/a", b, 1);
  expect(t.list()[0]).toMatchObject({ durableSeq: 0, lagMessages: 100, inSync: false });
  expect(t.ackableSeq()).toBe(100);
  // A replica reconnecting from its newest held (seq 100) reports it again at once.
  t.ack(b, 60);
  t.detach(b);
  const c = {};
  t.attach("$replica/a", c, 60);
  expect(t.list()[0].durableSeq).toBe(59);
  t.ack(c, 60);
  expect(t.list()[0].durableSeq).toBe(60);
});

const dirs: string[] = [];
const servers: RunningServer[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop().catch(() => {});
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function serve(extra: Partial<ServerOptions> = {}, dataDir?: string) {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "aria-tracker-"));
  dirs.push(dir);
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir: dir,
    tipBytes: 1024 * 1024,
    fsync: "always",
    log: processLog({ level: "error", format: "text" }),
    ...extra,
  });
  servers.push(server);
  return { server, dir };
}

test("--acks quorum: a publish is acknowledged once the replica has it durably", async () => {
  const { server: leader } = await serve({ acks: "quorum" });
  const { server: first, dir } = await serve({
    nodeId: "r1",
    follow: { url: leader.tcpUrl, backoffMs: 10 },
  });
  // Until the replica connected the leader knows no replica and acknowledges alone.
  const deadline = Date.now() + 5000;
  while (leader.broker.replicas.list().length === 0 && Date.now() < deadline) await Bun.sleep(5);
  const client = await connect(leader.tcpUrl);
  const seq = await client.publish("a/b", "one");
  expect(seq).toBe(1);
  // Acknowledged: the replica reported it durable, and the leader shows it.
  expect(first.broker.durableSeq).toBeGreaterThanOrEqual(1);
  const row = leader.broker.replicas.list()[0];
  expect(row).toMatchObject({ id: "r1", connected: true, durableSeq: 1, lagMessages: 0 });
  // The replica stops: a quorum (leader + r1) cannot hold the next publish, which waits.
  await first.stop();
  let acked = false;
  const pending = client.publish("a/b", "two").then((s) => {
    acked = true;
    return s;
  });
  await Bun.sleep(300);
  expect(acked).toBe(false);
  expect(leader.broker.replicas.list()[0].connected).toBe(false);
  // It returns, copies seq 2, reports it: the publish is acknowledged.
  await serve({ nodeId: "r1", follow: { url: leader.tcpUrl, backoffMs: 10 } }, dir);
  expect(await pending).toBe(2);
  expect(leader.broker.replicas.list()[0]).toMatchObject({ connected: true, durableSeq: 2 });
  await client.close();
});

test("a leader with --replicas 1 holds acknowledgements until its replica is back", async () => {
  const { server: leader } = await serve({ acks: "quorum", replicasExpected: 1 });
  const client = await connect(leader.tcpUrl);
  let acked = false;
  const pending = client.publish("a/b", "first").then((seq) => {
    acked = true;
    return seq;
  });
  await Bun.sleep(200);
  expect(acked).toBe(false);
  const { server: replica } = await serve({
    nodeId: "r1",
    follow: { url: leader.tcpUrl, backoffMs: 10 },
  });
  expect(await pending).toBe(1);
  expect(replica.broker.durableSeq).toBe(1);
  await client.close();
});

test("--acks all: waits for the in-sync replica; with none in sync the leader acknowledges alone", async () => {
  const { server: leader } = await serve({ acks: "all" });
  const { server: replica } = await serve({
    nodeId: "r1",
    follow: { url: leader.tcpUrl, backoffMs: 10 },
  });
  const deadline = Date.now() + 5000;
  while (!leader.broker.replicas.list()[0]?.inSync && Date.now() < deadline) await Bun.sleep(5);
  const client = await connect(leader.tcpUrl);
  expect(await client.publish("a/b", "one")).toBe(1);
  // Acknowledged only once the in-sync replica had it.
  expect(replica.broker.durableSeq).toBe(1);
  await replica.stop();
  expect(leader.broker.replicas.list()[0]).toMatchObject({ connected: false, inSync: false });
  // The in-sync set is empty: the leader acknowledges alone (docs/cluster.md).
  expect(await client.publish("a/b", "two")).toBe(2);
  await client.close();
});

test("$replica/ names are refused to ordinary clients", async () => {
  const { server } = await serve();
  const client = await connect(server.tcpUrl);
  const subscription = client.subscribe("**", { durable: "$replica/x" });
  const error = await (async () => {
    try {
      for await (const _ of subscription) break;
    } catch (caught) {
      return caught;
    }
    return null;
  })();
  expect(error).toBeInstanceOf(AriaError);
  expect((error as AriaError).code).toBe("ARIA_ERR_PERMISSION_DENIED");
  expect(server.broker.replicas.list()).toEqual([]);
  await client.close();
});

test("--acks all after a quiet spell longer than the bound: a publish waits for the stalled in-sync replica", async () => {
  const { server: leader } = await serve({ acks: "all", isrMaxLagUs: 400_000 });
  // A replica that acknowledges by hand, then stalls (stays connected, acknowledges nothing).
  const replica = await connect(leader.tcpUrl, { clientName: "aria-replica" });
  const follow = replica.subscribe("**", {
    from: { seq: 1 },
    durable: "$replica/r",
    ack: "manual",
  });
  const client = await connect(leader.tcpUrl);
  const first = client.publish("a/b", "one");
  // Read on by hand, never returned: the subscription stays open.
  const frames = follow.frames()[Symbol.asyncIterator]();
  expect((await frames.next()).done).toBe(false);
  follow.acknowledge(1);
  expect(await first).toBe(1);
  const deadline = Date.now() + 5000;
  while (!leader.broker.replicas.list()[0]?.inSync && Date.now() < deadline) await Bun.sleep(5);
  expect(leader.broker.replicas.list()[0]).toMatchObject({ inSync: true, lagMs: 0 });
  await Bun.sleep(700); // quiet, longer than the bound
  const started = performance.now();
  let acked = false;
  const second = client.publish("a/b", "two").then((seq) => {
    acked = true;
    return seq;
  });
  // Reviewed at once (the timer does so about every second): still in sync, the ack waits.
  await Bun.sleep(50);
  leader.broker.replicas.reviewAll();
  await Bun.sleep(50);
  expect(acked).toBe(false);
  expect(leader.broker.replicas.list()[0]).toMatchObject({ inSync: true, lagMessages: 1 });
  expect(await second).toBe(2);
  // It waited the bound, then went without the replica once it left the in-sync set.
  expect(performance.now() - started).toBeGreaterThan(350);
  expect(leader.broker.replicas.list()[0]).toMatchObject({ inSync: false, lagMessages: 1 });
  await client.close();
  await replica.close();
});
