/**
 * `aria split --seal` and what `aria split` says about open segments, on the compiled binary.
 * The README's tour publishes a few messages to a server on a fresh data directory: they sit in
 * the journal (a partition's open segment closes at 64 MiB, after 10 minutes, or at a clean
 * stop), so a split found nothing closed and said only "no closed segments yet". Now it says
 * what is open, when it closes and how to close it now, and `--seal` closes the open segments
 * first — through the running server's admin app, or offline by opening the store itself.
 *
 * The last split is read from the data directory (the manifest's SPLIT record): a server started
 * after an offline split reports it in /metrics and /api/stats, as does a restarted one.
 */
import { afterAll, expect, test } from "bun:test";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  parseSubLines,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";

afterAll(() => cleanupAll());

/** The tour's publishes: 4 messages in 3 partitions. */
async function publishTour(url: string): Promise<void> {
  expect((await runAria(["pub", "--url", url, "app/orders/created", '{"id": 1}'])).exitCode).toBe(
    0,
  );
  expect(
    (await runAria(["pub", "--url", url, "app/codestore/commits"], { stdin: "a\nb\n" })).exitCode,
  ).toBe(0);
  expect((await runAria(["pub", "--url", url, "ops/x"], { stdin: "hi" })).exitCode).toBe(0);
}

/** The server's aria_split_last_* lines, and /api/stats's split.last. */
async function lastSplit(
  server: AriaServer,
): Promise<{ lines: string[]; last: Record<string, unknown> | null }> {
  const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
  const stats = (await (await fetch(`${server.adminUrl}/api/stats`)).json()) as {
    split: { last: Record<string, unknown> | null };
  };
  return {
    lines: metrics.split("\n").filter((line) => line.startsWith("aria_split_last")),
    last: stats.split.last,
  };
}

/** What the tests expect of a split that wrote 3 stores with the adaptive planner, `startedUs` to now. */
function checkLastSplit(
  seen: { lines: string[]; last: Record<string, unknown> | null },
  startedUs: number,
): void {
  const names = seen.lines.map((line) => line.split(" ")[0]);
  expect(names).toEqual([
    "aria_split_last_time_seconds",
    "aria_split_last_duration_seconds",
    "aria_split_last_written_stores",
    "aria_split_last_written_bytes",
    "aria_split_last_stores",
    "aria_split_last_wasted_bytes",
    "aria_split_last_worst_ratio",
  ]);
  expect(seen.lines).toContain("aria_split_last_written_stores 3");
  expect(seen.lines).toContain("aria_split_last_stores 3");
  const last = seen.last as {
    finishedUs: number;
    algorithm: string;
    storesWritten: number;
    storeBytes: number;
    plan: { stores: number };
  };
  expect(last).toMatchObject({ algorithm: "adaptive", storesWritten: 3, plan: { stores: 3 } });
  expect(last.storeBytes).toBeGreaterThan(0);
  expect(last.finishedUs).toBeGreaterThanOrEqual(startedUs);
  expect(last.finishedUs).toBeLessThanOrEqual(Date.now() * 1000);
}

async function everything(url: string): Promise<string[]> {
  const run = await runAria(["sub", "--url", url, "**", "--from", "earliest", "--until-caught-up"]);
  expect(run.exitCode).toBe(0);
  return parseSubLines(run.stdout).map((line) => `${line.seq} ${line.topic} ${line.payload}`);
}

