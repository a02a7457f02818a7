/**
 * End to end: the command-line contract of `aria serve`, `aria pub` and `aria sub`, run as the
 * compiled binary against a server on a loopback port 0. Exit codes (0 ok, 1 failure such as an
 * unreachable server, 2 wrong arguments), --help, stdin lines, --json-lines, the JSON and raw
 * output formats (payloadBase64 for bytes that are not UTF-8), --from (a time ago too), --limit, --until-caught-up; live output printed as it arrives; a closed
 * standard output (`aria sub … | head`) ends sub quietly; other systems' wildcards (MQTT's #
 * and +, NATS's .> and .*) are usage errors that say what Aria writes, a dotted topic a warning.
 */
import { beforeAll, expect, test } from "bun:test";
import { connect } from "../src/server/mod.ts";
import { join } from "node:path";
import {
  ensureBinary,
  makeTempDir,
  parseSubLines,
  runAria,
  serverForFile,
  waitFor,
} from "./fixtures/e2e_server.ts";

const server = serverForFile();
let url: string;

beforeAll(() => {
  url = server().tcpUrl;
});

/** A port on 127.0.0.1 where nothing listens: taken from port 0, then released. */
function closedPort(): number {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/** Parses pub's "acknowledged seq A..B (n messages)". */
function ackedRange(stderr: string): { first: number; last: number; count: number } {
  const match = /^acknowledged seq (\d+)\.\.(\d+) \((\d+) messages?\)\n$/.exec(stderr);
  if (match === null) throw new Error(`pub printed no seq range: ${JSON.stringify(stderr)}`);
  return { first: Number(match[1]), last: Number(match[2]), count: Number(match[3]) };
}

test("serve prints one URL line per listener and the admin URL answers", async () => {
  expect(server().tcpUrl).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
  expect(server().adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(server().tcpUrl.split(":")[2]).not.toBe("7400");
  const response = await fetch(`${server().adminUrl}/healthz`);
  expect(response.status).toBe(200);
});

test("--help on every subcommand: usage on stdout, exit 0", async () => {
  for (const command of ["serve", "pub", "sub"]) {
    for (const flag of ["--help", "-h"]) {
      const run = await runAria([command, flag]);
      expect(run.exitCode).toBe(0);
      expect(run.stdout).toStartWith(`Usage: aria ${command}`);
      expect(run.stderr).toBe("");
    }
  }
  const top = await runAria(["--help"]);
  expect(top.exitCode).toBe(0);
  expect(top.stdout).toContain("serve");
});

test("wrong arguments: a usage message on stderr, nothing on stdout, exit 2", async () => {
  const cases: string[][] = [
    [],
    ["no-such-command"],
    ["serve", "--fsync", "sometimes"],
    ["serve", "--port", "70000"],
    ["serve", "--tip-bytes", "lots"],
    ["serve", "extra"],
    ["serve", "--auth-token", ""],
    ["serve", "--admin-host", ""],
    ["serve", "--host", ""],
    ["pub", "--url", url],
    ["pub", "--url", url, "bad topic"],
    ["pub", "--url", url, "a/*/b", "x"],
    ["pub", "--url", url, "a/b", "one", "two"],
    ["pub", "--url", url, "--json-lines", "a/b"],
    ["pub", "--url", url, "--no-such-flag", "a/b", "x"],
    ["sub", "--url", url],
    ["sub", "--url", url, "a/**/b"],
    ["sub", "--url", url, "a", "--format", "xml"],
    ["sub", "--url", url, "a", "--from", "yesterday"],
    ["sub", "--url", url, "a", "--from", "0"],
    ["sub", "--url", url, "a", "--from", "15x"],
    ["sub", "--url", url, "a", "--from", "-5m"],
    ["sub", "--url", url, "a", "--from", "0m"],
    ["sub", "--url", url, "app/#"],
    ["sub", "--url", url, "app/+/x"],
    ["sub", "--url", url, "orders.>"],
    ["sub", "--url", url, "orders.*"],
    ["pub", "--url", url, "orders.>", "x"],
    ["pub", "--url", url, "a/b", "x", "--file", "/dev/null"],
    ["pub", "--url", url, "--json-lines", "--file", "/dev/null"],
    ["sub", "--url", url, "a", "--limit", "many"],
    ["sub", "--url", url, "a", "--until-caught-up=yes"],
    ["sub", "--url"],
    ["pub", "--url", "http://127.0.0.1:7400", "a/b", "x"],
    ["sub", "--url", "127.0.0.1:7400", "a"],
    ["sub", "--url", "tcp://127.0.0.1:99999", "a"],
  ];
  for (const args of cases) {
    const run = await runAria(args);
    if (run.exitCode !== 2)
      throw new Error(`aria ${args.join(" ")}: exit ${run.exitCode}, expected 2\n${run.stderr}`);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("Usage: aria");
  }
});

test("server unreachable: a one-line error and exit 1", async () => {
  const deadUrl = `tcp://127.0.0.1:${closedPort()}`;
  const runs = [
    await runAria(["pub", "--url", deadUrl, "a/b", "hello"]),
    await runAria(["pub", "--url", deadUrl, "a/b"], { stdin: "x\ny\n" }),
    await runAria(["pub", "--url", deadUrl, "--json-lines"], {
      stdin: '{"topic":"a","payload":"x"}\n',
    }),
    await runAria(["sub", "--url", deadUrl, "a/**"]),
    await runAria(["sub", "--url", deadUrl, "**", "--from", "earliest", "--until-caught-up"]),
  ];
  for (const run of runs) {
    expect(run.exitCode).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain(deadUrl);
  }
});

test("pub --json-lines: a line the server refuses while stdin waits for the next is a one-line error and exit 1 (no stack trace)", async () => {
  const child = Bun.spawn([await ensureBinary(), "pub", "--url", url, "--json-lines"], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  child.stdin.write('{"topic":"cli/pub/ok","payload":"x"}\n{"topic":"bad topic","payload":"y"}\n');
  await child.stdin.flush();
  await Bun.sleep(500); // the refusal comes while pub waits for input
  child.stdin.write('{"topic":"cli/pub/ok","payload":"z"}\n');
  await child.stdin.end();
  const [stderr, exitCode] = await Promise.all([new Response(child.stderr).text(), child.exited]);
  expect(exitCode).toBe(1);
  expect(stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(stderr).toContain("aria pub: ARIA_ERR_INVALID_TOPIC");
});

test("pub MESSAGE, pub from stdin lines, pub --json-lines: exit 0 and the acknowledged seq range", async () => {
  const one = await runAria(["pub", "--url", url, "cli/pub/one", "hello world"]);
  expect(one.exitCode).toBe(0);
  const first = ackedRange(one.stderr);
  expect(first.count).toBe(1);
  expect(first.last).toBe(first.first);

  const lines = [
    "alpha",
    "",
    "ünïcødé ✓",
    'with "quotes" and \\ backslash',
    "last line without newline",
  ];
  const many = await runAria(["pub", "--url", url, "cli/pub/lines"], { stdin: lines.join("\n") });
  expect(many.exitCode).toBe(0);
  const range = ackedRange(many.stderr);
  expect(range).toEqual({
    first: first.last + 1,
    last: first.last + lines.length,
    count: lines.length,
  });

  const records = [
    { topic: "cli/pub/json/a", payload: '{"nested": true}' },
    { topic: "cli/pub/json/b", payload: "" },
    { topic: "cli/pub/json", payload: "tab\there" },
  ];
  const jsonInput = `${records.map((r) => JSON.stringify(r)).join("\n")}\n\n`;
  const json = await runAria(["pub", "--url", url, "--json-lines"], { stdin: jsonInput });
  expect(json.exitCode).toBe(0);
  const jsonRange = ackedRange(json.stderr);
  expect(jsonRange.count).toBe(records.length);

  const sub = await runAria([
    "sub",
    "--url",
    url,
    "cli/pub/**",
    "--from",
    String(first.first),
    "--until-caught-up",
  ]);
  expect(sub.exitCode).toBe(0);
  const got = parseSubLines(sub.stdout).map(({ seq, topic, payload }) => ({ seq, topic, payload }));
  const want = [
    { seq: first.first, topic: "cli/pub/one", payload: "hello world" },
    ...lines.map((payload, i) => ({ seq: range.first + i, topic: "cli/pub/lines", payload })),
    ...records.map((r, i) => ({ seq: jsonRange.first + i, ...r })),
  ];
  expect(got).toEqual(want);
});

test("pub: bad input lines and rejected topics fail with exit 1", async () => {
  const notJson = await runAria(["pub", "--url", url, "--json-lines"], {
    stdin: '{"topic":"cli/bad","payload":"ok"}\nnot json\n',
  });
  expect(notJson.exitCode).toBe(1);
  expect(notJson.stderr).toContain("line 2");
  const badTopic = await runAria(["pub", "--url", url, "--json-lines"], {
    stdin: '{"topic":"cli/bad topic","payload":"x"}\n',
  });
  expect(badTopic.exitCode).toBe(1);
  expect(badTopic.stderr).toContain("ARIA_ERR_INVALID_TOPIC");
  const wrongShape = await runAria(["pub", "--url", url, "--json-lines"], {
    stdin: '{"topic":"cli/bad","payload":7}\n',
  });
  expect(wrongShape.exitCode).toBe(1);
});

test("sub --format json: seq, ISO-8601 time, topic, payload or payloadBase64", async () => {
  const client = await connect(url);
  const before = Date.now();
  const binary = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0x41]);
  const seqText = await client.publish("cli/json/text", "plain ✓");
  const seqBinary = await client.publish("cli/json/bin", binary);
  const seqEmpty = await client.publish("cli/json/text", new Uint8Array(0));
  const after = Date.now();
  await client.close();

  const run = await runAria([
    "sub",
    "--url",
    url,
    "cli/json/**",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(run.exitCode).toBe(0);
  const lines = run.stdout
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(lines.map((line) => Object.keys(line).sort())).toEqual([
    ["payload", "seq", "time", "topic"],
    ["payloadBase64", "seq", "time", "topic"],
    ["payload", "seq", "time", "topic"],
  ]);
  expect(lines.map((line) => line.seq)).toEqual([seqText, seqBinary, seqEmpty]);
  expect(lines[0]).toMatchObject({ topic: "cli/json/text", payload: "plain ✓" });
  expect(lines[1]).toMatchObject({
    topic: "cli/json/bin",
    payloadBase64: Buffer.from(binary).toString("base64"),
  });
  expect(lines[2]).toMatchObject({ topic: "cli/json/text", payload: "" });
  for (const line of lines) {
    const time = line.time as string;
    expect(time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Date.parse(time)).toBeGreaterThanOrEqual(before - 1);
    expect(Date.parse(time)).toBeLessThanOrEqual(after + 1);
  }
});

test("sub --format raw: each payload's bytes and a newline", async () => {
  const client = await connect(url);
  const payloads = [
    new TextEncoder().encode("first"),
    new Uint8Array([0xc3, 0x28, 0xff]),
    new Uint8Array(0),
    new TextEncoder().encode("ünï"),
  ];
  for (const payload of payloads) await client.publish("cli/raw/x", payload);
  await client.close();
  const run = await runAria([
    "sub",
    "--url",
    url,
    "cli/raw/x",
    "--from",
    "earliest",
    "--until-caught-up",
    "--format",
    "raw",
  ]);
  expect(run.exitCode).toBe(0);
  const expected = Buffer.concat(payloads.flatMap((payload) => [payload, new Uint8Array([10])]));
  expect(Buffer.from(run.stdoutBytes).equals(expected)).toBe(true);
});

test("sub --from SEQ, --from TIME, --limit N; --until-caught-up with no match exits 0 at once", async () => {
  const client = await connect(url);
  const seqs: number[] = [];
  for (let i = 0; i < 6; i++)
    seqs.push(await client.publish(`cli/from/${i % 2 === 0 ? "even" : "odd"}`, `m${i}`));
  await Bun.sleep(20);
  const middle = new Date();
  await Bun.sleep(20);
  for (let i = 6; i < 10; i++)
    seqs.push(await client.publish(`cli/from/${i % 2 === 0 ? "even" : "odd"}`, `m${i}`));
  await client.close();

  const fromSeq = await runAria([
    "sub",
    "--url",
    url,
    "cli/from/**",
    "--from",
    String(seqs[3]),
    "--until-caught-up",
  ]);
  expect(fromSeq.exitCode).toBe(0);
  expect(parseSubLines(fromSeq.stdout).map((l) => l.payload)).toEqual([
    "m3",
    "m4",
    "m5",
    "m6",
    "m7",
    "m8",
    "m9",
  ]);

  const fromTime = await runAria([
    "sub",
    "--url",
    url,
    "cli/from/even",
    "--from",
    middle.toISOString(),
    "--until-caught-up",
  ]);
  expect(fromTime.exitCode).toBe(0);
  expect(parseSubLines(fromTime.stdout).map((l) => l.seq)).toEqual([seqs[6], seqs[8]]);

  const limited = await runAria([
    "sub",
    "--url",
    url,
    "cli/from/odd",
    "--from",
    "earliest",
    "--limit",
    "3",
  ]);
  expect(limited.exitCode).toBe(0);
  expect(parseSubLines(limited.stdout).map((l) => l.payload)).toEqual(["m1", "m3", "m5"]);

  const nothing = await runAria([
    "sub",
    "--url",
    url,
    "cli/nobody/**",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(nothing.exitCode).toBe(0);
  expect(nothing.stdout).toBe("");
});

test("sub --from live --limit N gets the next N messages published after it subscribed", async () => {
  const liveBefore = (await server().stats()).broker.subscriptionsByPhase.live;
  const running = runAria(["sub", "--url", url, "cli/live/**", "--limit", "2"]);
  await waitFor(
    async () => (await server().stats()).broker.subscriptionsByPhase.live > liveBefore,
    "the CLI subscriber to go live",
  );
  const pub = await runAria(["pub", "--url", url, "cli/live/a"], { stdin: "one\ntwo\nthree\n" });
  expect(pub.exitCode).toBe(0);
  const { first } = ackedRange(pub.stderr);
  const run = await running;
  expect(run.exitCode).toBe(0);
  expect(parseSubLines(run.stdout).map((l) => [l.seq, l.payload])).toEqual([
    [first, "one"],
    [first + 1, "two"],
  ]);
});

test("sub prints a live message as soon as it arrives, not once enough have gathered", async () => {
  const liveBefore = (await server().stats()).broker.subscriptionsByPhase.live;
  const child = Bun.spawn([await ensureBinary(), "sub", "--url", url, "cli/tail/**"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    await waitFor(
      async () => (await server().stats()).broker.subscriptionsByPhase.live > liveBefore,
      "the CLI subscriber to go live",
    );
    expect((await runAria(["pub", "--url", url, "cli/tail/a", "hello"])).exitCode).toBe(0);
    const reader = child.stdout.getReader();
    const chunk = await Promise.race([reader.read(), Bun.sleep(5000).then(() => null)]);
    if (chunk === null || chunk.value === undefined)
      throw new Error("aria sub printed nothing within 5 s of a live message");
    expect(parseSubLines(new TextDecoder().decode(chunk.value)).map((l) => l.payload)).toEqual([
      "hello",
    ]);
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
});

test("sub | head: once its standard output closes, sub exits 0 with nothing on stderr", async () => {
  const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i}`).join("\n");
  expect((await runAria(["pub", "--url", url, "cli/head/a"], { stdin: lines })).exitCode).toBe(0);
  const errors = join(makeTempDir("aria-e2e-head-"), "sub.err");
  const script = `"$0" sub --url "$1" 'cli/head/**' --from earliest 2>"$2" | head -n 2; echo "sub exit \${PIPESTATUS[0]}"`;
  const child = Bun.spawn(["bash", "-c", script, await ensureBinary(), url, errors], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  const [stdout, exitCode] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  clearTimeout(timer);
  expect(exitCode).toBe(0);
  const printed = stdout.trimEnd().split("\n");
  expect(printed.slice(0, 2).map((line) => parseSubLines(line)[0].payload)).toEqual([
    "line 0",
    "line 1",
  ]);
  // Before, the sub waited for ever for a "drain" that a closed pipe never sends (killed here at 15 s).
  expect(printed[2]).toBe("sub exit 0");
  expect(await Bun.file(errors).text()).toBe("");
});

test("sub --from 1s, --from 1m: a time ago, from the clock of the machine", async () => {
  const older = await runAria(["pub", "--url", url, "cli/ago/x", "older"]);
  expect(older.exitCode).toBe(0);
  await Bun.sleep(1500);
  const newer = await runAria(["pub", "--url", url, "cli/ago/x", "newer"]);
  expect(newer.exitCode).toBe(0);
  const second = await runAria([
    "sub",
    "--url",
    url,
    "cli/ago/x",
    "--from",
    "1s",
    "--until-caught-up",
  ]);
  expect(second.exitCode).toBe(0);
  expect(parseSubLines(second.stdout).map((l) => l.payload)).toEqual(["newer"]);
  const minute = await runAria([
    "sub",
    "--url",
    url,
    "cli/ago/x",
    "--from",
    "1m",
    "--until-caught-up",
  ]);
  expect(minute.exitCode).toBe(0);
  expect(parseSubLines(minute.stdout).map((l) => l.payload)).toEqual(["older", "newer"]);

  const signed = await runAria(["sub", "--url", url, "cli/ago/x", "--from", "-5m"]);
  expect(signed.exitCode).toBe(2);
  expect(signed.stderr.split("\n")[0]).toContain("a time ago (30s, 15m, 2h, 7d, 1w)");
});

test("foreign wildcards: sub 'app/#', 'app/+/x', 'orders.>' say what Aria writes (exit 2); a dotted topic warns and goes on", async () => {
  const firstLine = async (args: string[]) => {
    const run = await runAria(args);
    expect(run.exitCode).toBe(2);
    expect(run.stdout).toBe("");
    return run.stderr.split("\n")[0];
  };
  expect(await firstLine(["sub", "--url", url, "app/#"])).toContain("Aria writes app/**");
  expect(await firstLine(["sub", "--url", url, "app/+/x"])).toContain(
    "'+' is MQTT's single-level wildcard: Aria writes app/*/x",
  );
  expect(await firstLine(["sub", "--url", url, "orders.>"])).toBe(
    `aria sub: "orders.>": Aria's separator is '/', not '.' (NATS's): the subtree is orders/**`,
  );
  expect(await firstLine(["sub", "--url", url, "orders.*"])).toContain("Aria writes orders/*");

  const warning = `warning: "orders.created": Aria's separator is '/', not '.': this is one segment (orders/created has 2)\n`;
  const pub = await runAria(["pub", "--url", url, "orders.created", "dotted"]);
  expect(pub.exitCode).toBe(0);
  expect(pub.stderr).toStartWith(`aria pub: ${warning}acknowledged seq `);
  const sub = await runAria([
    "sub",
    "--url",
    url,
    "orders.created",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(sub.exitCode).toBe(0);
  expect(sub.stderr).toBe(`aria sub: ${warning}`);
  expect(parseSubLines(sub.stdout).map((l) => [l.topic, l.payload])).toEqual([
    ["orders.created", "dotted"],
  ]);
});
