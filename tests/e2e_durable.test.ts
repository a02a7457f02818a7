/**
 * End to end: durable consumers with the binary. `aria sub --durable NAME` acknowledges what it
 * wrote out; a second run (the client restarted alone) resumes after it; the server is killed
 * with SIGKILL and restarted on the same data directory, and the consumer resumes with no gap and
 * no duplicate (everything it printed was acknowledged); a second subscriber of the name is
 * refused (CONSUMER_BUSY); `aria consumers ls|rm` list and remove it (rm refused while open); a
 * damaged consumers file stops the server at start-up with exit 5, naming file and offset, and
 * `aria repair` salvages it.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../src/server/mod.ts";
import {
  ARIA_BIN,
  cleanupAll,
  ensureBinary,
  parseSubLines,
  runAria,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const seqsOf = (stdout: string) => parseSubLines(stdout).map((line) => line.seq);
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("durable consumer: resume after its acknowledged position across client restarts and kill -9; busy; consumers ls/rm; damage exits 5", async () => {
  let server = await startAria();
  const dataDir = server.dataDir;
  const publish = async (url: string, from: number, count: number) => {
    const client = await connect(url);
    await client.publishBatch(
      Array.from({ length: count }, (_, i) => ({
        topic: `d/${(from + i) % 3}`,
        payload: `m${from + i}`,
      })),
    );
    await client.close();
  };
  await publish(server.tcpUrl, 1, 10);
  const sub = (url: string, ...flags: string[]) =>
    runAria(["sub", "--url", url, "d/**", "--durable", "c1", ...flags]);

  const first = await sub(server.tcpUrl, "--from", "earliest", "--limit", "4");
  expect(first.exitCode).toBe(0);
  expect(seqsOf(first.stdout)).toEqual([1, 2, 3, 4]);
  // The client alone restarts: it resumes after what it printed.
  const second = await sub(server.tcpUrl, "--limit", "2");
  expect(seqsOf(second.stdout)).toEqual([5, 6]);

  const listed = await runAria(["consumers", "ls", "--data-dir", dataDir, "--json"]);
  expect(listed.exitCode).toBe(0);
  expect(JSON.parse(listed.stdout).consumers).toMatchObject([
    {
      name: "c1",
      filter: ["d/**"],
      shared: false,
      ackedSeq: 6,
      nextSeq: 7,
      pendingSeqs: 4,
      members: 0,
    },
  ]);
  // Past one write window, then SIGKILL: the position written survives.
  await Bun.sleep(300);
  await server.kill9();
  server = await startAria({ dataDir });
  await publish(server.tcpUrl, 11, 2);
  const third = await sub(server.tcpUrl, "--limit", "6");
  expect(seqsOf(third.stdout)).toEqual(range(7, 12));

  // One subscription at a time: a second is refused while the first is open; so is rm.
  const binary = await ensureBinary();
  const holder = Bun.spawn([binary, "sub", "--url", server.tcpUrl, "d/**", "--durable", "c1"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    await waitFor(async () => {
      const rows = JSON.parse(
        (await runAria(["consumers", "ls", "--data-dir", dataDir, "--json"])).stdout,
      );
      return rows.consumers[0]?.members === 1;
    }, "the durable consumer");
    const busy = await sub(server.tcpUrl, "--limit", "1");
    expect(busy.exitCode).toBe(1);
    expect(busy.stderr).toContain("ARIA_ERR_CONSUMER_BUSY");
    const inUse = await runAria(["consumers", "rm", "c1", "--data-dir", dataDir]);
    expect(inUse.exitCode).toBe(1);
    expect(inUse.stderr).toContain("has a subscription open");
  } finally {
    holder.kill("SIGKILL");
    await holder.exited;
  }
  await waitFor(
    async () => (await runAria(["consumers", "rm", "c1", "--data-dir", dataDir])).exitCode === 0,
    "the durable consumer",
  );
  const empty = await runAria(["consumers", "ls", "--url", server.adminUrl]);
  expect(empty.stdout).toBe("no durable consumers\n");
  const unknown = await runAria(["consumers", "rm", "c1", "--url", server.adminUrl]);
  expect(unknown.exitCode).toBe(1);
  expect((await runAria(["consumers", "frob"])).exitCode).toBe(2);

  // A damaged record followed by a good one: start-up refuses with exit 5, file and offset.
  const again = await sub(server.tcpUrl, "--from", "earliest", "--limit", "1");
  expect(seqsOf(again.stdout)).toEqual([1]);
  expect(await server.stop()).toBe(0);
  const path = join(dataDir, "consumers.log");
  const bytes = readFileSync(path);
  const damaged = Uint8Array.from([...bytes, ...bytes.subarray(8)]);
  damaged[20] ^= 0xff;
  writeFileSync(path, damaged);
  const refused = Bun.spawn(
    [ARIA_BIN, "serve", "--port", "0", "--admin-port", "0", "--data-dir", dataDir],
    {
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  expect(await refused.exited).toBe(5);
  expect(await new Response(refused.stderr).text()).toContain(
    `${path}": checksum mismatch at offset 8`,
  );
  // aria repair moves the damaged bytes aside and keeps the records that check: c1 resumes.
  const repaired = await runAria(["repair", "--data-dir", dataDir]);
  expect(repaired.exitCode).toBe(0);
  expect(repaired.stdout).toContain("damage: ");
  expect(repaired.stdout).toContain("durable consumers: 1 kept");
  // The damaged record named c1, which an older record keeps: named.
  expect(repaired.stdout).toContain("durable consumers at an older position: c1\n");
  server = await startAria({ dataDir });
  const resumed = await sub(server.tcpUrl, "--limit", "1");
  expect(seqsOf(resumed.stdout)).toEqual([2]);
}, 60_000);
