/**
 * Crash test of `aria split` on real files: the compiled binary splits a data directory and is
 * killed with SIGKILL at a random moment, many rounds (12 in CI, SPLIT_KILL_ROUNDS to change),
 * alternating plans so every run has work. After each kill the store is opened here: every
 * message is read exactly once, in order, intact (the old layout or the new one is in force,
 * never a mix); a topic read agrees. Finally a split runs to completion and is checked the same.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { Store } from "../src/store/mod.ts";
import { Filter } from "../src/topic/mod.ts";
import { cleanupAll, ensureBinary, makeTempDir } from "./fixtures/e2e_server.ts";
import { fillDataDir, splitPayload, splitTopic } from "./fixtures/split_data.ts";

const ROUNDS = Number(process.env.SPLIT_KILL_ROUNDS ?? 12);
const COUNT = 30_000;
let dir = "";
let binary = "";

beforeAll(async () => {
  binary = await ensureBinary();
  dir = makeTempDir("aria-split-kill-");
  await fillDataDir(dir, COUNT, { segmentBytesMax: 16 * 1024 });
});
afterAll(() => cleanupAll());

async function checkAll(): Promise<{ stores: number; segments: number }> {
  const { store } = await Store.open(new BunDisk(dir), { crc32: nativeCrc32 });
  try {
    let expected = 1;
    for await (const message of store.read(Filter.of("**"), { seq: 1 })) {
      if (
        message.seq !== expected ||
        message.topic !== splitTopic(message.seq) ||
        Buffer.compare(message.payload, splitPayload(message.seq)) !== 0
      ) {
        throw new Error(
          `read seq ${message.seq} (${message.topic}), expected seq ${expected} (${splitTopic(expected)}) intact`,
        );
      }
      expected++;
    }
    expect(expected).toBe(COUNT + 1);
    const topic = "app/orders/paid";
    const seqs: number[] = [];
    for await (const message of store.read(Filter.of(topic), { seq: 1000 })) seqs.push(message.seq);
    const want: number[] = [];
    for (let seq = 1000; seq <= COUNT; seq++) if (splitTopic(seq) === topic) want.push(seq);
    expect(seqs).toEqual(want);
    const stats = store.stats();
    return { stores: stats.stores, segments: stats.segments };
  } finally {
    await store.close({ sort: false });
  }
}

function planArgs(round: number): string[] {
  const plans = [
    ["--algorithm", "heuristic"],
    ["--algorithm", "adaptive"],
    ["--algorithm", "adaptive", "--max-stores", "6"],
    ["--algorithm", "adaptive", "--max-stores", "12"],
  ];
  return plans[round % plans.length];
}

test("SIGKILL at random moments: every message once, in order; a rerun completes", async () => {
  let seed = 12345;
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  const layouts = new Set<string>();
  for (let round = 0; round < ROUNDS; round++) {
    const child = Bun.spawn(
      [binary, "split", "--data-dir", dir, "--workers", "2", ...planArgs(round)],
      { stdout: "pipe", stderr: "pipe" },
    );
    const killAfterMs = Math.floor(random() * 900);
    const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
    await child.exited;
    clearTimeout(timer);
    const layout = await checkAll();
    layouts.add(`${layout.stores}/${layout.segments}`);
  }
  const done = Bun.spawn(
    [binary, "split", "--data-dir", dir, "--workers", "2", "--algorithm", "adaptive"],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [exit, out, err] = await Promise.all([
    done.exited,
    new Response(done.stdout).text(),
    new Response(done.stderr).text(),
  ]);
  expect({ exit, err }).toEqual({ exit: 0, err: "" });
  expect(out).toMatch(/rewrote|nothing to do/);
  const final = await checkAll();
  expect(final.segments).toBe(0);
  expect(final.stores).toBeGreaterThan(0);
  console.log(
    `split_sigkill: ${ROUNDS} rounds, layouts seen (stores/segments): ${[...layouts].join(" ")}`,
  );
}, 90_000);
