/**
 * End to end: a full disk. `aria serve` on a 64 MiB tmpfs (mounted here; skipped, saying why,
 * where mount is not permitted): a file fills the rest of it, publishes are refused with a clear
 * error and /healthz answers 503 with the reason; the file is deleted, and without a restart
 * publishes are acknowledged again, the ones waiting meanwhile included. A subscriber from seq 1
 * then sees every acknowledged message once, in order, seqs without a hole.
 */
import { afterAll, expect, test } from "bun:test";
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../src/server/mod.ts";
import {
  type AriaServer,
  cleanupAll,
  makeTempDir,
  parseSubLines,
  payloadOfLine,
  runAria,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

const mountPoint = makeTempDir("aria-full-");
const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mountPoint], {
  stderr: "pipe",
});
const mounted = mount.exitCode === 0;
let server: AriaServer | undefined;

afterAll(async () => {
  await server?.stop();
  if (mounted) Bun.spawnSync(["umount", mountPoint]);
  await cleanupAll();
});

/** Writes zeros into `path` until the file system is full; the bytes written. */
function fill(path: string): number {
  const fd = openSync(path, "w");
  const block = new Uint8Array(1 << 20);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
  return written;
}

async function health(
  adminUrl: string,
): Promise<{ status: number; body: { ok: boolean; reason?: string } }> {
  const response = await fetch(`${adminUrl}/healthz`);
  return { status: response.status, body: await response.json() };
}

test("a full disk: publishes refused, /healthz 503 with the reason; space freed: publishes go on without a restart, and a subscriber from seq 1 sees every acknowledged message once, in order", async () => {
  if (!mounted) {
    console.log(`skipped: cannot mount a tmpfs (${mount.stderr.toString().trim()})`);
    return;
  }
  const dataDir = join(mountPoint, "data");
  mkdirSync(dataDir);
  server = await startAria({ dataDir, fsync: "always" });
  const client = await connect(server.tcpUrl, { clientName: "disk-full", reconnect: false });
  const acked = new Map<number, string>();
  const payload = (n: number) => `m${n}-${"x".repeat(1000)}`;
  let n = 0;
  const publish = async () => {
    const text = payload(n++);
    const seq = await client.publish("full/a", new TextEncoder().encode(text));
    expect(acked.has(seq)).toBe(false);
    acked.set(seq, text);
    return seq;
  };
  for (let i = 0; i < 100; i++) await publish();
  expect((await health(server.adminUrl)).status).toBe(200);

  const filler = join(mountPoint, "filler");
  expect(fill(filler)).toBeGreaterThan(0);
  // Publish until one is refused: the journal's last page may still hold a few; a publish
  // appended before the stall waits (not refused) until its record is durable.
  const waiting: Promise<unknown>[] = [];
  let refused: Error | null = null;
  for (let i = 0; i < 2000 && refused === null; i++) {
    const attempt = publish().catch((error: Error) => {
      refused ??= error;
    });
    waiting.push(attempt);
    await Promise.race([attempt, Bun.sleep(2)]);
  }
  expect(refused).not.toBeNull();
  expect(String(refused)).toContain("no space left on device");
  const unhealthy = await health(server.adminUrl);
  expect(unhealthy.status).toBe(503);
  expect(unhealthy.body.ok).toBe(false);
  expect(unhealthy.body.reason).toContain("no space left on device");
  const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
  expect(metrics).toMatch(/^aria_store_writable 0$/m);
  // No spare journal took space on this small file system (the reserve is above its size).
  expect(metrics).toMatch(/^aria_disk_bytes\{kind="journal_spare"\} 0$/m);
  const ackedWhileFull = acked.size;

  rmSync(filler);
  // The retries back off up to 5 s: publishes are acknowledged again within that, no restart.
  const adminUrl = server.adminUrl;
  await waitFor(async () => (await health(adminUrl)).status === 200, "/healthz 200", 15_000);
  await Promise.all(waiting);
  for (let i = 0; i < 50; i++) await publish();
  expect(acked.size).toBeGreaterThanOrEqual(ackedWhileFull + 50);
  await client.close();
  const stderr = server.stderr();
  expect(stderr.match(/publishes are refused/g)?.length).toBe(1);
  expect(stderr.match(/the store writes again/g)?.length).toBe(1);

  const run = await runAria(
    ["sub", "--url", server.tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(run.exitCode).toBe(0);
  const lines = parseSubLines(run.stdout);
  // Seqs 1..N, each once, in order; every acknowledged one with its payload; nothing else.
  expect(lines.map((line) => line.seq)).toEqual(
    Array.from({ length: lines.length }, (_, i) => i + 1),
  );
  expect(lines.length).toBe(acked.size);
  for (const line of lines)
    expect(new TextDecoder().decode(payloadOfLine(line))).toBe(acked.get(line.seq) as string);
}, 60_000);
