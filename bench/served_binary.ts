/**
 * served_binary: starts the built `aria serve` for a benchmark script (port 0, a given data
 * directory, `--fsync never`), with the server's own event-loop pauses logged
 * (ARIA_DEBUG_EVENT_LOOP_LAG_MS=1: `aria: event loop paused X ms at T`) so a phase can ask for
 * the largest pause within its time; the server's RSS from /proc; a connection that PINGs it.
 * Benchmarks only.
 */
import { readFileSync } from "node:fs";
import { PROTOCOL_VERSION } from "../src/constants.ts";
import { encodeFrame, FrameDecoder, FrameWriter } from "../src/protocol/mod.ts";

/** How often the pinger PINGs. */
const PING_INTERVAL_MS = 20;

/** A running server: its pid, URLs, the largest pause it logged in a time window, and stop. */
export interface ServedBinary {
  pid: number;
  tcpUrl: string;
  adminUrl: string;
  /** The largest pause the server logged between `fromMs` and `toMs` (Date.now() times). */
  pauseMaxMs(fromMs: number, toMs: number): number;
  /** SIGTERM (kill -9 after 10 s); prints what the server said on stderr besides its pauses. */
  stop(): Promise<void>;
}

/** Pauses the server logged: `aria: event loop paused X ms at T`. */
const PAUSE_LINE = /^aria: event loop paused ([\d.]+) ms at (\d+)$/gm;

/** Starts `bin` (a path, or a command such as "bun main.ts") serving `dataDir` with a tip of `tipBytes`. */
export async function startServedBinary(
  bin: string,
  dataDir: string,
  tipBytes: string,
  extraArgs: string[] = [],
): Promise<ServedBinary> {
  const child = Bun.spawn(
    [
      ...bin.split(" "),
      "serve",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--admin-port",
      "0",
      "--data-dir",
      dataDir,
      "--tip-bytes",
      tipBytes,
      "--fsync",
      "never",
      ...extraArgs,
    ],
    {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ARIA_DEBUG_EVENT_LOOP_LAG_MS: "1" },
    },
  );
  let stderr = "";
  const stderrDone = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr as unknown as AsyncIterable<Uint8Array>)
      stderr += decoder.decode(chunk, { stream: true });
  })();
  const reader = child.stdout.getReader();
  let text = "";
  const deadline = Date.now() + 15_000;
  while (text.split("\n").length < 3) {
    if (Date.now() > deadline) {
      child.kill(9);
      throw new Error(`aria serve printed no URLs: ${text}`);
    }
    const { value, done } = await reader.read();
    if (done) throw new Error(`aria serve exited: ${text}${stderr}`);
    text += new TextDecoder().decode(value);
  }
  const [tcpUrl, adminUrl] = text.split("\n");
  return {
    pid: child.pid,
    tcpUrl,
    adminUrl,
    pauseMaxMs: (fromMs, toMs) => {
      let max = 0;
      for (const match of stderr.matchAll(PAUSE_LINE)) {
        const at = Number(match[2]);
        if (at >= fromMs && at <= toMs) max = Math.max(max, Number(match[1]));
      }
      return max;
    },
    stop: async () => {
      child.kill("SIGTERM");
      const exited = await Promise.race([child.exited, Bun.sleep(10_000).then(() => null)]);
      if (exited === null) {
        child.kill(9);
        await child.exited;
      }
      await stderrDone;
      const other = stderr.replace(PAUSE_LINE, "").trim();
      if (other !== "") console.error(other);
    },
  };
}

/** User + system CPU of process `pid` so far, in ms (/proc/PID/stat; USER_HZ is 100 on Linux). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(")")[1].trim().split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** The resident set of process `pid` in bytes (0 when /proc does not say). */
export function rssBytes(pid: number): number {
  return statusBytes(pid, "VmRSS");
}

/**
 * The anonymous part of `pid`'s resident set in bytes: the server's own memory, without the
 * page-cache pages of files it maps (RssFile), which the kernel may take back at any time.
 */
export function rssAnonBytes(pid: number): number {
  return statusBytes(pid, "RssAnon");
}

function statusBytes(pid: number, field: string): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status);
  return match === null ? 0 : Number(match[1]) * 1024;
}

/** The bytes of `frames`, encoded one after the other. */
export function frameBytes(...frames: Parameters<typeof encodeFrame>[1][]): Uint8Array {
  const writer = new FrameWriter();
  for (const frame of frames) encodeFrame(writer, frame);
  return writer.bytes().slice();
}

/** A connection that PINGs every PING_INTERVAL_MS and keeps the slowest answer. */
export async function openPinger(server: ServedBinary) {
  const [host, port] = server.tcpUrl.slice("tcp://".length).split(":");
  const decoder = new FrameDecoder();
  const sentAt = new Map<number, number>();
  const state = { slowestMs: 0, token: 0 };
  const socket = await Bun.connect({
    hostname: host,
    port: Number(port),
    socket: {
      data(_socket, bytes) {
        decoder.push(bytes);
        for (let frame = decoder.next(); frame !== null; frame = decoder.next()) {
          if (frame.kind !== "pong") continue;
          const at = sentAt.get(frame.token);
          if (at === undefined) continue;
          sentAt.delete(frame.token);
          state.slowestMs = Math.max(state.slowestMs, performance.now() - at);
        }
      },
    },
  });
  socket.write(
    frameBytes({ kind: "hello", version: PROTOCOL_VERSION, clientName: "pinger", authToken: null }),
  );
  const timer = setInterval(() => {
    // A PING not answered yet counts as late as it is.
    for (const at of sentAt.values())
      state.slowestMs = Math.max(state.slowestMs, performance.now() - at);
    const token = ++state.token;
    sentAt.set(token, performance.now());
    socket.write(frameBytes({ kind: "ping", token }));
  }, PING_INTERVAL_MS);
  return {
    /** The slowest PING answer since the previous call (ms). */
    takeSlowestMs(): number {
      for (const at of sentAt.values())
        state.slowestMs = Math.max(state.slowestMs, performance.now() - at);
      const slowest = state.slowestMs;
      state.slowestMs = 0;
      return slowest;
    },
    close(): void {
      clearInterval(timer);
      socket.end();
    },
  };
}
