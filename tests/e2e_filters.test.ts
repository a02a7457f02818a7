/**
 * End to end: several publishers (client connections and an `aria pub --json-lines` process)
 * publish at once on topics chosen to trip filter edge cases (a subtree's own root, a sibling that
 * shares a prefix, deep and one-segment topics); several subscribers (separate connections, two
 * sharing one connection, and an `aria sub` process) hold exact, subtree and overlapping filters.
 * Each subscriber must get exactly the messages its filter matches, in seq order, each once, and
 * the server's seqs must be 1..N with no hole.
 */
import { expect, test } from "bun:test";
import type { AriaClient, ClientSubscription, Message } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import { Filter } from "../src/topic/mod.ts";
import {
  filterMatches,
  parseSubLines,
  runAria,
  serverForFile,
  waitFor,
} from "./fixtures/e2e_server.ts";

const TOPICS = [
  "app/orders/created",
  "app/orders/paid",
  "app/orders",
  "app/ordersx/created",
  "app/users/eu/1",
  "app/users",
  "app",
  "ops/x/y/z",
  "ops/metrics",
  "solo",
];

const FILTERS: Record<string, string[]> = {
  exact: ["app/orders/created"],
  subtree: ["app/orders/**"],
  overlapping: ["app/orders/**", "app/orders/created", "app/users/eu/**"],
  everything: ["**"],
  mixed: ["app/**", "ops/x/**", "solo"],
  exactsAcrossPartitions: ["app/users", "ops/metrics", "app/ordersx/created"],
  sharedConnectionA: ["ops/**", "app"],
  sharedConnectionB: ["ops/x/y/z", "app/users/**", "**"],
  // Equal to `everything` and `subtree` (one written differently: the same filter once
  // normalised): live fan-out serves each pair from frames encoded once.
  everythingAgain: ["**"],
  subtreeAgain: ["app/orders/created", "app/orders/**"],
};
const CLI_FILTER = ["app/orders/**", "ops/**", "app/orders/paid"];

const PUBLISHERS = 3;
const MESSAGES_PER_PUBLISHER = 2000;
const CLI_MESSAGES = 400;

interface Published {
  topic: string;
  payload: string;
}

const server = serverForFile({ tipBytes: "1MiB" });

function messagesOf(name: string, count: number, prng: Prng): Published[] {
  return Array.from({ length: count }, (_, i) => ({
    topic: TOPICS[prng.nextInt(TOPICS.length)],
    payload: `${name}-${i}-${"x".repeat(prng.nextInt(400))}`,
  }));
}

/** Collects a subscription's messages in the background, read one of the client's three ways. */
function collect(
  subscription: ClientSubscription,
  way: "messages" | "batches" | "frames",
): { got: (Published & { seq: number })[]; done: Promise<void> } {
  const got: (Published & { seq: number })[] = [];
  const decoder = new TextDecoder();
  const keep = (message: Omit<Message, "properties" | "ack">) =>
    got.push({ seq: message.seq, topic: message.topic, payload: decoder.decode(message.payload) });
  const done = (async () => {
    if (way === "batches") {
      for await (const batch of subscription.batches()) batch.forEach(keep);
    } else if (way === "frames") {
      for await (const frame of subscription.frames()) {
        while (frame.next())
          keep({
            seq: frame.seq,
            timeUs: frame.timeUs,
            topic: frame.topic,
            payload: frame.frame.subarray(
              frame.payloadStart,
              frame.payloadStart + frame.payloadBytes,
            ),
          });
      }
    } else {
      for await (const message of subscription) keep(message);
    }
  })();
  return { got, done };
}

