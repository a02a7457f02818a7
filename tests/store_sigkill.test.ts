/**
 * Real-process crash test: a child process publishes through the store on real files with
 * `fsync always` and is killed with SIGKILL at a random moment, many rounds (20 in CI,
 * STORE_KILL_ROUNDS to change). After each kill the store is opened here: every message the
 * child acknowledged is present and intact, seqs run 1..next-1 with no hole and no duplicate.
 */
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { BunDisk } from "../src/runtime/bun_disk.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { Store } from "../src/store/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import { Filter } from "../src/topic/mod.ts";
import { tempDir } from "./fixtures/store_helpers.ts";
import { KILL_TEST_LIMITS, messageOf } from "./fixtures/store_kill_messages.ts";

const ROUNDS = Number(process.env.STORE_KILL_ROUNDS ?? 20);
const dir = tempDir("aria-kill-");
afterAll(() => dir.remove());

async function runChild(killAfterMs: number): Promise<{ acked: number; started: number }> {
  const child = Bun.spawn(
    [process.execPath, join(import.meta.dir, "fixtures/store_publisher.ts"), dir.path],
    { stdout: "pipe", stderr: "inherit" },
  );
  let acked = 0;
  let started = 0;
  let text = "";
  const decoder = new TextDecoder();
  const reading = (async () => {
    const stream = child.stdout.getReader();
    for (;;) {
      const { value: chunk, done } = await stream.read();
      if (done) break;
      text += decoder.decode(chunk);
      const lines = text.split("\n");
      text = lines.pop() as string;
      for (const line of lines) {
        const [word, value] = line.split(" ");
        if (word === "ack") acked = Math.max(acked, Number(value));
        else if (word === "ready") {
          started = Number(value);
          setTimeout(() => child.kill("SIGKILL"), killAfterMs);
        }
      }
    }
  })();
  const exit = await child.exited;
  await reading;
  expect(exit === 137 || child.signalCode === "SIGKILL").toBe(true);
  return { acked, started };
}

test(`SIGKILL at random moments (${ROUNDS} rounds): acknowledged messages survive intact, no hole`, async () => {
  const prng = new Prng(Number(process.env.FC_SEED ?? 0x41524941));
  let totalAcked = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const { acked, started } = await runChild(prng.nextRange(20, 400));
    const { store, recovery } = await Store.open(new BunDisk(dir.path), {
      ...KILL_TEST_LIMITS,
      crc32: nativeCrc32,
    });
    expect(recovery.problems).toEqual([]);
    expect(store.nextSeq).toBeGreaterThanOrEqual(started);
    expect(store.nextSeq - 1).toBeGreaterThanOrEqual(acked);
    let expected = 1;
    for await (const message of store.read(Filter.of("**"), { seq: 1 })) {
      expect(message.seq).toBe(expected);
      const want = messageOf(expected);
      if (
        message.topic !== want.topic ||
        message.timeUs !== want.timeUs ||
        Buffer.compare(message.payload, want.payload) !== 0
      ) {
        throw new Error(`round ${round}: message ${expected} differs from what was published`);
      }
      expected++;
    }
    expect(expected).toBe(store.nextSeq);
    totalAcked = Math.max(totalAcked, acked);
    await store.close({ sort: round % 3 === 0 });
  }
  expect(totalAcked).toBeGreaterThan(0);
}, 120_000);
