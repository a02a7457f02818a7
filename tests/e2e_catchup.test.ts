/**
 * End to end: catch-up under load. A server with a 1 MiB tip gets ~4 MiB of history (the ring
 * wraps several times, so the oldest messages are only on disk), then a publisher keeps publishing
 * while subscribers start from `earliest`, from a seq inside the ring, from a seq only on disk,
 * and from a time (one on disk, one in the ring), through the client library and `aria sub`.
 * Each must get exactly the matching messages from its start to the end of the stream, in order,
 * each once: no gap or duplicate at the disk → tip → live handoffs. The admin counters confirm
 * that both the disk and the tip paths were taken.
 */
import { expect, test } from "bun:test";
import type { AriaClient, ClientSubscription, StartFrom } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import {
  filterMatches,
  parseSubLines,
  runAria,
  serverForFile,
  waitFor,
} from "./fixtures/e2e_server.ts";

const TOPICS = ["load/a/x", "load/a/y", "load/b", "other/c/d", "other/e", "solo"];
/** Messages before the load: at ~530 ring bytes each, about four times the 1 MiB ring. */
const HISTORY_MESSAGES = 8000;
/** How long the publisher keeps going once the subscribers started. */
const LOAD_MS = 1500;

interface Published {
  seq: number;
  topic: string;
  payload: string;
}

const server = serverForFile({ tipBytes: "1MiB" });

class Publisher {
  readonly bySeq = new Map<number, Published>();
  lastSeq = 0;
  private count = 0;
  constructor(
    private readonly client: AriaClient,
    private readonly prng: Prng,
  ) {}

  /** Publishes `count` messages in one tick (one or a few PUBLISH frames); resolves when all are acknowledged. */
  async batch(count: number): Promise<void> {
    const messages = Array.from({ length: count }, () => {
      const n = this.count++;
      return {
        topic: TOPICS[this.prng.nextInt(TOPICS.length)],
        payload: `m${n}:${"p".repeat(440 + this.prng.nextInt(120))}`,
      };
    });
    const seqs = await Promise.all(messages.map((m) => this.client.publish(m.topic, m.payload)));
    seqs.forEach((seq, i) => {
      if (this.bySeq.has(seq)) throw new Error(`seq ${seq} acknowledged twice`);
      this.bySeq.set(seq, { seq, ...messages[i] });
      this.lastSeq = Math.max(this.lastSeq, seq);
    });
  }

  /** A time with no publish near it; returns it with the first seq published after it. */
  async timeMark(): Promise<{ time: Date; firstSeqAfter: number }> {
    await Bun.sleep(25);
    const time = new Date();
    await Bun.sleep(25);
    return { time, firstSeqAfter: this.lastSeq + 1 };
  }

  /** Every published message matching `filter` from `fromSeq` on, in seq order. */
  expected(filter: readonly string[], fromSeq: number): Published[] {
    const result: Published[] = [];
    for (let seq = fromSeq; seq <= this.lastSeq; seq++) {
      const message = this.bySeq.get(seq);
      if (message === undefined) throw new Error(`seq ${seq} was never acknowledged`);
      if (filterMatches(filter, message.topic)) result.push(message);
    }
    return result;
  }
}

function collect(subscription: ClientSubscription): Published[] {
  const got: Published[] = [];
  const decoder = new TextDecoder();
  void (async () => {
    for await (const message of subscription)
      got.push({
        seq: message.seq,
        topic: message.topic,
        payload: decoder.decode(message.payload),
      });
  })().catch((error) => got.push({ seq: -1, topic: "error", payload: String(error) }));
  return got;
}

