/**
 * End to end: a full disk. `aria serve` on a 64 MiB tmpfs (mounted here; skipped, saying why,
 * where mount is not permitted): a file fills the rest of it, publishes are refused with a clear
 * error and /healthz answers 503 with the reason; the file is deleted, and without a restart
 * publishes are acknowledged again, the ones waiting meanwhile included. The same with a sort
 * (a seal: a pack and a manifest append) on the full disk: refused, the store goes on by itself
 * once space is freed. A subscriber from seq 1 then sees every acknowledged message once, in
 * order, seqs without a hole.
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

/** Publishes on `client`, recording each acknowledged seq's payload in `acked` (a seq twice fails). */
function publisher(client: Awaited<ReturnType<typeof connect>>, acked: Map<number, string>) {
  const payload = (n: number) => `m${n}-${"x".repeat(1000)}`;
  let n = 0;
  return async () => {
    const text = payload(n++);
    const seq = await client.publish("full/a", new TextEncoder().encode(text));
    expect(acked.has(seq)).toBe(false);
    acked.set(seq, text);
    return seq;
  };
}

/** `aria sub` from the earliest seq: seqs 1..N each once, in order, N = every acknowledged one, each with its payload. */
async function expectReadBack(tcpUrl: string, acked: Map<number, string>): Promise<void> {
  const run = await runAria(
    ["sub", "--url", tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(run.exitCode).toBe(0);
  const lines = parseSubLines(run.stdout);
  expect(lines.map((line) => line.seq)).toEqual(
    Array.from({ length: lines.length }, (_, i) => i + 1),
  );
  expect(lines.length).toBe(acked.size);
  for (const line of lines)
    expect(new TextDecoder().decode(payloadOfLine(line))).toBe(acked.get(line.seq) as string);
}

async function seal(adminUrl: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${adminUrl}/internal/split/seal`, { method: "POST" });
  return { status: response.status, body: await response.json() };
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
  const publish = publisher(client, acked);
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
  await expectReadBack(server.tcpUrl, acked);
}, 60_000);

test("a full disk under a sort: a seal that finds no room for its pack is refused, the store says so and does not stop; space freed: it sorts and publishes go on without a restart, every acknowledged message read back once, in order", async () => {
  if (!mounted) {
    console.log(`skipped: cannot mount a tmpfs (${mount.stderr.toString().trim()})`);
    return;
  }
  // The first test's server and data go: this one starts on an empty file system.
  await server?.stop();
  server = undefined;
  rmSync(join(mountPoint, "data"), { recursive: true, force: true });
  const dataDir = join(mountPoint, "data-sort");
  mkdirSync(dataDir);
  server = await startAria({ dataDir, fsync: "always" });
  const { tcpUrl, adminUrl } = server;
  const client = await connect(tcpUrl, { clientName: "disk-full-sort", reconnect: false });
  const acked = new Map<number, string>();
  const publish = publisher(client, acked);
  for (let i = 0; i < 200; i++) await publish();
  const sealed = await seal(adminUrl);
  expect(sealed.status).toBe(200);
  for (let i = 0; i < 100; i++) await publish();

  const filler = join(mountPoint, "filler");
  expect(fill(filler)).toBeGreaterThan(0);
  const refusedSeal = await seal(adminUrl);
  expect(refusedSeal.status).toBe(500);
  expect(String(refusedSeal.body.error)).toMatch(/no space left on device.*retries by itself/);
  const unhealthy = await health(adminUrl);
  expect(unhealthy.status).toBe(503);
  expect(unhealthy.body.reason).toContain("no space left on device");
  const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
  expect(metrics).toMatch(/^aria_store_writable 0$/m);
  // Publishes meanwhile: acknowledged while the journal's last page has room, then refused
  // (or waiting for their records to be durable); none is given a seq twice.
  const waiting: Promise<unknown>[] = [];
  for (let i = 0; i < 50; i++) {
    const attempt = publish().catch(() => {});
    waiting.push(attempt);
    await Promise.race([attempt, Bun.sleep(2)]);
  }

  rmSync(filler);
  await waitFor(async () => (await health(adminUrl)).status === 200, "/healthz 200", 15_000);
  await Promise.all(waiting);
  for (let i = 0; i < 50; i++) await publish();
  const resealed = await seal(adminUrl);
  expect(resealed.status).toBe(200);
  await client.close();
  const stderr = server.stderr();
  expect(stderr.match(/publishes are refused/g)?.length).toBe(1);
  expect(stderr.match(/the store writes again/g)?.length).toBe(1);
  await expectReadBack(tcpUrl, acked);
}, 60_000);
