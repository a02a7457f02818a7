/**
 * deno_smoke: `deno task smoke` — Aria's server run from source under Deno, its clients the
 * Bun-built binary dist/aria (wire compatibility across runtimes) and the Deno-run CLI:
 *
 *   1. `aria serve` under Deno on port 0 (a 64 KiB tip, so replays after a restart come from disk);
 *   2. a live `dist/aria sub` started first, then `dist/aria pub` of 10,000 messages on four
 *      topics and one 600 KB message (bigger than the tip; a DATA frame bigger than the Deno
 *      socket's write queue, so the drain path runs);
 *   3. `sub --from earliest --until-caught-up` with dist/aria and with the Deno CLI: identical, and
 *      identical to what the live subscriber got;
 *   4. SIGTERM (exit 0), restart, read again; `aria split` under Deno with the server running (the
 *      server switches), read again; 1,000 more messages published with the Deno CLI, stop, an
 *      offline split under Deno (this process switches), restart, read everything and a subtree:
 *      identical every time;
 *   5. MQTT over WebSocket at /mqtt of the admin port (Deno.upgradeWebSocket): an Upgrade without
 *      a handshake gets 400; a raw MQTT 3.1.1 client on Deno's WebSocket subscribes, publishes at
 *      QoS 1 and gets its message back, which dist/aria then reads from the log.
 *
 * Written against node: APIs, which Deno implements, so `tsc` checks it with the rest of scripts/.
 * Needs dist/aria (`npm run build`; ARIA_BIN overrides). Exits 0 when every step held, 1 otherwise.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(new URL(".", import.meta.url).pathname, "..");
const ARIA_BIN = process.env.ARIA_BIN ?? join(ROOT, "dist", "aria");
/** The Deno-run CLI: this very runtime, running main.ts from source. */
const DENO_ARIA = [process.execPath, "run", "--allow-all", "--no-check", join(ROOT, "main.ts")];
const TOPICS = [
  "app/orders/created",
  "app/orders/cancelled",
  "app/codestore/commits",
  "ops/alerts",
];
const MESSAGES_PER_TOPIC = 2500;
const BIG_PAYLOAD_BYTES = 600_000;
const STEP_TIMEOUT_MS = 30_000;

const started = performance.now();
const log = (text: string) =>
  console.log(`deno smoke: ${text} (${((performance.now() - started) / 1000).toFixed(1)} s)`);

type Run = { code: number | null; stdout: string; stderr: string };

