/**
 * End to end: fuzzing the running server over real sockets. Each fast-check run opens several
 * raw connections at once and sends each a script of valid frames of every kind (client and
 * server kinds), mutated frames (flipped bytes, truncated bodies, forged length, type and flag
 * fields, inserted bytes) and random bytes, cut into random chunks, then a PING. Meanwhile a
 * well-behaved client publishes and another follows its topic live.
 *
 * Checked after every run: the server is up, every byte it sent decodes, and a connection it
 * closed got a fatal ERROR first. At the end: the well-behaved subscriber got every acknowledged
 * message in order, the server's RSS stayed bounded, no fuzz session lingers, and `aria pub` /
 * `aria sub` still work. Seed and runs come from fcParams() (FC_SEED, FC_RUNS).
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { connect } from "../src/server/mod.ts";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { frameArbitrary } from "../src/protocol/frame_arbitraries.ts";
import type { OutgoingFrame } from "../src/protocol/mod.ts";
import { fcParams } from "../src/testing/fc_params.ts";
import { parseSubLines, runAria, serverForFile, waitFor } from "./fixtures/e2e_server.ts";
import { framesBytes, RawConnection } from "./fixtures/e2e_raw.ts";

/** RSS the server may gain over the whole fuzz run (see e2e_stall for the GC setting). */
const RSS_GROWTH_BYTES_MAX = 160 * 1024 * 1024;
/** How long a connection waits for its closing PING's PONG (or the server's close). */
const SETTLE_MS = 60;

const server = serverForFile({
  tipBytes: "1MiB",
  fsync: "never",
  env: { BUN_JSC_gcMaxHeapSize: String(64 * 1024 * 1024) },
});

type Mutation =
  | { kind: "flip"; at: number; xor: number }
  | { kind: "truncate"; at: number }
  | { kind: "insert"; at: number; bytes: Uint8Array }
  | { kind: "length"; value: number }
  | { kind: "type"; value: number }
  | { kind: "flags"; value: number };

const position = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const mutationArbitrary: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    kind: fc.constant("flip" as const),
    at: position,
    xor: fc.integer({ min: 1, max: 255 }),
  }),
  fc.record({ kind: fc.constant("truncate" as const), at: position }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: position,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
  }),
  fc.record({
    kind: fc.constant("length" as const),
    value: fc.oneof(
      fc.integer({ min: 0, max: 7 }),
      fc.integer({ min: 8, max: 4096 }),
      fc.integer({ min: 0x11_0001, max: 0xffff_ffff }),
    ),
  }),
  fc.record({ kind: fc.constant("type" as const), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("flags" as const), value: fc.integer({ min: 1, max: 255 }) }),
);

function mutate(bytes: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let out = bytes.slice();
  for (const mutation of mutations) {
    const at = "at" in mutation ? Math.floor(mutation.at * out.length) : 0;
    if (mutation.kind === "flip") out[at] ^= mutation.xor;
    else if (mutation.kind === "truncate") out = out.slice(0, at);
    else if (mutation.kind === "insert")
      out = new Uint8Array([...out.subarray(0, at), ...mutation.bytes, ...out.subarray(at)]);
    else if (out.length >= 8) {
      const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
      if (mutation.kind === "length") view.setUint32(0, mutation.value, true);
      else if (mutation.kind === "type") out[4] = mutation.value;
      else out[5] = mutation.value;
    }
  }
  return out;
}

/** One piece of a connection's script, already as bytes. */
const pieceArbitrary: fc.Arbitrary<Uint8Array> = fc.oneof(
  { weight: 4, arbitrary: frameArbitrary.map((frame) => framesBytes([frame])) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(frameArbitrary, fc.array(mutationArbitrary, { minLength: 1, maxLength: 3 }))
      .map(([frame, mutations]) => mutate(framesBytes([frame]), mutations)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }) },
);

interface Script {
  hello: boolean;
  pieces: Uint8Array[];
  chunkBytes: number;
}

const scriptArbitrary: fc.Arbitrary<Script> = fc.record({
  hello: fc.oneof(
    { weight: 4, arbitrary: fc.constant(true) },
    { weight: 1, arbitrary: fc.constant(false) },
  ),
  pieces: fc.array(pieceArbitrary, { minLength: 1, maxLength: 12 }),
  chunkBytes: fc.integer({ min: 1, max: 512 }),
});

/** What one fuzz connection saw. */
interface Outcome {
  closedByServer: boolean;
  lastFrame: { kind: string; fatal?: boolean } | null;
  serverDecodeErrors: number;
}

let pingToken = 1;