test("catch-up under load from earliest, a seq in the ring, a seq only on disk and a time: no gap or duplicate at the handoffs", async () => {
  const url = server().tcpUrl;
  const publisherClient = await connect(url, { clientName: "load" });
  const publisher = new Publisher(
    publisherClient,
    new Prng(Number(process.env.FC_SEED ?? 0x41524941)),
  );

  // History: the first part ends up only on disk, the last part is still in the ring.
  for (let i = 0; i < 1500; i += 100) await publisher.batch(100);
  const diskMark = await publisher.timeMark();
  for (let i = 1500; i < HISTORY_MESSAGES - 200; i += 200) await publisher.batch(200);
  const ringMark = await publisher.timeMark();
  await publisher.batch(200);
  const statsBefore = await server().stats();
  expect(statsBefore.tip.firstSeq).toBeGreaterThan(diskMark.firstSeqAfter);
  expect(statsBefore.tip.firstSeq).toBeLessThan(ringMark.firstSeqAfter);

  // Load: keep publishing while the subscribers start and catch up.
  let loading = true;
  const load = (async () => {
    while (loading) {
      await publisher.batch(25);
      await Bun.sleep(1);
    }
  })();
  await Bun.sleep(50);

  const ringSeq = publisher.lastSeq - 300;
  const diskSeq = 700;
  const starts: { name: string; filter: string[]; from: StartFrom; fromSeq: number }[] = [
    // The ring moves on under the load: the starts inside it go first.
    { name: "ring seq", filter: ["**"], from: ringSeq, fromSeq: ringSeq },
    {
      name: "ring time",
      filter: ["load/**"],
      from: ringMark.time,
      fromSeq: ringMark.firstSeqAfter,
    },
    { name: "ring seq, subset", filter: ["other/**", "load/b"], from: ringSeq, fromSeq: ringSeq },
    { name: "earliest **", filter: ["**"], from: "earliest", fromSeq: 1 },
    { name: "earliest load/a/**", filter: ["load/a/**"], from: "earliest", fromSeq: 1 },
    { name: "disk seq", filter: ["load/a/x", "other/**"], from: diskSeq, fromSeq: diskSeq },
    { name: "disk time", filter: ["**"], from: diskMark.time, fromSeq: diskMark.firstSeqAfter },
  ];
  const tip = (await server().stats()).tip;
  expect(ringSeq).toBeGreaterThan(tip.firstSeq);
  expect(ringMark.firstSeqAfter).toBeGreaterThan(tip.firstSeq);
  expect(diskSeq).toBeLessThan(tip.firstSeq);

  const subscriberClients: AriaClient[] = [];
  const received = new Map<string, Published[]>();
  for (const start of starts) {
    const client = await connect(url, { clientName: start.name });
    subscriberClients.push(client);
    received.set(start.name, collect(client.subscribe(start.filter, { from: start.from })));
  }
  const cliStartSeq = publisher.lastSeq;
  const cliEarliest = runAria(
    ["sub", "--url", url, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  const cliDiskLimit = 3000;
  const cliDisk = runAria(
    ["sub", "--url", url, "load/**", "--from", String(diskSeq), "--limit", String(cliDiskLimit)],
    { timeoutMs: 30_000 },
  );

  await Bun.sleep(LOAD_MS);
  loading = false;
  await load;
  const lastSeq = publisher.lastSeq;
  expect(lastSeq).toBeGreaterThan(HISTORY_MESSAGES + 500);

  for (const start of starts) {
    const got = received.get(start.name)!;
    const expected = publisher.expected(start.filter, start.fromSeq);
    const lastExpected = expected[expected.length - 1].seq;
    await waitFor(
      () => got.length > 0 && got[got.length - 1].seq >= lastExpected,
      `${start.name} to reach seq ${lastExpected}`,
      20_000,
    ).catch(() => undefined);
    if (got.length !== expected.length || got[0]?.seq !== expected[0].seq) {
      throw new Error(
        `${start.name}: got ${got.length} messages (first ${got[0]?.seq}), expected ${expected.length} (first ${expected[0].seq})`,
      );
    }
    expect(got).toEqual(expected);
  }

  const earliestRun = await cliEarliest;
  expect(earliestRun.exitCode).toBe(0);
  const earliestLines = parseSubLines(earliestRun.stdout);
  // --until-caught-up stops at the live end it reached, at least where the stream was when it started.
  expect(earliestLines.length).toBeGreaterThanOrEqual(cliStartSeq);
  expect(earliestLines.map(({ seq, topic, payload }) => ({ seq, topic, payload }))).toEqual(
    publisher.expected(["**"], 1).slice(0, earliestLines.length),
  );

  const diskRun = await cliDisk;
  expect(diskRun.exitCode).toBe(0);
  expect(
    parseSubLines(diskRun.stdout).map(({ seq, topic, payload }) => ({ seq, topic, payload })),
  ).toEqual(publisher.expected(["load/**"], diskSeq).slice(0, cliDiskLimit));

  const recoveries = (await server().stats()).broker.recoveries;
  expect(recoveries.disk).toBeGreaterThanOrEqual(5);
  expect(recoveries.tip).toBeGreaterThanOrEqual(3);

  for (const client of [publisherClient, ...subscriberClients]) await client.close();
}, 60_000);
