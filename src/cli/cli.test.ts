import { expect, test } from "bun:test";
import type { ClientSubscription } from "../client/mod.ts";
import { Prng } from "../stdx/prng.ts";
import { UsageError } from "./args.ts";
import { byteLinesOf } from "./input.ts";
import { runCli, type CliIo } from "./mod.ts";
import { parseJsonLine } from "./pub.ts";
import { connectionEventLine, parseFrom } from "./sub.ts";

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    out: (t: string) => {
      io.stdout += t;
    },
    err: (t: string) => {
      io.stderr += t;
    },
  };
  return io;
}

test("no command: usage on stderr, exit 2; unknown command too", async () => {
  const none = capture();
  expect(await runCli([], none)).toBe(2);
  expect(none.stderr).toContain("Usage: aria <command>");
  const unknown = capture();
  expect(await runCli(["frobnicate"], unknown)).toBe(2);
  expect(unknown.stderr.split("\n")[0]).toMatchInlineSnapshot(
    `"aria: unknown command 'frobnicate'"`,
  );
});

test("--help prints usage on stdout, exit 0; version", async () => {
  const help = capture();
  expect(await runCli(["--help"], help)).toBe(0);
  expect(help.stdout).toContain("Commands:");
  const version = capture();
  expect(await runCli(["version"], version)).toBe(0);
  expect(version.stdout).toMatch(
    /^aria \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown), (bun|deno) \d+\.\d+\.\d+\S*\)\n$/,
  );
  const flag = capture();
  expect(await runCli(["--version"], flag)).toBe(0);
  expect(flag.stdout).toBe(version.stdout);
});

// ---- Input: byte lines, JSON lines, --from, foreign syntax ------------------------------------

async function collect(chunks: Uint8Array[]): Promise<string[]> {
  const lines: string[] = [];
  async function* source() {
    yield* chunks;
  }
  for await (const line of byteLinesOf(source())) lines.push(Buffer.from(line).toString("hex"));
  return lines;
}

test("byteLinesOf: lines of bytes, never decoded, the same however the stream is cut", async () => {
  const prng = new Prng(0x6c696e65);
  for (let round = 0; round < 200; round++) {
    const input = new Uint8Array(prng.nextInt(400));
    prng.fill(input);
    for (let i = 0; i < input.length; i++)
      if (prng.nextInt(8) === 0) input[i] = prng.nextInt(2) === 0 ? 0x0a : 0x0d;
    // The reference: split on "\n", drop one "\r" before it, keep a last line without "\n" unless empty.
    const text = Buffer.from(input).toString("latin1");
    const parts = text.split("\n");
    const want = parts.slice(0, -1).map((line) => line.replace(/\r$/, ""));
    if (parts[parts.length - 1] !== "") want.push(parts[parts.length - 1]);
    const chunks: Uint8Array[] = [];
    for (let start = 0; start < input.length; ) {
      const end = Math.min(input.length, start + 1 + prng.nextInt(round % 2 === 0 ? 3 : 64));
      chunks.push(input.slice(start, end));
      start = end;
    }
    const got = await collect(chunks);
    expect(got).toEqual(want.map((line) => Buffer.from(line, "latin1").toString("hex")));
  }
  expect(
    await collect([
      new Uint8Array([0x00, 0xff, 0x0a, 0x0a, 0xc3]),
      new Uint8Array([0x28, 0x0d, 0x0a, 0x0d]),
    ]),
  ).toEqual(["00ff", "", "c328", "0d"]);
});

