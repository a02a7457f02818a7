/**
 * `aria pub` losing its connection mid-stream says what to resend: how many messages were sent
 * and acknowledged, the last acknowledged seq, and the input line to resend from.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processLog } from "../runtime/mod.ts";
import { startServer } from "../server/mod.ts";
import { unacknowledgedReport } from "./pub.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

test("the report: sent, acknowledged, the last seq, where to resend from", () => {
  expect(unacknowledgedReport(5, 3, 12, 4)).toBe(
    "5 messages sent, 3 acknowledged (last acknowledged seq 12), 2 sent but not acknowledged (stored or not: a resend may repeat them); resend from input line 4",
  );
  expect(unacknowledgedReport(1, 0, -Infinity, 0)).toContain("none acknowledged");
  expect(unacknowledgedReport(2, 2, 7, null)).toContain("nothing to resend");
});

test("a connection lost mid-stream: the last acknowledged seq and the line to resend from", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aria-pub-"));
  dirs.push(dir);
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    adminPort: 0,
    dataDir: dir,
    tipBytes: 1024 * 1024,
    fsync: "always",
    log: processLog({ level: "error", format: "text" }),
  });
  const pub = Bun.spawn([process.execPath, "main.ts", "pub", "--url", server.tcpUrl, "t/a"], {
    cwd: join(import.meta.dir, "..", ".."),
    stdin: "pipe",
    stderr: "pipe",
    stdout: "ignore",
  });
  pub.stdin.write("one\ntwo\nthree\n");
  pub.stdin.flush();
  const deadline = Date.now() + 10_000;
  while (server.broker.durableSeq < 3 && Date.now() < deadline) await Bun.sleep(10);
  expect(server.broker.durableSeq).toBe(3);
  await Bun.sleep(100); // the acknowledgements reach aria pub
  await server.stop();
  pub.stdin.write("four\nfive\n");
  pub.stdin.flush();
  await Bun.sleep(100);
  pub.stdin.end();
  const timer = setTimeout(() => pub.kill(), 10_000);
  const stderr = await new Response(pub.stderr).text();
  clearTimeout(timer);
  if (!stderr.includes("resend")) console.error(stderr);
  expect(await pub.exited).toBe(1);
  expect(stderr).toContain("ARIA_ERR_CONNECTION_LOST");
  expect(stderr).toContain("3 acknowledged (last acknowledged seq 3)");
  expect(stderr).toContain("resend from input line 4");
}, 20_000);
