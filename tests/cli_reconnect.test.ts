/**
 * End to end: `aria sub` across a server restart on the same data dir and port. It said nothing
 * while it reconnected; now stderr has one line when the connection drops (with the reason) and
 * one when it resumed (from which seq), and stdout runs on with no gap and no duplicate.
 */
import { afterAll, expect, test } from "bun:test";
import { connect } from "../src/server/mod.ts";
import {
  cleanupAll,
  ensureBinary,
  makeTempDir,
  parseSubLines,
  startAria,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

/** Collects a child's stream as text while it runs. */
function collect(stream: ReadableStream<Uint8Array>): { text: () => string; done: Promise<void> } {
  let text = "";
  const decoder = new TextDecoder();
  const done = (async () => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>)
      text += decoder.decode(chunk, { stream: true });
  })().catch(() => undefined);
  return { text: () => text, done };
}

async function publish(url: string, from: number, to: number): Promise<number[]> {
  const client = await connect(url, { reconnect: false });
  try {
    return await Promise.all(
      Array.from({ length: to - from }, (_, i) =>
        client.publish(`re/t${(from + i) % 3}`, `msg-${from + i}`),
      ),
    );
  } finally {
    await client.close();
  }
}

test("sub across a restart: a line when the connection drops, one when it resumed from seq N; stdout without gap or duplicate", async () => {
  const dataDir = makeTempDir("aria-e2e-subre-");
  const first = await startAria({ dataDir, fsync: "always" });
  const port = Number(first.tcpUrl.split(":")[2]);
  expect(await publish(first.tcpUrl, 0, 100)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));

  const child = Bun.spawn(
    [await ensureBinary(), "sub", "--url", first.tcpUrl, "re/**", "--from", "earliest"],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  try {
    await waitFor(
      () => parseSubLines(stdout.text()).length === 100,
      "sub to print the first 100 messages",
    );
    expect(stderr.text()).toBe("");

    expect(await first.stop()).toBe(0);
    await waitFor(() => stderr.text().includes("\n"), "sub to say the connection dropped");
    const second = await startAria({ dataDir, fsync: "always", port });
    expect(second.tcpUrl).toBe(first.tcpUrl);
    await waitFor(() => stderr.text().split("\n").length >= 3, "sub to say it resumed", 15_000);
    expect(await publish(second.tcpUrl, 100, 200)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 101),
    );
    await waitFor(
      () => parseSubLines(stdout.text()).length >= 200,
      "sub to print all 200 messages",
    );

    expect(stderr.text().split("\n")).toEqual([
      `aria sub: connection to 127.0.0.1:${port} lost: server is shutting down; reconnecting`,
      "aria sub: reconnected; resumed from seq 101",
      "",
    ]);
    const lines = parseSubLines(stdout.text());
    expect(lines.map((line) => line.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(lines.map((line) => line.payload)).toEqual(
      Array.from({ length: 200 }, (_, i) => `msg-${i}`),
    );
    await second.stop();
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
}, 60_000);

test("sub after a kill -9 of the server: the dropped line, then the resumed line from the seq after the last printed", async () => {
  const dataDir = makeTempDir("aria-e2e-subre9-");
  const first = await startAria({ dataDir, fsync: "always" });
  const port = Number(first.tcpUrl.split(":")[2]);
  await publish(first.tcpUrl, 0, 10);
  const child = Bun.spawn(
    [await ensureBinary(), "sub", "--url", first.tcpUrl, "re/**", "--from", "3"],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  try {
    await waitFor(() => parseSubLines(stdout.text()).length === 8, "sub to print seqs 3..10");
    await first.kill9();
    await waitFor(() => stderr.text().includes("\n"), "sub to say the connection dropped");
    const second = await startAria({ dataDir, fsync: "always", port });
    await waitFor(() => stderr.text().split("\n").length >= 3, "sub to say it resumed", 15_000);
    await publish(second.tcpUrl, 10, 12);
    await waitFor(() => parseSubLines(stdout.text()).length >= 10, "sub to print seqs 3..12");
    const [dropped, resumed, rest] = stderr.text().split("\n");
    expect(dropped).toStartWith(`aria sub: connection to 127.0.0.1:${port} lost`);
    expect(dropped).toEndWith("; reconnecting");
    expect(resumed).toBe("aria sub: reconnected; resumed from seq 11");
    expect(rest).toBe("");
    expect(parseSubLines(stdout.text()).map((line) => line.seq)).toEqual(
      Array.from({ length: 10 }, (_, i) => i + 3),
    );
    await second.stop();
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
}, 60_000);
