/**
 * bench/mqtt_vs_mosquitto.ts, once, with small parameters (the benchmark's smoke test): it runs
 * both brokers, prints its table with every row, and its offline row holds what the issue asks
 * of Aria beside mosquitto's default bound (max_queued_messages 1,000): a persistent session
 * that missed 3,000 messages gets all 3,000 in order from Aria, 1,000 from mosquitto.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ensureBinary, ROOT } from "./fixtures/e2e_server.ts";

test("the MQTT benchmark runs both brokers and its offline row: Aria all, in order; mosquitto its 1,000", async () => {
  const binary = await ensureBinary();
  const child = Bun.spawn(
    [
      process.execPath,
      join(ROOT, "bench", "mqtt_vs_mosquitto.ts"),
      ...["--bin", binary, "--rounds", "1", "--messages", "5000", "--fan-messages", "200"],
      ...["--fan-subscribers", "10", "--offline", "3000", "--fsync", "never"],
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const timer = setTimeout(() => child.kill("SIGKILL"), 50_000);
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  clearTimeout(timer);
  expect({ exitCode, stderr: exitCode === 0 ? "" : stderr }).toEqual({ exitCode: 0, stderr: "" });
  const rows = stdout.split("\n").filter((line) => /^\| (QoS|fan-out|offline)/.test(line));
  expect(rows.length).toBe(4);
  // Each broker's counts are a note under the table.
  const notes = stdout.split("\n").filter((line) => line.startsWith("- offline"));
  expect(notes.find((line) => line.includes(", mosquitto (last round):"))).toContain(
    "1,000 of 3,000 delivered, in order",
  );
  expect(notes.find((line) => line.includes(", Aria, fsync never (last round):"))).toContain(
    "3,000 of 3,000 delivered, in order",
  );
}, 60_000);
