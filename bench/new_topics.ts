/**
 * New topics against many subscriptions (issue 28 part 3): starts the built binary on port 0 with
 * a temp data dir, opens `--connections` × `--subscriptions` subscriptions of `--entries` filter
 * entries each (none matching what is published: half exact `cC/sS/eK`, half subtrees
 * `cC/sS/dK/**`), then publishes `--messages` messages per phase from one connection (256 per
 * PUBLISH frame, 8 frames unacknowledged), alternating a phase on topics the server already
 * knows with a phase on topics it has never seen, `--rounds` times. Prints both rates (medians and
 * each round) and the longest event-loop pause in each phase, two ways: the server's own
 * (ARIA_DEBUG_EVENT_LOOP_LAG_MS=5 makes it log each pause over 5 ms with its time, attributed to
 * phases by time; "n/a" for a binary without it) and the longest /healthz round trip seen by a
 * probe in a separate process (so the publisher's own work does not count). Also the server's
 * CPU time per message in each phase (its main thread, from /proc/PID/schedstat; "n/a" off
 * Linux): on a shared machine the rates swing with other load, the CPU a message costs much less.
 *
 * `--in-process` runs, instead of a server, the stages of the publish path that a new topic makes
 * work differently, each alone in this process on the same topics (new / repeated phases
 * alternated, `--rounds` times): the decoder's TopicCache; the TopicTable's intern with the same
 * subscriptions' matchers registered (the index walk) and without any; the store's append with
 * its topic bookkeeping (an in-memory disk, a commit per 256, sorting not timed; with the topic
 * and partition ids a table gave each topic, as the broker passes them); and, as the
 * floor any table of names by string pays, a plain Map insert of each name. Prints µs per message
 * of each (this thread's CPU time, so that other load counts less) and what a new topic adds.
 *
 *   bun bench/new_topics.ts [--bin dist/aria] [--connections 4] [--subscriptions 256]
 *     [--entries 10] [--messages 50000] [--rounds 3] [--in-process]
 *     [--only new|repeated] (only that phase, e.g. to profile the server under it alone)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "../mod.ts";
import { TopicCache } from "../src/protocol/mod.ts";
import { Store } from "../src/store/mod.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter, FilterMatcher, TopicTable } from "../src/topic/mod.ts";

const { values } = parseArgs({
  options: {
    bin: { type: "string" },
    connections: { type: "string" },
    subscriptions: { type: "string" },
    entries: { type: "string" },
    messages: { type: "string" },
    rounds: { type: "string" },
    probe: { type: "string" },
    "in-process": { type: "boolean" },
    only: { type: "string" },
  },
});

if (values.probe !== undefined) await probe(values.probe);
else if (values["in-process"]) await inProcess();
else await main();

/** Probe mode: one /healthz round trip at a time, printing "<epoch ms> <round trip ms>". */
async function probe(adminUrl: string): Promise<void> {
  for (;;) {
    const started = performance.now();
    try {
      await (await fetch(`${adminUrl}/healthz`)).arrayBuffer();
    } catch {
      return; // the server is gone
    }
    const roundTripMs = performance.now() - started;
    console.log(`${Date.now()} ${roundTripMs.toFixed(2)}`);
    await Bun.sleep(2);
  }
}