test("pub's JSON lines: payload as UTF-8 text or payloadBase64 as bytes; blank lines skipped; bad lines say which", () => {
  const line = (text: string) => new TextEncoder().encode(text);
  expect(parseJsonLine(line('{"topic":"a","payload":"ü"}'), 1)).toEqual({
    topic: "a",
    payload: "ü",
  });
  expect(
    parseJsonLine(line('{"seq":4,"time":"x","topic":"a/b","payloadBase64":"AAH/"}'), 1),
  ).toEqual({ topic: "a/b", payload: new Uint8Array([0x00, 0x01, 0xff]) });
  expect(parseJsonLine(line('{"topic":"a","payloadBase64":""}'), 1)).toEqual({
    topic: "a",
    payload: new Uint8Array(0),
  });
  expect(parseJsonLine(line("  \t"), 1)).toBeNull();
  const errors = [
    '{"topic":"a"}',
    '{"topic":"a","payload":7}',
    '{"topic":"a","payloadBase64":"AAE"}',
    '{"topic":"a","payloadBase64":"A A="}',
    '{"topic":"a","payload":"","payloadBase64":""}',
    "[1]",
    "nope",
  ].map((text) => {
    try {
      parseJsonLine(line(text), 3);
      return "accepted";
    } catch (error) {
      return (error as Error).message;
    }
  });
  expect(errors).toMatchInlineSnapshot(`
    [
      "line 3: expected {"topic": "...", "payload": "..."} or {"topic": "...", "payloadBase64": "..."}",
      "line 3: expected {"topic": "...", "payload": "..."} or {"topic": "...", "payloadBase64": "..."}",
      "line 3: payloadBase64 is not base64",
      "line 3: payloadBase64 is not base64",
      "line 3: payload and payloadBase64 exclude each other",
      "line 3: expected {"topic": "...", "payload": "..."} or {"topic": "...", "payloadBase64": "..."}",
      "line 3 is not JSON",
    ]
  `);
  expect(() => parseJsonLine(new Uint8Array([0x7b, 0xff, 0x7d]), 9)).toThrow("line 9 is not JSON");
});

test("--from: live, earliest, a seq, a time ago from the clock passed in, an ISO-8601 time; other forms list what it takes", () => {
  const nowUs = Date.parse("2026-06-01T12:00:00Z") * 1000;
  const ago = (text: string) => {
    const from = parseFrom(text, nowUs) as { timeUs: number };
    return new Date(from.timeUs / 1000).toISOString();
  };
  expect(["30s", "15m", "2h", "7d", "1w"].map(ago)).toEqual([
    "2026-06-01T11:59:30.000Z",
    "2026-06-01T11:45:00.000Z",
    "2026-06-01T10:00:00.000Z",
    "2026-05-25T12:00:00.000Z",
    "2026-05-25T12:00:00.000Z",
  ]);
  expect(parseFrom("100000000w", nowUs)).toEqual({ timeUs: 0 });
  expect(parseFrom("live", nowUs)).toBe("live");
  expect(parseFrom("earliest", nowUs)).toBe("earliest");
  expect(parseFrom("42", nowUs)).toBe(42);
  expect(parseFrom("2026-01-31T12:00:00Z", nowUs)).toEqual(new Date("2026-01-31T12:00:00Z"));
  const errors = ["15x", "-5m", "0m", "5 m", "m", "1.5h", "yesterday", "0"].map((text) => {
    try {
      return `accepted ${JSON.stringify(parseFrom(text, nowUs))}`;
    } catch (error) {
      expect(error).toBeInstanceOf(UsageError);
      return (error as Error).message;
    }
  });
  expect(errors).toMatchInlineSnapshot(`
    [
      "--from: "15x" is not live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: "-5m": a time ago has no sign (5m is 5 minutes ago); --from takes live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: "0m" is now: use live, or a time ago of at least 1s",
      "--from: "5 m" is not live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: "m" is not live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: "1.5h" is not live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: "yesterday" is not live, earliest, a seq (1200), a time ago (30s, 15m, 2h, 7d, 1w) or an ISO-8601 time (2026-01-31T12:00:00Z)",
      "--from: seq 0 is out of range",
    ]
  `);
});

