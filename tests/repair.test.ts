/**
 * End to end: damage at rest and `aria repair` (issue 28, part 1). Messages are published to
 * `aria serve --fsync always`, the server is killed with SIGKILL, and one byte in the middle of
 * the newest journal is flipped. `aria serve` then refuses (exit 5) naming the file, the offset
 * and `aria repair --data-dir DIR`; `aria repair --dry-run` changes no byte of the directory;
 * `aria repair` moves the damaged bytes into DIR/damaged/ and reports the lost seq range; the
 * server starts, a new publish gets a seq past every earlier one, and a subscriber from the
 * first seq reads every acknowledged message except the reported range, byte for byte.
 */
import { afterAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../src/server/mod.ts";
import {
  cleanupAll,
  makeTempDir,
  parseSubLines,
  payloadOfLine,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

/** ~3 MB of journal, several group commits (its synced point is recorded after each fsync). */
const MESSAGES = 3000;

/** Every file under `dir` and a hash of its bytes. */
function image(dir: string, under = ""): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of readdirSync(join(dir, under))) {
    const path = join(under, name);
    if (statSync(join(dir, path)).isDirectory()) {
      for (const [p, h] of image(dir, path)) files.set(p, h);
    } else {
      files.set(
        path,
        createHash("sha256")
          .update(readFileSync(join(dir, path)))
          .digest("hex"),
      );
    }
  }
  return files;
}