async function runScript(url: string, script: Script): Promise<Outcome> {
  let lastFrame: Outcome["lastFrame"] = null;
  const token = pingToken++;
  let ponged = false;
  const connection = await RawConnection.open(url, (frame) => {
    lastFrame =
      frame.kind === "error" ? { kind: "error", fatal: frame.fatal } : { kind: frame.kind };
    if (frame.kind === "pong" && frame.token === token) ponged = true;
  });
  const hello: OutgoingFrame = {
    kind: "hello",
    version: PROTOCOL_VERSION,
    clientName: "fuzz",
    authToken: null,
  };
  const parts = [
    ...(script.hello ? [framesBytes([hello])] : []),
    ...script.pieces,
    framesBytes([{ kind: "ping", token }]),
  ];
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  for (let at = 0; at < bytes.length && !connection.closed; at += script.chunkBytes) {
    connection.write(bytes.subarray(at, at + script.chunkBytes));
    if ((at / script.chunkBytes) % 4 === 3) await Bun.sleep(0);
  }
  const deadline = performance.now() + SETTLE_MS;
  while (!ponged && !connection.closed && performance.now() < deadline) await Bun.sleep(2);
  const closedByServer = connection.closed;
  connection.close();
  await connection.waitClosed(1000);
  return { closedByServer, lastFrame, serverDecodeErrors: connection.serverDecodeErrors.length };
}

test("fuzz: random and mutated frames from many connections; the server stays up, memory bounded, well-behaved clients unaffected", async () => {
  const url = server().tcpUrl;

  // The well-behaved pair: a publisher on its own topic and a live subscriber to it.
  const subscriberClient = await connect(url, { clientName: "well-behaved-sub" });
  const subscription = subscriberClient.subscribe("wellbehaved/zq9/**", { from: "live" });
  await subscription.caughtUpAt;
  const received: { seq: number; payload: string }[] = [];
  const reading = (async () => {
    for await (const message of subscription)
      received.push({ seq: message.seq, payload: new TextDecoder().decode(message.payload) });
  })();
  const publisherClient = await connect(url, { clientName: "well-behaved-pub" });
  const acked: { seq: number; payload: string }[] = [];
  let publishing = true;
  const publishLoop = (async () => {
    for (let n = 0; publishing; n++) {
      const payload = `good-${n}`;
      acked.push({
        seq: await publisherClient.publish(`wellbehaved/zq9/${n % 3}`, payload),
        payload,
      });
      await Bun.sleep(3);
    }
  })();

  const rssBaseline = server().rssBytes();
  let rssMax = rssBaseline;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(scriptArbitrary, { minLength: 1, maxLength: 8 }), async (scripts) => {
      runs++;
      const outcomes = await Promise.all(scripts.map((script) => runScript(url, script)));
      rssMax = Math.max(rssMax, server().rssBytes());
      if (!server().alive())
        throw new Error(
          `the server exited (code ${server().process.exitCode}):\n${server().stderr()}`,
        );
      for (const outcome of outcomes) {
        if (outcome.serverDecodeErrors > 0)
          throw new Error("the server sent bytes that do not decode");
        if (
          outcome.closedByServer &&
          (outcome.lastFrame?.kind !== "error" || outcome.lastFrame.fatal !== true)
        ) {
          throw new Error(
            `the server closed a connection without a fatal ERROR (last frame: ${JSON.stringify(outcome.lastFrame)})`,
          );
        }
      }
    }),
    fcParams({ runs: 40 }),
  );
  expect(runs).toBeGreaterThan(0);

  publishing = false;
  await publishLoop;
  expect(acked.length).toBeGreaterThan(20);
  const lastSeq = acked[acked.length - 1].seq;
  await waitFor(
    () => received.length > 0 && received[received.length - 1].seq >= lastSeq,
    "the well-behaved subscriber to get every message",
  );
  expect(received).toEqual(acked);

  // Every fuzz session is gone; memory stayed bounded; the server still serves the CLI.
  await waitFor(
    async () => (await server().stats()).broker.connections === 2,
    "fuzz sessions to close",
  );
  rssMax = Math.max(rssMax, server().rssBytes());
  if (rssMax - rssBaseline > RSS_GROWTH_BYTES_MAX)
    throw new Error(
      `server RSS grew by ${((rssMax - rssBaseline) / 2 ** 20).toFixed(1)} MiB during the fuzz`,
    );
  const pub = await runAria(["pub", "--url", url, "wellbehaved/zq9/cli", "after the fuzz"]);
  expect(pub.exitCode).toBe(0);
  const sub = await runAria([
    "sub",
    "--url",
    url,
    "wellbehaved/zq9/cli",
    "--from",
    "earliest",
    "--until-caught-up",
  ]);
  expect(sub.exitCode).toBe(0);
  expect(parseSubLines(sub.stdout).map((line) => line.payload)).toEqual(["after the fuzz"]);
  expect(server().alive()).toBe(true);

  await publisherClient.close();
  await subscriberClient.close();
  await reading;
}, 60_000);