test("while aria serve runs: the split says what is open; --seal closes it through the server and splits", async () => {
  const server = await startAria({ dataDir: makeTempDir("aria-seal-live-") });
  await publishTour(server.tcpUrl);
  const before = await everything(server.tcpUrl);
  expect(before.length).toBe(4);

  const plain = await runAria(["split", "--data-dir", server.dataDir]);
  expect([plain.exitCode, plain.stderr]).toEqual([0, ""]);
  expect(plain.stdout).toContain("nothing to split yet: no closed segments\n4 messages (");
  expect(plain.stdout).toContain("in 3 partition(s) are in open segments, in the journal\n");
  expect(plain.stdout).toMatch(
    /when its oldest message is 10 min old \(the oldest: in about \d+ min \d+ s\), or when the server stops cleanly/,
  );
  expect(plain.stdout).toContain(`close them now: aria split --data-dir ${server.dataDir} --seal`);
  const stats = await runAria(["split", "stats", "--data-dir", server.dataDir]);
  expect([stats.exitCode, stats.stdout]).toEqual([0, "topic,bytes,messages\n"]);
  expect(stats.stderr).toContain("aria split stats: not counted: 4 messages");

  expect(await lastSplit(server)).toEqual({ lines: [], last: null });
  const startedUs = Date.now() * 1000;
  const sealed = await runAria(["split", "--data-dir", server.dataDir, "--seal", "--workers", "1"]);
  expect([sealed.exitCode, sealed.stderr]).toEqual([0, ""]);
  expect(sealed.stdout).toMatch(
    /^sealed: 4 messages \(\d+ B\) closed into 3 segment\(s\)\nrewrote 3 partition\(s\) into 3 store\(s\), replacing 3 file\(s\); switched by the running server\n/,
  );
  expect(sealed.stdout).not.toContain("not split:");
  expect(
    ((await server.stats()) as unknown as { store: { stores: number; pendingRecords: number } })
      .store,
  ).toMatchObject({ stores: 3, pendingRecords: 0 });
  expect(await everything(server.tcpUrl)).toEqual(before);

  // Published after the seal: open again, and the report says it was left out.
  expect(
    (await runAria(["pub", "--url", server.tcpUrl, "app/orders/created", "late"])).exitCode,
  ).toBe(0);
  const again = await runAria(["split", "--data-dir", server.dataDir, "--workers", "1"]);
  expect(again.stdout).toContain(
    "nothing to do: every partition already has its planned stores\nnot split: 1 message (",
  );
  checkLastSplit(await lastSplit(server), startedUs);
  const reported = await lastSplit(server);
  expect(await server.stop()).toBe(0);
  const restarted = await startAria({ dataDir: server.dataDir });
  expect(await lastSplit(restarted)).toEqual(reported);
  expect(await restarted.stop()).toBe(0);
});

test("offline (after kill -9, the journal unsorted): --seal opens the store, seals, splits; --dry-run seals and plans", async () => {
  const server = await startAria({ dataDir: makeTempDir("aria-seal-offline-") });
  await publishTour(server.tcpUrl);
  const before = await everything(server.tcpUrl);
  await server.kill9();

  const plain = await runAria(["split", "--data-dir", server.dataDir]);
  expect([plain.exitCode, plain.stderr]).toEqual([0, ""]);
  expect(plain.stdout).toContain("nothing to split yet: no closed segments\n4 messages (");
  expect(plain.stdout).toContain(
    "when its oldest message is 10 min old while 'aria serve' runs on the directory, or when it stops cleanly",
  );

  const dry = await runAria([
    "split",
    "--data-dir",
    server.dataDir,
    "--seal",
    "--dry-run",
    "--json",
  ]);
  expect([dry.exitCode, dry.stderr]).toEqual([0, ""]);
  const report = JSON.parse(dry.stdout) as {
    sealed: { records: number; segmentsClosed: number };
    partitionsRewritten: number;
    switched: boolean;
    via: string;
  };
  expect(report).toMatchObject({
    sealed: { records: 4, segmentsClosed: 3 },
    partitionsRewritten: 3,
    switched: false,
    via: "local",
  });

  // Sealed by the dry run: a plain split now finds the closed segments.
  const startedUs = Date.now() * 1000;
  const split = await runAria(["split", "--data-dir", server.dataDir, "--workers", "1"]);
  expect([split.exitCode, split.stderr]).toEqual([0, ""]);
  expect(split.stdout).toStartWith(
    "rewrote 3 partition(s) into 3 store(s), replacing 3 file(s); switched by the split itself\n",
  );

  // Split offline: the server started after it reports it, from the data directory.
  const restarted = await startAria({ dataDir: server.dataDir });
  expect(await everything(restarted.tcpUrl)).toEqual(before);
  checkLastSplit(await lastSplit(restarted), startedUs);
  expect(await restarted.stop()).toBe(0);
});
