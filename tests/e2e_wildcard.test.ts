/**
 * End to end, the single-level wildcard `*` through the binary and the real store: messages on
 * topics chosen around the patterns (one segment too few or too many, another partition) are
 * published until the tip (1 MiB) has evicted the oldest; then subscriptions with `*` filters
 * from the earliest seq replay exactly the matching messages from disk and from the tip, and go
 * on live; `aria sub 'app/*' + '/orders'` prints exactly those. The reference is the test's own
 * reading of the rules (a regular expression per entry), independent of src/topic.
 */
import { expect, test } from "bun:test";
import type { AriaClient, Message } from "../src/client/mod.ts";
import { connect } from "../src/server/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import { parseSubLines, runAria, serverForFile, waitFor } from "./fixtures/e2e_server.ts";

const TOPICS = [
  "app/eu/orders",
  "app/us/orders",
  "app/orders",
  "app/eu/x/orders",
  "app/eu/orders/x",
  "app/us/orders/y/z",
  "shop/eu/orders",
  "shop/us/items",
  "solo",
  "other",
];

const FILTERS: Record<string, string[]> = {
  one: ["app/*/orders"],
  below: ["app/*/orders/**"],
  leading: ["*/eu/orders", "shop/*/items"],
  overlapping: ["app/*/orders", "app/eu/**"],
  oneSegment: ["*"],
};
const CLI_FILTER = ["app/*/orders"];

/** The test's reading of a filter: `*` one whole segment, a trailing `/**` that and below. */
function matches(filter: readonly string[], topic: string): boolean {
  return filter.some((entry) => {
    if (entry === "**") return true;
    const subtree = entry.endsWith("/**");
    const body = (subtree ? entry.slice(0, -3) : entry)
      .split("/")
      .map((s) => (s === "*" ? "[^/]+" : s))
      .join("/");
    return new RegExp(`^${body}${subtree ? "(/.+)?" : ""}$`).test(topic);
  });
}

interface Got {
  seq: number;
  topic: string;
  payload: string;
}

const server = serverForFile({ tipBytes: "1MiB" });

async function publish(client: AriaClient, count: number, prng: Prng, sent: Map<number, Got>) {
  for (let at = 0; at < count; ) {
    const batch = Array.from({ length: Math.min(50, count - at) }, (_, i) => ({
      topic: TOPICS[prng.nextInt(TOPICS.length)],
      payload: `${at + i}-${"w".repeat(200 + prng.nextInt(800))}`,
    }));
    const seqs = await Promise.all(batch.map((m) => client.publish(m.topic, m.payload)));
    for (const [i, seq] of seqs.entries()) sent.set(seq, { seq, ...batch[i] });
    at += batch.length;
  }
}

test("* filters replay exactly their messages from disk and the tip, then live; aria sub too", async () => {
  const prng = new Prng(Number(process.env.FC_SEED ?? 0x41524941));
  const url = server().tcpUrl;
  const publisher = await connect(url, { clientName: "publisher" });
  const sent = new Map<number, Got>();
  // ~1.8 MB: more than the 1 MiB tip, so the first messages are on disk only.
  await publish(publisher, 3000, prng, sent);
  const before = await server().stats();
  expect(before.tip.firstSeq).toBeGreaterThan(500);

  const readers: AriaClient[] = [];
  const collected = new Map<string, Got[]>();
  const done: Promise<void>[] = [];
  for (const [name, filter] of Object.entries(FILTERS)) {
    const client = await connect(url, { clientName: name });
    readers.push(client);
    const subscription = client.subscribe(filter, { from: "earliest" });
    const got: Got[] = [];
    collected.set(name, got);
    const decoder = new TextDecoder();
    done.push(
      (async () => {
        for await (const m of subscription as AsyncIterable<Message>)
          got.push({ seq: m.seq, topic: m.topic, payload: decoder.decode(m.payload) });
      })(),
    );
    await subscription.caughtUpAt;
  }
  // Live, after every subscription caught up.
  await publish(publisher, 600, prng, sent);
  const all = [...sent.values()].sort((a, b) => a.seq - b.seq);
  expect(all.length).toBe(3600);
  expect(all[all.length - 1].seq).toBe(3600);

  for (const [name, filter] of Object.entries(FILTERS)) {
    const expected = all.filter((m) => matches(filter, m.topic));
    expect(expected.length).toBeGreaterThan(0);
    expect(expected[0].seq).toBeLessThan(before.tip.firstSeq); // some from disk
    const got = collected.get(name)!;
    const last = expected[expected.length - 1].seq;
    await waitFor(
      () => got.length > 0 && got[got.length - 1].seq >= last,
      `subscriber ${name} to reach seq ${last}`,
      15_000,
    ).catch(() => undefined);
    if (got.length !== expected.length)
      throw new Error(`${name} ${JSON.stringify(filter)}: ${got.length}, not ${expected.length}`);
    expect(got).toEqual(expected);
  }
  expect((await server().stats()).broker.recoveries.disk).toBeGreaterThan(0);

  const cliExpected = all.filter((m) => matches(CLI_FILTER, m.topic));
  const cli = await runAria(
    ["sub", "--url", url, ...CLI_FILTER, "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(cli.exitCode).toBe(0);
  expect(
    parseSubLines(cli.stdout).map(({ seq, topic, payload }) => ({ seq, topic, payload })),
  ).toEqual(cliExpected);

  // A partial-segment * is refused with the reason, before any connection.
  const bad = await runAria(["sub", "--url", url, "app/eu*"]);
  expect(bad.exitCode).toBe(2);
  expect(bad.stderr).toContain(`'*' stands for one whole segment`);

  await publisher.close();
  for (const client of readers) await client.close();
  await Promise.all(done);
}, 60_000);