test("publishers and subscribers with exact, subtree and overlapping filters: each gets exactly its messages, in order, once", async () => {
  const prng = new Prng(Number(process.env.FC_SEED ?? 0x41524941));
  const plans = Array.from({ length: PUBLISHERS }, (_, p) =>
    messagesOf(`pub${p}`, MESSAGES_PER_PUBLISHER, prng),
  );
  const cliPlan = messagesOf("cli", CLI_MESSAGES, prng);
  const url = server().tcpUrl;

  // Subscribers first, all live before anything is published.
  const clients: AriaClient[] = [];
  const subscribers = new Map<string, ReturnType<typeof collect>>();
  const shared = await connect(url, { clientName: "shared" });
  clients.push(shared);
  for (const [name, filter] of Object.entries(FILTERS)) {
    const client = name.startsWith("sharedConnection")
      ? shared
      : await connect(url, { clientName: name });
    if (client !== shared) clients.push(client);
    const subscription = client.subscribe(filter, { from: "live" });
    subscribers.set(
      name,
      collect(subscription, (["messages", "batches", "frames"] as const)[subscribers.size % 3]),
    );
    await subscription.caughtUpAt;
  }
  const allPlanned = [...plans.flat(), ...cliPlan];
  const cliExpectedCount = allPlanned.filter((m) => filterMatches(CLI_FILTER, m.topic)).length;
  const liveBefore = (await server().stats()).broker.subscriptionsByPhase.live;
  const cliSub = runAria(
    ["sub", "--url", url, ...CLI_FILTER, "--limit", String(cliExpectedCount)],
    { timeoutMs: 30_000 },
  );
  await waitFor(
    async () => (await server().stats()).broker.subscriptionsByPhase.live > liveBefore,
    "aria sub to go live",
  );

  // Publish from every publisher at once, in batches of random size.
  const bySeq = new Map<number, Published>();
  const publishers = plans.map(async (plan, p) => {
    const client = await connect(url, { clientName: `pub${p}` });
    clients.push(client);
    const batchPrng = new Prng(p + 1);
    for (let at = 0; at < plan.length; ) {
      const batch = plan.slice(at, at + 1 + batchPrng.nextInt(60));
      const seqs = await Promise.all(batch.map((m) => client.publish(m.topic, m.payload)));
      seqs.forEach((seq, i) => {
        expect(bySeq.has(seq)).toBe(false);
        bySeq.set(seq, batch[i]);
      });
      at += batch.length;
    }
  });
  const cliPub = runAria(["pub", "--url", url, "--json-lines"], {
    stdin: `${cliPlan.map((m) => JSON.stringify(m)).join("\n")}\n`,
    timeoutMs: 30_000,
  });
  await Promise.all(publishers);
  const pubRun = await cliPub;
  expect(pubRun.exitCode).toBe(0);
  expect(pubRun.stderr).toContain(`(${CLI_MESSAGES} messages)`);

  // The CLI's messages take, in order, the seqs no client publisher got.
  const total = allPlanned.length;
  const unclaimed = Array.from({ length: total }, (_, i) => i + 1).filter((seq) => !bySeq.has(seq));
  expect(unclaimed).toHaveLength(CLI_MESSAGES);
  for (const [i, seq] of unclaimed.entries()) bySeq.set(seq, cliPlan[i]);
  expect(bySeq.size).toBe(total);
  expect(Math.max(...bySeq.keys())).toBe(total);

  const expectedFor = (filter: readonly string[]) =>
    [...bySeq.entries()]
      .sort(([a], [b]) => a - b)
      .filter(([, m]) => filterMatches(filter, m.topic))
      .map(([seq, m]) => ({ seq, topic: m.topic, payload: m.payload }));

  for (const [name, filter] of Object.entries(FILTERS)) {
    const expected = expectedFor(filter);
    expect(expected.length).toBeGreaterThan(0);
    const { got } = subscribers.get(name)!;
    const lastSeq = expected[expected.length - 1].seq;
    await waitFor(
      () => got.length > 0 && got[got.length - 1].seq >= lastSeq,
      `subscriber ${name} to reach seq ${lastSeq}`,
      15_000,
    ).catch(() => undefined);
    if (got.length !== expected.length)
      throw new Error(
        `subscriber ${name} ${JSON.stringify(filter)} got ${got.length} messages, expected ${expected.length}`,
      );
    expect(got).toEqual(expected);
  }

  const cliRun = await cliSub;
  expect(cliRun.exitCode).toBe(0);
  expect(
    parseSubLines(cliRun.stdout).map(({ seq, topic, payload }) => ({ seq, topic, payload })),
  ).toEqual(expectedFor(CLI_FILTER));

  // Subscribers whose filters are equal once normalised (`**` three times, `app/orders/**`
  // twice) were served through frames encoded once per group: all their messages, unless a
  // member's send queue filled for a while (then it went on per message), never more.
  const groups = new Map<string, string[][]>();
  for (const filter of Object.values(FILTERS)) {
    const key = Filter.of(...filter).toString();
    groups.set(key, [...(groups.get(key) ?? []), filter]);
  }
  let sharable = 0;
  for (const members of groups.values())
    if (members.length >= 2) sharable += members.length * expectedFor(members[0]).length;
  expect(sharable).toBe(3 * expectedFor(["**"]).length + 2 * expectedFor(["app/orders/**"]).length);
  const broker = (await server().stats()).broker;
  expect(broker.messagesDeliveredShared).toBeLessThanOrEqual(sharable);
  expect(broker.messagesDeliveredShared).toBeGreaterThanOrEqual(0.9 * sharable);

  for (const client of clients) await client.close();
  for (const { done } of subscribers.values()) await done;
}, 60_000);