async function main(): Promise<void> {
  const bin = values.bin ?? join(import.meta.dir, "..", "dist", "aria");
  const connections = Number(values.connections ?? 4);
  const subscriptions = Number(values.subscriptions ?? 256);
  const entries = Number(values.entries ?? 10);
  const messages = Number(values.messages ?? 50_000);
  const rounds = Number(values.rounds ?? 3);
  const dataDir = mkdtempSync(join(tmpdir(), "aria-new-topics-"));
  const server = Bun.spawn(
    [bin, "serve", "--host", "127.0.0.1", "--port", "0", "--admin-port", "0"].concat([
      "--data-dir",
      dataDir,
      "--fsync",
      "never",
    ]),
    {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ARIA_DEBUG_EVENT_LOOP_LAG_MS: "5" },
    },
  );
  const serverPauses: { at: number; ms: number }[] = [];
  void collectLines(server.stderr, (line) => {
    const match = /event loop paused ([\d.]+) ms at (\d+)/.exec(line);
    if (match === null) process.stderr.write(`${line}\n`);
    else serverPauses.push({ at: Number(match[2]), ms: Number(match[1]) });
  });
  let prober: ReturnType<typeof Bun.spawn> | null = null;
  try {
    const [tcpUrl, adminUrl] = await serverUrls(server.stdout);
    const subscribers = [];
    for (let c = 0; c < connections; c++) {
      const client = await connect(tcpUrl);
      subscribers.push(client);
      for (const filter of filtersOf(c, subscriptions, entries)) client.subscribe(filter);
    }
    await untilSubscribed(adminUrl, connections * subscriptions);
    const pauses: { at: number; ms: number }[] = [];
    prober = Bun.spawn([process.execPath, import.meta.path, "--probe", adminUrl], {
      stdout: "pipe",
      stderr: "inherit",
    });
    void collectLines(prober.stdout as ReadableStream<Uint8Array>, (line) => {
      const [at, ms] = line.split(" ").map(Number);
      pauses.push({ at, ms });
    });
    const lagWatched = (await (await fetch(`${adminUrl}/metrics`)).text()).includes(
      "aria_event_loop_lag_max_seconds",
    );
    const publisher = await connect(tcpUrl);
    const payload = new Uint8Array(64);
    const known = (i: number) => `pub/p${i % 64}/t${i % 4096}`;
    await publishAll(publisher, messages, known, payload); // interns them: known from now on
    const rows: Row[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const phase of values.only === undefined ? ["repeated", "new"] : [values.only]) {
        const topicOf = phase === "new" ? (i: number) => `n${round}/p${i % 64}/t${i}` : known;
        const started = Date.now();
        const cpuBefore = cpuNs(server.pid);
        const seconds = await publishAll(publisher, messages, topicOf, payload);
        const cpuAfter = cpuNs(server.pid);
        const ended = Date.now();
        await Bun.sleep(50); // the probe's last answer
        const within = (list: { at: number; ms: number }[]) =>
          Math.max(
            0,
            ...list.filter((p) => p.at >= started && p.at <= ended + 50).map((p) => p.ms),
          );
        const lagMs = lagWatched ? within(serverPauses) : null;
        const cpuNsPerMessage =
          cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) / messages;
        rows.push({
          phase,
          rate: messages / seconds,
          probeMs: within(pauses),
          lagMs,
          cpuNsPerMessage,
        });
      }
    }
    await publisher.close();
    for (const client of subscribers) await client.close();
    print({ connections, subscriptions, entries, messages }, rows);
  } finally {
    prober?.kill();
    server.kill();
    await server.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The subscriptions' filters of connection `c` (none matches a published topic). */
function filtersOf(c: number, subscriptions: number, entries: number): string[][] {
  return Array.from({ length: subscriptions }, (_, s) =>
    Array.from({ length: entries }, (_, k) =>
      k % 2 === 0 ? `c${c}/s${s}/e${k}` : `c${c}/s${s}/d${k}/**`,
    ),
  );
}

/** The in-process stages (see the head comment): µs per message, new and repeated topics. */
async function inProcess(): Promise<void> {
  const connections = Number(values.connections ?? 4);
  const subscriptions = Number(values.subscriptions ?? 256);
  const entries = Number(values.entries ?? 10);
  const messages = Number(values.messages ?? 50_000);
  const rounds = Number(values.rounds ?? 3);
  const cache = new TopicCache();
  const table = new TopicTable();
  const bare = new TopicTable();
  for (let c = 0; c < connections; c++)
    for (const texts of filtersOf(c, subscriptions, entries))
      new FilterMatcher(table, Filter.of(...texts));
  const { store } = await Store.open(new SimDisk().view(), { fsync: "never" });
  const { store: byIds } = await Store.open(new SimDisk().view(), { fsync: "never" });
  const names = new Map<string, number>();
  const payload = new Uint8Array(64);
  const encoder = new TextEncoder();
  const known = (i: number) => `pub/p${i % 64}/t${i % 4096}`;
  let seq = 1;
  let idsSeq = 1; // the second store's
  // The ids the broker's table gave each topic before the store's append (not timed here).
  const ids = new TopicTable();
  let topicIds = new Int32Array(0);
  let partitionIds = new Int32Array(0);
  const stages: Record<string, (topics: string[], bytes: Uint8Array, starts: Int32Array) => void> =
    {
      decode: (topics, bytes, starts) => {
        for (let i = 0; i < topics.length; i++)
          cache.resolve(bytes, starts[i], starts[i + 1] - starts[i]);
      },
      intern: (topics) => {
        for (let i = 0; i < topics.length; i++) table.internValidated(topics[i], seq + i);
      },
      "intern, no matchers": (topics) => {
        for (let i = 0; i < topics.length; i++) bare.internValidated(topics[i], seq + i);
      },
      "store, by name": (topics) => {
        for (let i = 0; i < topics.length; i++) {
          store.append(seq++, 1_700_000_000_000_000 + seq, topics[i], payload);
          if (i % 256 === 255) void store.commit();
        }
      },
      "store, by ids": (topics) => {
        for (let i = 0; i < topics.length; i++) {
          const at = idsSeq++;
          const time = 1_700_000_000_000_000 + at;
          byIds.append(
            at,
            time,
            topics[i],
            payload,
            0,
            64,
            null,
            0,
            0,
            topicIds[i],
            partitionIds[i],
          );
          if (i % 256 === 255) void byIds.commit();
        }
      },
      "Map insert": (topics) => {
        for (let i = 0; i < topics.length; i++)
          if (names.get(topics[i]) === undefined) names.set(topics[i], i);
      },
    };
  const results = new Map<string, number[]>();
  const phases = (round: number) => (round % 2 === 0 ? ["repeated", "new"] : ["new", "repeated"]);
  for (let round = -1; round < rounds; round++) {
    // Round -1 only interns the repeated topics everywhere (and warms the code up).
    for (const phase of round < 0 ? ["repeated"] : phases(round)) {
      const topics = Array.from({ length: messages }, (_, i) =>
        phase === "new" ? `n${round}/p${i % 64}/t${i}` : known(i),
      );
      const encoded = topics.map((topic) => encoder.encode(topic));
      const starts = new Int32Array(messages + 1);
      for (let i = 0; i < messages; i++) starts[i + 1] = starts[i] + encoded[i].length;
      const bytes = new Uint8Array(starts[messages]);
      for (let i = 0; i < messages; i++) bytes.set(encoded[i], starts[i]);
      for (const [stage, run] of Object.entries(stages)) {
        // Each stage sees the topics as the server would: the strings the decoder made of them.
        const decoded = topics.map((topic) => ` ${topic}`.slice(1));
        if (stage === "store, by ids") {
          topicIds = Int32Array.from(decoded, (topic) => ids.internValid(topic));
          partitionIds = Int32Array.from(topicIds, (id) => ids.partitionOfTopic(id));
        }
        Bun.gc(true);
        const started = threadUs();
        run(decoded, bytes, starts);
        const us = (threadUs() - started) / messages;
        if (stage === "store, by name") await store.commit();
        if (stage === "store, by ids") await byIds.commit();
        if (round >= 0)
          results.set(`${stage} ${phase}`, [...(results.get(`${stage} ${phase}`) ?? []), us]);
      }
    }
  }
  await store.close();
  await byIds.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `in-process, ${connections * subscriptions} matchers of ${entries} entries, ` +
      `${messages} messages a phase, ${rounds} rounds`,
  );
  console.log("| stage | repeated µs/msg | new µs/msg | a new topic adds µs |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const stage of Object.keys(stages)) {
    const repeated = median(results.get(`${stage} repeated`) ?? []);
    const fresh = median(results.get(`${stage} new`) ?? []);
    console.log(
      `| ${stage} | ${repeated.toFixed(3)} | ${fresh.toFixed(3)} | ` +
        `${(fresh - repeated).toFixed(3)} |`,
    );
  }
}