/** Runs argv to completion with `input` on stdin; fails the smoke after STEP_TIMEOUT_MS. */
function run(argv: string[], input = ""): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${argv.join(" ")} ran longer than ${STEP_TIMEOUT_MS} ms\n${stderr}`));
    }, STEP_TIMEOUT_MS);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

async function ok(argv: string[], input = ""): Promise<string> {
  const result = await run(argv, input);
  if (result.code !== 0)
    throw new Error(
      `${argv.join(" ")} exited ${result.code}\nstdout: ${result.stdout.slice(-2000)}\nstderr: ${result.stderr}`,
    );
  return result.stdout;
}

type Server = {
  url: string;
  /** The admin app's http:// URL (MQTT over WebSocket at its /mqtt). */
  admin: string;
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<number | null>;
};

/** `aria serve` under Deno on the data directory; resolves once it printed its two URLs. */
function startServer(dataDir: string): Promise<Server> {
  const child = spawn(
    DENO_ARIA[0],
    [
      ...DENO_ARIA.slice(1),
      "serve",
      "--port",
      "0",
      "--admin-port",
      "0",
      "--data-dir",
      dataDir,
      "--tip-bytes",
      "64KiB",
      "--mqtt-port",
      "0",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`aria serve under Deno printed no URLs in 15 s\n${stderr}`));
    }, 15_000);
    void exited.then((code) =>
      reject(new Error(`aria serve under Deno exited ${code} at start\n${stderr}`)),
    );
    child.stdout!.setEncoding("utf8").on("data", (text: string) => {
      stdout += text;
      const lines = stdout.split("\n");
      if (lines.length < 4) return; // tcp://, http://, mqtt://, each with its newline
      clearTimeout(timer);
      if (
        !/^tcp:\/\/127\.0\.0\.1:\d+$/.test(lines[0]) ||
        !/^http:\/\/127\.0\.0\.1:\d+$/.test(lines[1])
      )
        reject(new Error(`unexpected URLs: ${JSON.stringify(stdout)}`));
      resolve({
        url: lines[0],
        admin: lines[1],
        child,
        stderr: () => stderr,
        stop: async () => {
          // process.kill, not child.kill: Deno's node:child_process then reports any signal-sent
          // child as killed by it, hiding the exit code the graceful shutdown returns.
          process.kill(child.pid!, "SIGTERM");
          const timeout = setTimeout(() => child.kill("SIGKILL"), 10_000);
          const code = await exited;
          clearTimeout(timeout);
          return code;
        },
      });
    });
  });
}

async function stopCleanly(server: Server, what: string): Promise<void> {
  const code = await server.stop();
  if (code !== 0)
    throw new Error(
      `${what}: aria serve under Deno exited ${code} after SIGTERM\n${server.stderr()}`,
    );
}

/** Every message from the oldest, through dist/aria (or `cli`), until caught up. */
function readAll(url: string, filter = "**", cli = [ARIA_BIN]): Promise<string> {
  return ok([...cli, "sub", "--url", url, filter, "--from", "earliest", "--until-caught-up"]);
}

function same(what: string, expected: string, actual: string): void {
  if (actual === expected) return;
  const left = expected.split("\n");
  const right = actual.split("\n");
  const index = left.findIndex((line, i) => line !== right[i]);
  throw new Error(
    `${what}: output differs from the first read at line ${index + 1} (${left.length - 1} vs ${right.length - 1} lines)\nexpected: ${left[index]?.slice(0, 200)}\nactual:   ${right[index]?.slice(0, 200)}`,
  );
}

/** An MQTT packet: `header`, the remaining length, `body`. */
function mqttPacket(header: number, body: number[]): Uint8Array {
  const length: number[] = [];
  let rest = body.length;
  do {
    length.push((rest % 128) | (rest >= 128 ? 0x80 : 0));
    rest = Math.floor(rest / 128);
  } while (rest > 0);
  return new Uint8Array([header, ...length, ...body]);
}

function mqttString(text: string): number[] {
  const bytes = [...new TextEncoder().encode(text)];
  return [bytes.length >> 8, bytes.length & 0xff, ...bytes];
}

/**
 * A raw MQTT 3.1.1 client over the WebSocket of `server.admin`/mqtt: CONNECT, SUBSCRIBE ws/# at
 * QoS 1, PUBLISH ws/x at QoS 1; it must get CONNACK, SUBACK, PUBACK and its own message back
 * (each packet in its own binary frame), then dist/aria must read the message from the log.
 */
async function mqttOverWebSocket(server: Server): Promise<void> {
  // A request with an Upgrade but no WebSocket handshake is refused (400), not a server error.
  const { hostname, port } = new URL(server.admin);
  const answer = await new Promise<string>((resolve, reject) => {
    const raw = connect(Number(port), hostname, () =>
      raw.write(
        `GET /mqtt HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\n` +
          "Sec-WebSocket-Protocol: mqtt\r\n\r\n",
      ),
    );
    let text = "";
    raw.setEncoding("utf8");
    raw.on("data", (chunk: string) => {
      text += chunk;
      if (text.includes("\r\n")) {
        raw.destroy();
        resolve(text.split("\r\n")[0]);
      }
    });
    raw.on("error", reject);
  });
  if (answer !== "HTTP/1.1 400 Bad Request")
    throw new Error(`an Upgrade without a handshake got "${answer}", not 400`);
  const payload = [0, 1, 2, 255];
  const socket = new WebSocket(`${server.admin.replace(/^http/, "ws")}/mqtt`, "mqtt");
  socket.binaryType = "arraybuffer";
  const got: number[] = [];
  let delivered: number[] | null = null;
  let buffered: number[] = [];
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`MQTT over WebSocket: got packet types ${got.join(",")} only`)),
      STEP_TIMEOUT_MS,
    );
    socket.onerror = () => reject(new Error("MQTT over WebSocket: the socket failed"));
    socket.onopen = () => {
      socket.send(
        mqttPacket(0x10, [0, 4, 0x4d, 0x51, 0x54, 0x54, 4, 2, 0, 60, ...mqttString("deno-ws")]),
      );
      socket.send(mqttPacket(0x82, [0, 1, ...mqttString("ws/#"), 1]));
    };
    socket.onmessage = (event: MessageEvent) => {
      buffered = buffered.concat([...new Uint8Array(event.data as ArrayBuffer)]);
      // Packets here are short: a one-byte remaining length.
      while (buffered.length >= 2 && buffered.length >= 2 + buffered[1]) {
        const packet = buffered.slice(0, 2 + buffered[1]);
        buffered = buffered.slice(packet.length);
        const type = packet[0] >> 4;
        got.push(type);
        if (type === 9) socket.send(mqttPacket(0x32, [...mqttString("ws/x"), 0, 7, ...payload]));
        if (type === 3) {
          const topicEnd = 4 + ((packet[2] << 8) | packet[3]);
          delivered = packet.slice(topicEnd + ((packet[0] >> 1) & 3 ? 2 : 0));
          if ((packet[0] >> 1) & 3)
            socket.send(mqttPacket(0x40, packet.slice(topicEnd, topicEnd + 2)));
        }
        if (got.includes(2) && got.includes(4) && delivered !== null) {
          clearTimeout(timer);
          resolve();
        }
      }
    };
  });
  try {
    await done;
  } finally {
    socket.close();
  }
  if (JSON.stringify(delivered) !== JSON.stringify(payload))
    throw new Error(`MQTT over WebSocket delivered ${JSON.stringify(delivered)}`);
  const read = await readAll(server.url, "ws/**");
  if (!read.includes('"topic":"ws/x"'))
    throw new Error(`dist/aria did not read the message published over WebSocket:\n${read}`);
}

async function main(): Promise<void> {
  if (!existsSync(ARIA_BIN))
    throw new Error(`${ARIA_BIN} is missing: build it with 'npm run build' (or set ARIA_BIN)`);
  const dataDir = mkdtempSync(join(tmpdir(), "aria-deno-smoke-"));
  let server: Server | null = null;
  try {
    server = await startServer(dataDir);
    log(`aria serve under Deno listens on ${server.url}`);
    const total = TOPICS.length * MESSAGES_PER_TOPIC + 1;
    const live = ok([ARIA_BIN, "sub", "--url", server.url, "**", "--limit", String(total)]);
    await new Promise((resolve) => setTimeout(resolve, 300)); // let the live subscription start
    for (const topic of TOPICS) {
      const lines = Array.from(
        { length: MESSAGES_PER_TOPIC },
        (_, i) => `${topic} #${i} ${"x".repeat(i % 97)}`,
      );
      await ok([ARIA_BIN, "pub", "--url", server.url, topic], `${lines.join("\n")}\n`);
    }
    await ok(
      [ARIA_BIN, "pub", "--url", server.url, "ops/big"],
      `${"b".repeat(BIG_PAYLOAD_BYTES)}\n`,
    );
    log(`dist/aria published ${total} messages`);

    const first = await readAll(server.url);
    const seqs = first
      .trimEnd()
      .split("\n")
      .map((line) => (JSON.parse(line) as { seq: number }).seq);
    if (seqs.length !== total || seqs.some((seq, i) => seq !== i + 1))
      throw new Error(`the first read has ${seqs.length} messages, not seqs 1..${total}`);
    same("the live subscriber (dist/aria)", first, await live);
    same("sub with the Deno CLI", first, await readAll(server.url, "**", DENO_ARIA));
    log("live, replayed (dist/aria) and replayed (Deno CLI) streams are identical");

    await stopCleanly(server, "first stop");
    server = await startServer(dataDir);
    same("after a restart", first, await readAll(server.url));
    log("identical after SIGTERM and a restart");

    const online = await ok([...DENO_ARIA, "split", "--data-dir", dataDir, "--workers", "2"]);
    if (!online.includes("running server") && !online.startsWith("nothing"))
      throw new Error(`split with the server running:\n${online}`);
    same("after a split the running server switched", first, await readAll(server.url));
    log(`split under Deno with the server running: ${online.split("\n")[0]}`);

    // More messages, through the Deno CLI (stdin and the Deno dialer), so the offline split below
    // has new segments to rewrite.
    const more = Array.from({ length: 1000 }, (_, i) => `late #${i}`);
    await ok(
      [...DENO_ARIA, "pub", "--url", server.url, "app/orders/created"],
      `${more.join("\n")}\n`,
    );
    const second = await readAll(server.url);
    if (
      !second.startsWith(first) ||
      second.split("\n").length !== first.split("\n").length + more.length
    )
      throw new Error("the second read is not the first plus the late messages");
    await stopCleanly(server, "second stop");
    const offline = await ok([...DENO_ARIA, "split", "--data-dir", dataDir, "--workers", "2"]);
    if (!offline.includes("split itself")) throw new Error(`offline split:\n${offline}`);
    server = await startServer(dataDir);
    same("after an offline split and a restart", second, await readAll(server.url));
    const subtree = second
      .split("\n")
      .filter((line) => line.includes('"topic":"app/orders/'))
      .join("\n");
    same("subtree app/orders/**", `${subtree}\n`, await readAll(server.url, "app/orders/**"));
    log(
      `offline split under Deno: ${offline.split("\n")[0]}; identical after a restart, subtree too`,
    );
    await mqttOverWebSocket(server);
    log("MQTT over WebSocket: subscribed, published at QoS 1, got it back; dist/aria read it");
    await stopCleanly(server, "last stop");
    server = null;
    log("ok");
  } finally {
    if (server !== null) server.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    console.error(`deno smoke: FAILED: ${error.message}`);
    process.exit(1);
  },
);
