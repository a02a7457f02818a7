/**
 * `aria split` while `aria serve` uses the same data directory: the split finds the server
 * through the directory's LOCK, writes the new stores, and the server switches between reads.
 * Subscribers from earliest — one started before the split and replaying while it runs, one
 * after — and a publisher before and after, all see every message once, in order; the lines of
 * `aria sub FILTER --from earliest --until-caught-up` are the same before and after the split.
 * Also: a second server on the same directory is refused.
 */
import { afterAll, expect, test } from "bun:test";
import {
  cleanupAll,
  makeTempDir,
  parseSubLines,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";
import { fillDataDir } from "./fixtures/split_data.ts";

afterAll(() => cleanupAll());

function checkStream(stdout: string, last: number): void {
  const seqs = parseSubLines(stdout).map((line) => line.seq);
  expect(seqs.length).toBe(last);
  for (let i = 0; i < seqs.length; i++)
    if (seqs[i] !== i + 1) throw new Error(`position ${i}: seq ${seqs[i]}, expected ${i + 1}`);
}

test("split against a running server: every subscriber gets every message once, in order", async () => {
  const dir = makeTempDir("aria-split-live-");
  const prefilled = (await fillDataDir(dir, 40_000, { segmentBytesMax: 32 * 1024 })) - 1;
  const server = await startAria({ dataDir: dir, tipBytes: "256KiB" });
  const url = server.tcpUrl;
  const second = await runAria(["serve", "--port", "0", "--admin-port", "0", "--data-dir", dir]);
  expect(second.exitCode).not.toBe(0);
  expect(second.stderr).toContain("in use by pid");

  const live = Array.from({ length: 200 }, (_, i) => `live-${i}`).join("\n");
  expect((await runAria(["pub", "--url", url, "app/orders/paid"], { stdin: live })).exitCode).toBe(
    0,
  );
  let last = prefilled + 200;
  const before = await runAria([
    "sub",
    "--url",
    url,
    "app/orders/**",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(before.exitCode).toBe(0);

  // A subscriber replaying the whole stream from disk while the split runs and switches.
  const replaying = runAria(
    ["sub", "--url", url, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 60_000 },
  );
  const split = await runAria(["split", "--data-dir", dir, "--workers", "2"], {
    timeoutMs: 60_000,
  });
  expect(split.stderr).toBe("");
  expect(split.exitCode).toBe(0);
  expect(split.stdout).toContain("switched by the running server");
  const replayed = await replaying;
  expect(replayed.exitCode).toBe(0);
  checkStream(replayed.stdout, last);

  const after = await runAria([
    "sub",
    "--url",
    url,
    "app/orders/**",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(after.stdout).toBe(before.stdout);
  expect(parseSubLines(after.stdout).length).toBeGreaterThan(1000);

  expect(
    (await runAria(["pub", "--url", url, "ops/logs"], { stdin: "after-1\nafter-2" })).exitCode,
  ).toBe(0);
  last += 2;
  checkStream(
    (await runAria(["sub", "--url", url, "**", "--from", "earliest", "--until-caught-up"])).stdout,
    last,
  );
  const stats = (await (await fetch(`${server.adminUrl}/api/stats`)).json()) as {
    store: { stores: number };
  };
  expect(stats.store.stores).toBeGreaterThan(0);

  // A restart reads the switched layout back; a second split has nothing left to do.
  expect(await server.stop()).toBe(0);
  const again = await runAria(["split", "--data-dir", dir, "--workers", "1"]);
  expect(again.exitCode).toBe(0);
  const restarted = await startAria({ dataDir: dir, tipBytes: "256KiB" });
  checkStream(
    (
      await runAria([
        "sub",
        "--url",
        restarted.tcpUrl,
        "**",
        "--from",
        "earliest",
        "--until-caught-up",
      ])
    ).stdout,
    last,
  );
  await restarted.stop();
}, 60_000);