test("a byte flipped mid-journal after kill -9: serve exits 5, repair salvages all but the lost range, seqs never repeat", async () => {
  const dataDir = makeTempDir("aria-e2e-repair-");
  let server = await startAria({ dataDir, fsync: "always" });
  const client = await connect(server.tcpUrl, { clientName: "repair", reconnect: false });
  const acked = new Map<number, Uint8Array>();
  for (let i = 0; i < MESSAGES; i += 100) {
    const batch = Array.from({ length: 100 }, (_, j) =>
      new TextEncoder().encode(`message ${i + j} ${"x".repeat(1000 + ((i + j) % 50))}`),
    );
    const seqs = await Promise.all(batch.map((payload) => client.publish(`t/${i % 7}`, payload)));
    for (const [j, seq] of seqs.entries()) acked.set(seq, batch[j]);
  }
  await client.close();
  await server.kill9();

  // One byte flipped in the middle of the newest journal.
  const journals = readdirSync(join(dataDir, "journal"))
    .filter((name) => name.endsWith(".wal"))
    .sort();
  const newest = `journal/${journals[journals.length - 1]}`;
  const bytes = readFileSync(join(dataDir, newest));
  const flipAt = Math.floor(bytes.length / 2);
  bytes[flipAt] ^= 0x10;
  writeFileSync(join(dataDir, newest), bytes);

  const refused = await runAria([
    "serve",
    "--port",
    "0",
    "--admin-port",
    "0",
    "--data-dir",
    dataDir,
  ]);
  expect(refused.exitCode).toBe(5);
  expect(refused.stderr).toContain(`"${newest}" at offset`);
  expect(refused.stderr).toContain(`aria repair --data-dir ${dataDir}`);

  const before = image(dataDir);
  const dry = await runAria(["repair", "--data-dir", dataDir, "--dry-run", "--json"]);
  expect(dry.exitCode).toBe(0);
  expect(image(dataDir)).toEqual(before);
  const planned = JSON.parse(dry.stdout);
  expect(planned.dryRun).toBe(true);
  expect(planned.lostSeqs.length).toBe(1);

  const repaired = await runAria(["repair", "--data-dir", dataDir, "--json"]);
  expect(repaired.exitCode).toBe(0);
  const report = JSON.parse(repaired.stdout);
  expect(report.lostSeqs).toEqual(planned.lostSeqs);
  const [lost] = report.lostSeqs as { first: number; last: number; file: string }[];
  expect(lost.file).toBe(newest);
  expect(lost.last - lost.first).toBeLessThan(5);
  expect(report.moved.length).toBe(1);
  const damaged = readdirSync(join(dataDir, "damaged"));
  expect(damaged.length).toBe(1);
  const moved = readFileSync(join(dataDir, "damaged", damaged[0]));
  expect(moved.length).toBe(report.moved[0].bytes);
  expect(
    moved.equals(bytes.subarray(report.moved[0].offset, report.moved[0].offset + moved.length)),
  ).toBe(true);
  // A second repair finds nothing to do.
  const again = await runAria(["repair", "--data-dir", dataDir, "--json"]);
  expect(JSON.parse(again.stdout).lostSeqs).toEqual([]);

  server = await startAria({ dataDir, fsync: "always" });
  const next = await connect(server.tcpUrl, { clientName: "after", reconnect: false });
  const seq = await next.publish("t/after", new TextEncoder().encode("after"));
  await next.close();
  expect(seq).toBeGreaterThan(Math.max(...acked.keys()));
  const sub = await runAria(
    ["sub", "--url", server.tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(sub.exitCode).toBe(0);
  const read = new Map(parseSubLines(sub.stdout).map((line) => [line.seq, payloadOfLine(line)]));
  for (const [s, payload] of acked) {
    if (s >= lost.first && s <= lost.last) expect(read.has(s)).toBe(false);
    else expect(read.get(s)).toEqual(payload);
  }
  expect(read.get(seq)).toEqual(new TextEncoder().encode("after"));
  await server.stop();
}, 60_000);

test("a byte flipped in a pack: a subscriber reading it gets an error naming the pack, the server serves on; repair salvages the rest", async () => {
  const dataDir = makeTempDir("aria-e2e-repair-pack-");
  let server = await startAria({ dataDir, fsync: "always" });
  const client = await connect(server.tcpUrl, { clientName: "repair-pack", reconnect: false });
  const acked = new Map<number, Uint8Array>();
  for (let i = 0; i < MESSAGES; i += 100) {
    const batch = Array.from({ length: 100 }, (_, j) =>
      new TextEncoder().encode(`message ${i + j} ${"x".repeat(1000 + ((i + j) % 50))}`),
    );
    // Two partitions: the tip's refill at start reads the newest (b), not the damaged one (a).
    const topic = `${i < MESSAGES / 2 ? "a" : "b"}/${i % 7}`;
    const seqs = await Promise.all(batch.map((payload) => client.publish(topic, payload)));
    for (const [j, seq] of seqs.entries()) acked.set(seq, batch[j]);
  }
  await client.close();
  await server.stop();

  // One byte flipped in the payload of message 10 (partition a), in its pack.
  const packs = readdirSync(join(dataDir, "segments")).filter((name) => name.endsWith(".pak"));
  const marker = Buffer.from("message 10 x");
  const pack = `segments/${packs.find((name) => readFileSync(join(dataDir, "segments", name)).includes(marker))}`;
  const bytes = readFileSync(join(dataDir, pack));
  bytes[bytes.indexOf(marker) + 4] ^= 0x10;
  writeFileSync(join(dataDir, pack), bytes);

  // An ordinary open checks sizes, not checksums: the server starts; the read finds the damage.
  server = await startAria({ dataDir, fsync: "always" });
  const failed = await runAria(
    ["sub", "--url", server.tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(failed.exitCode).not.toBe(0);
  expect(failed.stderr).toContain(`"${pack}"`);
  expect(failed.stderr).toContain("checksum mismatch at offset");
  // The server serves on: a publish is acknowledged, a live subscriber works.
  const after = await connect(server.tcpUrl, { clientName: "after", reconnect: false });
  const seq = await after.publish("t/after", new TextEncoder().encode("after"));
  await after.close();
  expect(seq).toBeGreaterThan(Math.max(...acked.keys()));
  await server.stop();

  const repaired = await runAria(["repair", "--data-dir", dataDir, "--json"]);
  expect(repaired.exitCode).toBe(0);
  const report = JSON.parse(repaired.stdout);
  expect(report.moved.map((m: { file: string }) => m.file)).toEqual([pack]);
  const lost = report.lostSeqs as { first: number; last: number; file: string }[];
  expect(lost.length).toBe(1);
  expect(lost[0].file).toBe(pack);
  expect(lost[0].last - lost[0].first).toBeLessThan(10);

  server = await startAria({ dataDir, fsync: "always" });
  const sub = await runAria(
    ["sub", "--url", server.tcpUrl, "**", "--from", "earliest", "--until-caught-up"],
    { timeoutMs: 30_000 },
  );
  expect(sub.exitCode).toBe(0);
  const read = new Map(parseSubLines(sub.stdout).map((line) => [line.seq, payloadOfLine(line)]));
  for (const [s, payload] of acked)
    if (s < lost[0].first || s > lost[0].last) expect(read.get(s)).toEqual(payload);
  expect(read.get(seq)).toEqual(new TextEncoder().encode("after"));
  await server.stop();
}, 60_000);
