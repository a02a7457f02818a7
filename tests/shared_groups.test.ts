/**
 * Shared groups end to end: the binary, and members that are processes of their own
 * (tests/fixtures/shared_member.ts, the TypeScript client with `{ durable, shared: true }`).
 * Three members share a filter: each message reaches exactly one, each topic's messages one
 * member in seq order. A member killed with kill -9 holding unacknowledged messages: they reach
 * the others. After a server restart the group goes on at its position.
 */
import { afterAll, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { join } from "node:path";
import { connect } from "../mod.ts";
import {
  ARIA_BIN,
  cleanupAll,
  makeTempDir,
  parseSubLines,
  runAria,
  StreamText,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const MEMBER = join(import.meta.dir, "fixtures", "shared_member.ts");

/** A member process and the messages it printed. */
interface Member {
  process: Subprocess<"ignore", "pipe", "pipe">;
  out: StreamText;
  err: StreamText;
  got(): { seq: number; topic: string }[];
}

const members: Member[] = [];
afterAll(() => {
  for (const member of members) if (member.process.exitCode === null) member.process.kill(9);
});

function startMember(url: string, mode: "auto" | "never"): Member {
  const child = Bun.spawn([process.execPath, MEMBER, url, "grp", "s/**", mode], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = new StreamText(child.stdout);
  const member: Member = {
    process: child,
    out,
    err: new StreamText(child.stderr),
    got: () =>
      out.text
        .split("\n")
        .filter((line) => /^\d+ /.test(line))
        .map((line) => {
          const [seq, topic] = line.split(" ");
          return { seq: Number(seq), topic: topic! };
        }),
  };
  members.push(member);
  return member;
}

async function consumerNamed(
  adminUrl: string,
  name: string,
): Promise<{ members: number; nextSeq: number }> {
  const answer = (await (await fetch(`${adminUrl}/api/consumers`)).json()) as {
    consumers: { name: string; members: number; nextSeq: number }[];
  };
  return answer.consumers.find((c) => c.name === name) ?? { members: 0, nextSeq: 0 };
}

const consumer = (adminUrl: string) => consumerNamed(adminUrl, "grp");

/** Per member, each topic's seqs ascend within what it got after index `from`. */
function expectTopicOrder(member: Member, from = 0): void {
  const last = new Map<string, number>();
  for (const { seq, topic } of member.got().slice(from)) {
    expect(seq).toBeGreaterThan(last.get(topic) ?? 0);
    last.set(topic, seq);
  }
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("three member processes share a group; a killed member's unacked messages move; restart resumes", async () => {
  const dataDir = makeTempDir("aria-e2e-shared-");
  let server = await startAria({ dataDir, fsync: "always" });
  const publisher = await connect(server.tcpUrl);
  const publish = async (from: number, count: number) => {
    await publisher.publishBatch(
      Array.from({ length: count }, (_, i) => ({
        topic: `s/t${(from + i) % 30}`,
        payload: `${from + i}`,
      })),
    );
  };
  try {
    const [held, b, c] = [
      startMember(server.tcpUrl, "never"),
      startMember(server.tcpUrl, "auto"),
      startMember(server.tcpUrl, "auto"),
    ];
    await waitFor(async () => (await consumer(server.adminUrl)).members === 3, "three members");
    await publish(0, 300);
    const all = () => [held, b, c].flatMap((m) => m.got().map((x) => x.seq));
    await waitFor(() => all().length >= 300, "300 messages at the members");
    expect(all().sort((x, y) => x - y)).toEqual(range(1, 300));
    for (const member of [held, b, c]) {
      expect(member.got().length).toBeGreaterThan(0);
      expectTopicOrder(member);
    }
    const topicsOf = (m: Member) => new Set(m.got().map((x) => x.topic));
    for (const topic of topicsOf(held)) {
      expect(topicsOf(b).has(topic)).toBe(false);
      expect(topicsOf(c).has(topic)).toBe(false);
    }

    // kill -9 the member that acknowledged nothing: its messages go to b and c.
    const heldSeqs = held.got().map((x) => x.seq);
    const before = { b: b.got().length, c: c.got().length };
    held.process.kill(9);
    await held.process.exited;
    const moved = () => [...b.got().slice(before.b), ...c.got().slice(before.c)];
    await waitFor(() => moved().length >= heldSeqs.length, "the killed member's messages moved");
    expect(
      moved()
        .map((x) => x.seq)
        .sort((x, y) => x - y),
    ).toEqual(heldSeqs);
    expectTopicOrder(b, before.b);
    expectTopicOrder(c, before.c);
    // b and c acknowledge as they go: the group's position passes every message.
    await waitFor(async () => (await consumer(server.adminUrl)).nextSeq === 301, "position 301");

    // Members gone, more published, the server restarted: a new member gets exactly the rest.
    b.process.kill(9);
    c.process.kill(9);
    await Promise.all([b.process.exited, c.process.exited]);
    await waitFor(async () => (await consumer(server.adminUrl)).members === 0, "no member");
    await publish(300, 50);
    await publisher.close();
    expect(await server.stop()).toBe(0);
    server = await startAria({ dataDir, fsync: "always" });
    const d = startMember(server.tcpUrl, "auto");
    await waitFor(() => d.got().length >= 50, "50 messages at the new member");
    await Bun.sleep(100);
    expect(d.got().map((x) => x.seq)).toEqual(range(301, 350));
    expect(d.err.text).toBe("");
    d.process.kill(9);
  } finally {
    await server.stop();
  }
}, 30_000);

test("aria sub --durable NAME --shared: two CLI members split a group; --shared alone is a usage error", async () => {
  const server = await startAria({ fsync: "never" });
  const subs: Subprocess<"ignore", "pipe", "pipe">[] = [];
  try {
    const args = [
      "sub",
      "--url",
      server.tcpUrl,
      "--durable",
      "cli",
      "--shared",
      "--from",
      "earliest",
    ];
    for (let i = 0; i < 2; i++)
      subs.push(
        Bun.spawn([ARIA_BIN, ...args, "s/**"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" }),
      );
    const outs = subs.map((sub) => new StreamText(sub.stdout));
    await waitFor(
      async () => (await consumerNamed(server.adminUrl, "cli")).members === 2,
      "two members",
    );
    const publisher = await connect(server.tcpUrl);
    await publisher.publishBatch(
      Array.from({ length: 100 }, (_, i) => ({ topic: `s/t${i % 10}`, payload: `${i}` })),
    );
    await publisher.close();
    const lines = () =>
      outs.map((out) => parseSubLines(out.text.slice(0, out.text.lastIndexOf("\n") + 1)));
    await waitFor(() => lines().flat().length >= 100, "100 lines");
    expect(
      lines()
        .flat()
        .map((line) => line.seq)
        .sort((a, b) => a - b),
    ).toEqual(range(1, 100));
    const [one, two] = lines().map((got) => new Set(got.map((line) => line.topic)));
    for (const topic of one!) expect(two!.has(topic)).toBe(false);
    await waitFor(
      async () => (await consumerNamed(server.adminUrl, "cli")).nextSeq === 101,
      "all acknowledged",
    );
    const usage = await runAria(["sub", "--url", server.tcpUrl, "--shared", "s/**"]);
    expect(usage.exitCode).toBe(2);
    expect(usage.stderr).toContain("--shared needs --durable NAME");
  } finally {
    for (const sub of subs) sub.kill(9);
    await server.stop();
  }
}, 30_000);
