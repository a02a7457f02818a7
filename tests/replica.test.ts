/**
 * End to end: `aria serve --follow URL` with the compiled binary. A publisher sends batches with
 * properties to the leader while the replica is killed with SIGKILL and restarted on its data
 * directory, then the leader is killed with SIGKILL and restarted on its data directory and port;
 * the replica reconnects with back-off and resumes. Afterwards both logs, read whole from the
 * oldest message with PROPERTIES, are equal: seq, time, topic, payload and properties, byte for
 * byte (no gap, no duplicate). `aria pub` to the replica is refused with ARIA_ERR_NOT_LEADER naming
 * the leader and exits non-zero.
 */
import { afterAll, expect, test } from "bun:test";
import type { AriaClient } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { makeTestCerts } from "./tls_certs.ts";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  runAria,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

interface Logged {
  seq: number;
  timeUs: number;
  topic: string;
  payload: string;
  properties: string;
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** The server's whole log, from the oldest message, properties included. */
async function logOf(url: string, options: Parameters<typeof connect>[1] = {}): Promise<Logged[]> {
  const client = await connect(url, options);
  const out: Logged[] = [];
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
      payload: hex(m.payload),
      properties: hex(m.properties),
    });
  await client.close();
  return out;
}

/** Publishes batches until `stop()`; survives the leader's restarts (lost batches are dropped). */
function publishing(url: string): { stop(): Promise<number> } {
  let stopped = false;
  let acked = 0;
  const run = (async () => {
    let client: AriaClient | null = null;
    for (let n = 0; !stopped; n++) {
      try {
        client ??= await connect(url, { reconnectDelayMs: 20, reconnectAttemptsMax: 200 });
        const batch = Array.from({ length: 1 + (n % 20) }, (_, i) => ({
          topic: `r/${n % 7}/${i % 3}`,
          payload: new Uint8Array([n & 255, i, 0, 255, ...new TextEncoder().encode(`m${n}.${i}`)]),
          properties: i % 4 === 0 ? new TextEncoder().encode(`p${n}`) : undefined,
        }));
        const result = await client.publishBatch(batch);
        acked += result.count;
      } catch {
        await Bun.sleep(20); // the leader is down: the client reconnects by itself
      }
    }
    await client?.close();
  })();
  return {
    stop: async () => {
      stopped = true;
      await run;
      return acked;
    },
  };
}

async function caughtUp(replica: AriaServer, leader: AriaServer): Promise<void> {
  await waitFor(async () => {
    const [r, l] = await Promise.all([replica.stats(), leader.stats()]);
    return r.broker.visibleSeq === l.broker.visibleSeq && l.broker.visibleSeq > 1;
  }, "the replica to catch up with the leader");
}

test("a replica's log equals its leader's byte for byte across kill -9 of either", async () => {
  const leaderDir = makeTempDir();
  const replicaDir = makeTempDir();
  let leader = await startAria({ dataDir: leaderDir });
  const port = Number(new URL(leader.tcpUrl.replace("tcp:", "http:")).port);
  const follow = ["--follow", leader.tcpUrl];
  let replica = await startAria({ dataDir: replicaDir, args: follow });
  const publisher = publishing(leader.tcpUrl);
  await waitFor(async () => (await replica.stats()).broker.visibleSeq > 300, "replicated messages");
  await replica.kill9();
  await Bun.sleep(100);
  replica = await startAria({ dataDir: replicaDir, args: follow });
  await waitFor(async () => {
    const [r, l] = await Promise.all([replica.stats(), leader.stats()]);
    return r.broker.visibleSeq > l.broker.visibleSeq - 50 && r.broker.visibleSeq > 600;
  }, "the restarted replica to follow");
  await leader.kill9();
  await Bun.sleep(200);
  leader = await startAria({ dataDir: leaderDir, port });
  await waitFor(
    async () =>
      (await leader.stats()).broker.visibleSeq > (await replica.stats()).broker.visibleSeq + 200,
    "publishes to the restarted leader",
  );
  const acked = await publisher.stop();
  expect(acked).toBeGreaterThan(900);
  await caughtUp(replica, leader);
  const [leaderLog, replicaLog] = await Promise.all([logOf(leader.tcpUrl), logOf(replica.tcpUrl)]);
  expect(leaderLog.length).toBeGreaterThanOrEqual(acked);
  expect(leaderLog[0].seq).toBe(1);
  expect(leaderLog.at(-1)?.seq).toBe(leaderLog.length);
  expect(replicaLog.length).toBe(leaderLog.length);
  expect(replicaLog).toEqual(leaderLog);
  expect(replica.stderr()).toContain("the connection to the leader ended; resuming");
  // Publishing to the replica: refused, naming the leader.
  const refused = await runAria(["pub", "--url", replica.tcpUrl, "r/x", "no"]);
  expect(refused.exitCode).not.toBe(0);
  expect(refused.stderr).toContain("ARIA_ERR_NOT_LEADER");
  expect(refused.stderr).toContain(leader.tcpUrl);
  expect(await replica.stop()).toBe(0);
  expect(await leader.stop()).toBe(0);
}, 60_000);

