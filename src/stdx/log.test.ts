import { expect, test } from "bun:test";
import { createLog, type LogOptions } from "./log.ts";

const T0 = Date.UTC(2026, 11, 3, 13, 50, 0, 123);

function capture(options: Partial<LogOptions> = {}) {
  const lines: string[] = [];
  let now = T0;
  const log = createLog({
    level: "info",
    format: "text",
    sink: (line) => lines.push(line),
    nowMs: () => now,
    ...options,
  });
  return { log, lines, advance: (ms: number) => (now += ms) };
}

test("text lines: time, level, message, fields; values with spaces or quotes quoted", () => {
  const { log, lines } = capture();
  log.info("connection closed", {
    user: "alice",
    address: "127.0.0.1:40312",
    reason: 'peer said "bye"',
    bytes: 12,
    tls: false,
    skipped: undefined,
  });
  expect(lines).toEqual([
    '2026-12-03T13:50:00.123Z INFO connection closed user=alice address=127.0.0.1:40312 reason="peer said \\"bye\\"" bytes=12 tls=false\n',
  ]);
});

test("json lines parse back; a field cannot overwrite time, level or msg", () => {
  const { log, lines } = capture({ format: "json" });
  log.warn("disk full", { reason: "ENOSPC", msg: "forged", level: "debug" });
  expect(lines).toHaveLength(1);
  expect(lines[0].endsWith("\n")).toBe(true);
  expect(JSON.parse(lines[0])).toEqual({
    time: "2026-12-03T13:50:00.123Z",
    level: "warn",
    msg: "disk full",
    reason: "ENOSPC",
  });
});

test("a newline in a message or a field cannot forge a second line", () => {
  const { log, lines } = capture();
  log.error("bad\nINFO forged", { topic: "a\nb" });
  expect(lines).toHaveLength(1);
  expect(lines[0].split("\n")).toHaveLength(2);
});

test("below the level nothing is written", () => {
  const { log, lines } = capture({ level: "warn" });
  log.debug("d");
  log.info("i");
  log.warn("w");
  log.error("e");
  expect(lines.map((line) => line.split(" ")[1])).toEqual(["WARN", "ERROR"]);
  expect(log.enabled("info")).toBe(false);
  expect(log.enabled("error")).toBe(true);
});

test("a flood of one message writes linesPerSecondMax a second and then counts what it dropped", () => {
  const { log, lines, advance } = capture({ linesPerSecondMax: 3 });
  for (let i = 0; i < 1000; i++) log.info("connection opened", { n: i });
  log.info("other message");
  expect(lines).toHaveLength(4);
  advance(1000);
  log.info("connection opened", { n: 1000 });
  expect(lines.slice(4)).toEqual([
    '2026-12-03T13:50:01.123Z WARN log lines dropped message="connection opened" dropped=997\n',
    "2026-12-03T13:50:01.123Z INFO connection opened n=1000\n",
  ]);
});
