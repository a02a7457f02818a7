/**
 * End to end: `aria pub` is binary-safe. `--file PATH` publishes the file's bytes as one message;
 * stdin lines are split on "\n" bytes and sent as their bytes (before, stdin was decoded as UTF-8
 * and `printf '\x00\x01\xff' | aria pub` stored 00 01 ef bf bd); `--json-lines` takes
 * payloadBase64, so `aria sub --format json … | aria pub --json-lines` copies any stream exactly,
 * here from one server into a second. Payloads are random bytes from a fixed seed.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "../src/server/mod.ts";
import { Prng } from "../src/stdx/prng.ts";
import {
  type AriaServer,
  cleanupAll,
  ensureBinary,
  makeTempDir,
  parseSubLines,
  payloadOfLine,
  runAria,
  startAria,
} from "./fixtures/e2e_server.ts";

const SEED = Number(process.env.FC_SEED ?? 0x70756221);
let source: AriaServer;
let copy: AriaServer;

beforeAll(async () => {
  [source, copy] = await Promise.all([startAria(), startAria()]);
});
afterAll(async () => {
  await Promise.all([source.stop(), copy.stop()]);
  await cleanupAll();
});

function randomBytes(prng: Prng, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  prng.fill(bytes);
  return bytes;
}

/** Every message of `filter` on `url` (from the oldest), through `aria sub --format json`. */
async function readBack(
  url: string,
  filter: string,
): Promise<{ seq: number; topic: string; payload: Uint8Array }[]> {
  const run = await runAria([
    "sub",
    "--url",
    url,
    filter,
    "--from",
    "earliest",
    "--until-caught-up",
    "--format",
    "json",
  ]);
  expect(run.exitCode).toBe(0);
  return parseSubLines(run.stdout).map((line) => ({
    seq: line.seq,
    topic: line.topic,
    payload: payloadOfLine(line),
  }));
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

test("pub --file: the file's bytes exactly, as one message (every byte value, newlines included)", async () => {
  const prng = new Prng(SEED);
  const dir = makeTempDir("aria-e2e-pubfile-");
  const every = Uint8Array.from({ length: 256 }, (_, i) => i);
  const files = [
    every,
    randomBytes(prng, 100_000),
    new Uint8Array([0x00, 0x01, 0xff]),
    new Uint8Array(0),
    new TextEncoder().encode("line\r\n"),
  ];
  for (const [index, bytes] of files.entries()) {
    const path = join(dir, `payload${index}.bin`);
    writeFileSync(path, bytes);
    const run = await runAria(["pub", "--url", source.tcpUrl, `bin/file/${index}`, "--file", path]);
    expect(run.exitCode).toBe(0);
    expect(run.stderr).toMatch(/^acknowledged seq \d+\.\.\d+ \(1 message\)\n$/);
  }
  const got = await readBack(source.tcpUrl, "bin/file/**");
  expect(got.map((message) => [message.topic, hex(message.payload)])).toEqual(
    files.map((bytes, index) => [`bin/file/${index}`, hex(bytes)]),
  );
});

test("pub from stdin: each line's bytes exactly (no decoding), split on \\n, a \\r before it dropped", async () => {
  const prng = new Prng(SEED + 1);
  const lines: Uint8Array[] = [
    new Uint8Array([0x00, 0x01, 0xff]),
    new Uint8Array(0),
    new Uint8Array([0xc3, 0x28, 0xa0, 0xa1]),
  ];
  for (let i = 0; i < 200; i++) {
    // Any byte but "\n", and no "\r" last (it would end a CRLF line).
    const line = randomBytes(prng, prng.nextInt(300)).map((byte) => (byte === 0x0a ? 0x0b : byte));
    if (line.length > 0 && line[line.length - 1] === 0x0d) line[line.length - 1] = 0x0e;
    lines.push(line);
  }
  const crlf = new Uint8Array([0x80, 0x0d]); // sent as "\x80\r\n": the message is 80
  const last = new Uint8Array([0xfe, 0x00, 0x41]); // no "\n" after it
  const input = Buffer.concat([
    ...lines.flatMap((line) => [line, new Uint8Array([0x0a])]),
    crlf,
    new Uint8Array([0x0a]),
    last,
  ]);
  const run = await runAria(["pub", "--url", source.tcpUrl, "bin/lines"], { stdin: input });
  expect(run.exitCode).toBe(0);
  const want = [...lines, new Uint8Array([0x80]), last];
  expect(run.stderr).toContain(`(${want.length} messages)`);
  const got = await readBack(source.tcpUrl, "bin/lines");
  expect(got.map((message) => hex(message.payload))).toEqual(want.map(hex));
});

test("aria sub --format json … | aria pub --json-lines copies random binary payloads into a second server exactly", async () => {
  const prng = new Prng(SEED + 2);
  const topics = ["copy/a", "copy/b/c", "copy/d/e/f"];
  const sent: { topic: string; payload: Uint8Array }[] = [
    { topic: "copy/a", payload: new TextEncoder().encode('text ✓ with "quotes"\nand a newline') },
    { topic: "copy/a", payload: new Uint8Array(0) },
    { topic: "copy/b/c", payload: new Uint8Array([0x00, 0x01, 0xff]) },
  ];
  for (let i = 0; i < 500; i++)
    sent.push({
      topic: topics[prng.nextInt(topics.length)],
      payload: randomBytes(prng, prng.nextInt(2000)),
    });
  const client = await connect(source.tcpUrl);
  try {
    await client.publishBatch(sent);
  } finally {
    await client.close();
  }
  const pipeline = `"$0" sub --url "$1" 'copy/**' --from earliest --until-caught-up --format json | "$0" pub --url "$2" --json-lines`;
  const child = Bun.spawn(
    ["bash", "-o", "pipefail", "-c", pipeline, await ensureBinary(), source.tcpUrl, copy.tcpUrl],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [stderr, exitCode] = await Promise.all([new Response(child.stderr).text(), child.exited]);
  expect(stderr).toBe(`acknowledged seq 1..${sent.length} (${sent.length} messages)\n`);
  expect(exitCode).toBe(0);
  const got = await readBack(copy.tcpUrl, "**");
  expect(got.map((message) => [message.topic, hex(message.payload)])).toEqual(
    sent.map((message) => [message.topic, hex(message.payload)]),
  );
});

test("pub --json-lines: a payloadBase64 that is not base64, or beside a payload, is a one-line error and exit 1", async () => {
  const cases = [
    '{"topic":"bin/bad","payloadBase64":"not base64!"}\n',
    '{"topic":"bin/bad","payloadBase64":"AAE","x":1}\n',
    '{"topic":"bin/bad","payload":"x","payloadBase64":"AA=="}\n',
  ];
  for (const stdin of cases) {
    const run = await runAria(["pub", "--url", source.tcpUrl, "--json-lines"], { stdin });
    expect(run.exitCode).toBe(1);
    expect(run.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("line 1");
  }
  expect(await readBack(source.tcpUrl, "bin/bad")).toEqual([]);
});

test("pub --file of a missing file: a one-line error and exit 1; with a MESSAGE or --json-lines: a usage error, exit 2", async () => {
  const missing = join(makeTempDir("aria-e2e-pubfile-"), "no-such-file");
  const run = await runAria(["pub", "--url", source.tcpUrl, "bin/missing", "--file", missing]);
  expect(run.exitCode).toBe(1);
  expect(run.stdout).toBe("");
  expect(run.stderr).toBe(
    `aria pub: --file: cannot read ${JSON.stringify(missing)}: no such file\n`,
  );
  const directory = await runAria([
    "pub",
    "--url",
    source.tcpUrl,
    "bin/missing",
    "--file",
    makeTempDir("aria-e2e-pubfile-"),
  ]);
  expect(directory.exitCode).toBe(1);
  expect(directory.stderr).toContain("is a directory");

  for (const args of [
    ["bin/x", "message", "--file", missing],
    ["--json-lines", "--file", missing],
    ["bin/x", "--file", ""],
  ]) {
    const usage = await runAria(["pub", "--url", source.tcpUrl, ...args]);
    if (usage.exitCode !== 2)
      throw new Error(
        `aria pub ${args.join(" ")}: exit ${usage.exitCode}, expected 2\n${usage.stderr}`,
      );
    expect(usage.stderr).toContain("Usage: aria pub");
  }
});