test("sub and pub: another system's wildcards are usage errors saying what Aria writes; a dotted topic is a warning", async () => {
  const cases = [
    ["sub", "app/#"],
    ["sub", "app/+/x"],
    ["sub", "orders.>"],
    ["sub", "orders.*"],
    ["sub", ">"],
    ["pub", "orders.>", "x"],
  ];
  const firstLines = [];
  for (const args of cases) {
    const io = capture();
    expect(await runCli([args[0], "--url", "tcp://127.0.0.1:1", ...args.slice(1)], io)).toBe(2);
    firstLines.push(io.stderr.split("\n")[0]);
  }
  expect(firstLines).toMatchInlineSnapshot(`
    [
      "aria sub: filter entry "app/#": topic has wildcard character '#' at byte 4; '#' is MQTT's multi-level wildcard: Aria writes app/** (app and every topic below it)",
      "aria sub: filter entry "app/+/x": topic has wildcard character '+' at byte 4; '+' is MQTT's single-level wildcard: Aria writes app/*/x",
      "aria sub: "orders.>": Aria's separator is '/', not '.' (NATS's): the subtree is orders/**",
      "aria sub: filter entry "orders.*": '*' stands for one whole segment, so segment "orders.*" is invalid; Aria's separator is '/', not '.' (NATS's): Aria writes orders/*",
      "aria sub: ">": '>' is NATS's wildcard for everything: Aria writes **",
      "aria pub: "orders.>": Aria's separator is '/', not '.' (NATS's): the subtree is orders/**",
    ]
  `);
  for (const args of [
    ["sub", "orders.created"],
    ["pub", "orders.created", "x"],
  ]) {
    const io = capture();
    // Nothing listens on port 1: the warning, then the connect fails (exit 1), not a usage error.
    expect(await runCli([args[0], "--url", "tcp://127.0.0.1:1", ...args.slice(1)], io)).toBe(1);
    expect(io.stderr.split("\n")[0]).toBe(
      `aria ${args[0]}: warning: "orders.created": Aria's separator is '/', not '.': this is one segment (orders/created has 2)`,
    );
  }
});

test("sub's stderr lines for a dropped connection, its resumption (from the seq the subscription resumed at) and giving up", () => {
  const subscription = { startSent: { kind: "seq", seq: 201 } } as unknown as ClientSubscription;
  // Each is one line.
  expect(
    [
      connectionEventLine(
        {
          kind: "disconnected",
          reason: "connection to 127.0.0.1:7400 lost: server is shutting down",
          reconnecting: true,
        },
        subscription,
      ),
      connectionEventLine({ kind: "reconnected", attempts: 3 }, subscription),
      connectionEventLine({ kind: "reconnect_failed", reason: "x", attempts: 20 }, subscription),
      connectionEventLine({ kind: "reconnected", attempts: 1 }, null),
    ].map((line) => line.trimEnd()),
  ).toMatchInlineSnapshot(`
    [
      "aria sub: connection to 127.0.0.1:7400 lost: server is shutting down; reconnecting",
      "aria sub: reconnected; resumed from seq 201",
      "aria sub: gave up reconnecting after 20 attempts",
      "aria sub: reconnected; resumed from its start",
    ]
  `);
});

test("sub --ack: auto or none, only with --durable; usage errors say so", async () => {
  const firstLines = [];
  for (const extra of [
    ["--durable", "d", "--ack", "manual"],
    ["--ack", "none"],
  ]) {
    const io = capture();
    expect(await runCli(["sub", "--url", "tcp://127.0.0.1:1", "a/**", ...extra], io)).toBe(2);
    firstLines.push(io.stderr.split("\n")[0]);
  }
  expect(firstLines).toEqual([
    'aria sub: --ack: "manual" is not auto or none',
    "aria sub: --ack applies to a durable consumer: add --durable NAME",
  ]);
  const io = capture();
  // A valid --ack none reaches the connection (nothing listens on port 1: exit 1).
  expect(
    await runCli(
      ["sub", "--url", "tcp://127.0.0.1:1", "a/**", "--durable", "d", "--ack", "none"],
      io,
    ),
  ).toBe(1);
});