test("a replica ahead of its leader exits with code 9 and says why", async () => {
  const replicaDir = makeTempDir();
  const first = await startAria({ dataDir: replicaDir });
  await runAria(["pub", "--url", first.tcpUrl, "a", "one"]);
  await runAria(["pub", "--url", first.tcpUrl, "a", "two"]);
  await first.stop();
  const leader = await startAria();
  const replica = await startAria({ dataDir: replicaDir, args: ["--follow", leader.tcpUrl] });
  await waitFor(() => !replica.alive(), "the replica to stop");
  expect(replica.process.exitCode).toBe(9);
  expect(replica.stderr()).toContain("the leader's next seq is 1");
  await leader.stop();
}, 30_000);

test("the leader shows its replica in /metrics and /api/stats; --acks quorum acknowledges", async () => {
  const leader = await startAria({ args: ["--acks", "quorum"] });
  const replica = await startAria({ args: ["--follow", leader.tcpUrl, "--node-id", "r1"] });
  await waitFor(async () => {
    const stats = (await leader.stats()) as unknown as { replicas: { connected: boolean }[] };
    return stats.replicas.length === 1 && stats.replicas[0].connected;
  }, "the replica to connect");
  for (const payload of ["one", "two", "three"]) {
    const published = await runAria(["pub", "--url", leader.tcpUrl, "q/a", payload]);
    expect(published.exitCode).toBe(0);
  }
  const stats = (await leader.stats()) as unknown as { replicas: unknown[] };
  expect(stats.replicas).toEqual([
    { id: "r1", connected: true, durableSeq: 3, lagMessages: 0, lagMs: 0, inSync: true },
  ]);
  const metrics = await (await fetch(`${leader.adminUrl}/metrics`)).text();
  expect(metrics).toContain('aria_replica_durable_seq{replica="r1"} 3');
  expect(metrics).toContain('aria_replica_lag_messages{replica="r1"} 0');
  expect(metrics).toContain('aria_replica_lag_ms{replica="r1"} 0');
  expect(metrics).toContain('aria_replica_in_sync{replica="r1"} 1');
  expect(await replica.stop()).toBe(0);
  await waitFor(
    async () =>
      (await fetch(`${leader.adminUrl}/metrics`).then((r) => r.text())).includes(
        'aria_replica_connected{replica="r1"} 0',
      ),
    "the leader to see the replica gone",
  );
  await leader.stop();
}, 30_000);

test("a replica follows a tls:// leader that requires a token (--follow-ca, --follow-auth-token)", async () => {
  const certs = makeTestCerts();
  const leader = await startAria({
    args: [
      "--tls-cert",
      certs.path("server.pem"),
      "--tls-key",
      certs.path("server.key"),
      "--auth-token",
      "leader-secret",
    ],
  });
  expect(leader.tcpUrl.startsWith("tls://")).toBe(true);
  const pub = ["pub", "--url", leader.tcpUrl, "--ca", certs.path("ca.pem")];
  const env = { ...process.env, ARIA_AUTH_TOKEN: "leader-secret" } as Record<string, string>;
  expect((await runAria([...pub, "s/a", "secret one"], { env })).exitCode).toBe(0);
  const follow = ["--follow", leader.tcpUrl, "--follow-ca", certs.path("ca.pem")];
  // Without the token the leader refuses it: it retries, holding nothing.
  const refused = await startAria({ args: follow });
  await waitFor(
    () => refused.stderr().includes("requires an auth token"),
    "the refused sign-in in the log",
  );
  expect((await refused.stats()).broker.visibleSeq).toBe(1);
  await refused.stop();
  const replica = await startAria({ args: [...follow, "--follow-auth-token", "leader-secret"] });
  await waitFor(async () => (await replica.stats()).broker.visibleSeq === 2, "the copy");
  const [leaderLog, replicaLog] = await Promise.all([
    logOf(leader.tcpUrl, { tls: { ca: certs.text("ca.pem") }, authToken: "leader-secret" }),
    logOf(replica.tcpUrl),
  ]);
  expect(replicaLog).toEqual(leaderLog);
  expect(replicaLog.length).toBe(1);
  await replica.stop();
  await leader.stop();
  certs.remove();
}, 30_000);

test("serve refuses replica settings it cannot use, with exit code 2", async () => {
  const cases: [string[], string][] = [
    [["--acks", "most"], '--acks: "most" is not one of leader, quorum, all'],
    [["--node-id", "a b"], "--node-id: 1 to 64 of"],
    [["--replicas", "many"], "--replicas: a count of replicas"],
    [["--follow", "http://127.0.0.1:1"], "--follow:"],
    [["--follow", "tcp://127.0.0.1:1", "--follow-ca", "/x"], "--follow-ca is for a tls:// leader"],
    [["--follow-auth-token", "t"], "--follow-auth-token needs --follow URL"],
  ];
  for (const [args, message] of cases) {
    const run = await runAria(["serve", "--data-dir", makeTempDir(), "--port", "0", ...args]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain(message);
  }
});