async function serverUrls(stdout: ReadableStream<Uint8Array>): Promise<[string, string]> {
  const reader = stdout.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (text.split("\n").length < 3) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`aria serve exited before printing its URLs: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  const [tcpUrl, adminUrl] = text.split("\n");
  return [tcpUrl, adminUrl];
}

async function untilSubscribed(adminUrl: string, count: number): Promise<void> {
  for (;;) {
    const stats = await (await fetch(`${adminUrl}/api/stats`)).json();
    const phases: Record<string, number> = stats.broker.subscriptionsByPhase ?? {};
    const held = Object.values(phases).reduce((sum, n) => sum + n, 0);
    if (held >= count) return;
    await Bun.sleep(100);
  }
}

/** Calls `onLine` with each line of `stream`. */
async function collectLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(chunk, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) onLine(line);
  }
}

/** Publishes `count` messages, 256 per frame and 8 frames in flight; returns the seconds taken. */
async function publishAll(
  client: Awaited<ReturnType<typeof connect>>,
  count: number,
  topicOf: (i: number) => string,
  payload: Uint8Array,
): Promise<number> {
  const BATCH = 256;
  const IN_FLIGHT = 8;
  const started = performance.now();
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < count; i += BATCH) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + BATCH); j++) batch.push({ topic: topicOf(j), payload });
    inFlight.push(client.publishBatch(batch));
    if (inFlight.length >= IN_FLIGHT) await inFlight.shift();
  }
  await Promise.all(inFlight);
  return (performance.now() - started) / 1000;
}

function print(
  setup: { connections: number; subscriptions: number; entries: number; messages: number },
  rows: Row[],
): void {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `${setup.connections} connection(s) × ${setup.subscriptions} subscriptions × ${setup.entries} entries, ${setup.messages} messages a phase`,
  );
  console.log(
    "| topics | k msg/s (median) | rounds | max /healthz ms | max server lag ms | server CPU µs/msg (median) |",
  );
  console.log("| --- | ---: | --- | ---: | ---: | ---: |");
  const cpu = (phase: string) => {
    const values = rows
      .filter((row) => row.phase === phase)
      .map((row) => row.cpuNsPerMessage)
      .filter((ns): ns is number => ns !== null);
    return values.length === 0 ? null : median(values);
  };
  for (const phase of ["repeated", "new"]) {
    const mine = rows.filter((row) => row.phase === phase);
    if (mine.length === 0) continue;
    const lags = mine.map((row) => row.lagMs).filter((lag): lag is number => lag !== null);
    const cpuNs = cpu(phase);
    console.log(
      `| ${phase} | ${(median(mine.map((r) => r.rate)) / 1000).toFixed(1)} | ${mine.map((r) => (r.rate / 1000).toFixed(1)).join(", ")} | ${Math.max(...mine.map((r) => r.probeMs)).toFixed(0)} | ${lags.length === 0 ? "n/a" : Math.max(...lags).toFixed(0)} | ${cpuNs === null ? "n/a" : (cpuNs / 1000).toFixed(2)} |`,
    );
  }
  if (values.only !== undefined) return; // one phase: no ratio
  const rate = (phase: string) => median(rows.filter((r) => r.phase === phase).map((r) => r.rate));
  const cpuRepeated = cpu("repeated");
  const cpuNew = cpu("new");
  if (cpuRepeated !== null && cpuNew !== null)
    console.log(`CPU per message, repeated / new: ${((100 * cpuRepeated) / cpuNew).toFixed(0)}%`);
  console.log(`new / repeated: ${((100 * rate("new")) / rate("repeated")).toFixed(0)}%`);
}

interface Row {
  phase: string;
  rate: number;
  probeMs: number;
  lagMs: number | null;
  /** The server's main-thread CPU time per message in the phase, or null off Linux. */
  cpuNsPerMessage: number | null;
}

/**
 * Microseconds this thread has run (its CPU time: other load on the machine does not count), or
 * the time since start where the runtime cannot tell.
 */
function threadUs(): number {
  const usage = (
    process as { threadCpuUsage?: () => { user: number; system: number } }
  ).threadCpuUsage?.();
  return usage === undefined ? performance.now() * 1000 : usage.user + usage.system;
}

/** Nanoseconds the main thread of process `pid` has run (Linux schedstat), or null. */
function cpuNs(pid: number): number | null {
  const path = `/proc/${pid}/schedstat`;
  if (!existsSync(path)) return null;
  return Number(readFileSync(path, "utf8").split(" ")[0]);
}
