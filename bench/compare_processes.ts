/**
 * compare_processes: the server processes of bench/nats_compare.ts and the machine around them.
 * Installs Debian's `nats-server` when it is missing (apt-get, as root), starts it with JetStream
 * on 127.0.0.1 on a free port with a given store directory, starts the built `aria serve` on a
 * data directory with a given tip, evicts a directory's files from the page cache (as `aria bench`
 * does, src/server/bench_env.ts) and times a raw `dd iflag=direct` read of them.
 *
 * Not here: clients, streams, measurements. Invariant: every process started here is tracked by
 * PID until its stop() has seen it exit; stopAllStarted() ends the ones left (a failed run).
 */
import { createServer } from "node:net";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/** A server process this module started. */
export interface ServerProcess {
  readonly pid: number;
  /** nats://127.0.0.1:PORT or tcp://127.0.0.1:PORT. */
  readonly url: string;
  /** Aria's admin app (http://127.0.0.1:PORT), or null. */
  readonly adminUrl: string | null;
  /** SIGTERM by PID, SIGKILL after 10 s; resolves once the process has exited. */
  stop(): Promise<void>;
}

const started = new Map<number, ServerProcess>();

/** Stops every server this module started and has not stopped yet (the run's cleanup). */
export async function stopAllStarted(): Promise<void> {
  await Promise.all([...started.values()].map((server) => server.stop()));
}

/** The path of `nats-server`, installing Debian's package first when there is none. */
export async function ensureNatsServer(log: (line: string) => void): Promise<string> {
  const found = Bun.which("nats-server") ?? Bun.which("nats-server", { PATH: "/usr/sbin" });
  if (found !== null) return found;
  log("nats-server is missing: apt-get update && apt-get install -y nats-server (Debian's)");
  for (const command of [
    ["apt-get", "update", "-qq"],
    ["apt-get", "install", "-y", "-qq", "nats-server"],
  ]) {
    const child = Bun.spawn(command, {
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    const stderr = await new Response(child.stderr).text();
    if ((await child.exited) !== 0)
      throw new Error(`${command.join(" ")} failed (exit ${child.exitCode}): ${stderr.trim()}`);
  }
  const installed = Bun.which("nats-server") ?? Bun.which("nats-server", { PATH: "/usr/sbin" });
  if (installed === null) throw new Error("apt-get installed nats-server but it is not on PATH");
  return installed;
}

/** `nats-server --version`'s line (e.g. "nats-server: v2.9.10"). */
export async function natsServerVersion(binary: string): Promise<string> {
  const child = Bun.spawn([binary, "--version"], { stdout: "pipe", stderr: "pipe" });
  const text = (await new Response(child.stdout).text()).trim();
  await child.exited;
  return text;
}

/** A TCP port free on 127.0.0.1 right now (bound to port 0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts nats-server with JetStream on 127.0.0.1:`port` (a free one when 0), its store in
 * `storeDir`; resolves once it accepts TCP connections.
 */
export async function startNats(
  binary: string,
  storeDir: string,
  port = 0,
): Promise<ServerProcess> {
  const chosen = port === 0 ? await freePort() : port;
  const child = Bun.spawn(
    [binary, "-js", "-a", "127.0.0.1", "-p", String(chosen), "-sd", storeDir, "-m", "0"],
    { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
  );
  const stderr = collect(child.stderr);
  const server = track(child, `nats://127.0.0.1:${chosen}`, null);
  const deadline = performance.now() + 30_000;
  while (!/Server is ready/.test(stderr.text())) {
    if (child.exitCode !== null || performance.now() > deadline) {
      await server.stop();
      throw new Error(`nats-server did not start: ${stderr.text()}`);
    }
    await Bun.sleep(5);
  }
  return server;
}

/** Starts `aria serve` (the built binary) on `dataDir` with a tip of `tipBytes`, fsync interval. */
export async function startAria(
  binary: string,
  dataDir: string,
  tipBytes: number,
): Promise<ServerProcess> {
  const child = Bun.spawn(
    [
      binary,
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
      String(tipBytes),
      "--fsync",
      "interval",
      "--log-level",
      "warn",
    ],
    { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const stdout = collect(child.stdout);
  const stderr = collect(child.stderr);
  const deadline = performance.now() + 60_000;
  while (stdout.text().split("\n").length < 3) {
    if (child.exitCode !== null || performance.now() > deadline) {
      track(child, "", null);
      await started.get(child.pid)?.stop();
      throw new Error(`aria serve printed no URLs: ${stdout.text()} ${stderr.text()}`);
    }
    await Bun.sleep(5);
  }
  const [url, adminUrl] = stdout.text().split("\n");
  return track(child, url, adminUrl);
}

function track(child: Bun.Subprocess, url: string, adminUrl: string | null): ServerProcess {
  const server: ServerProcess = {
    pid: child.pid,
    url,
    adminUrl,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid, "SIGTERM");
        const timer = setTimeout(() => {
          if (child.exitCode === null && child.signalCode === null)
            process.kill(child.pid, "SIGKILL");
        }, 10_000);
        await child.exited;
        clearTimeout(timer);
      }
      started.delete(child.pid);
    },
  };
  started.set(child.pid, server);
  return server;
}

function collect(stream: ReadableStream<Uint8Array> | number | undefined): { text(): string } {
  let text = "";
  if (stream instanceof ReadableStream) {
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>)
        text += decoder.decode(chunk, { stream: true });
    })();
  }
  return { text: () => text };
}

/** Every regular file under `dir`, with its size. */
export async function filesUnder(dir: string): Promise<{ path: string; bytes: number }[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files: { path: string; bytes: number }[] = [];
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.push({ path, bytes: (await stat(path)).size });
  }
  return files;
}

async function run(command: string[]): Promise<void> {
  const child = Bun.spawn(command, { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const stderr = await new Response(child.stderr).text();
  if ((await child.exited) !== 0)
    throw new Error(`${command.join(" ")} failed (exit ${child.exitCode}): ${stderr.trim()}`);
}

/**
 * Evicts every file under `dir` from the page cache (posix_fadvise DONTNEED through
 * `dd iflag=nocache count=0`, as src/server/bench_env.ts does). Dirty pages stay: `sync` first.
 */
export async function dropPageCache(dir: string): Promise<void> {
  await run(["sync"]);
  for (const file of await filesUnder(dir))
    await run(["dd", `if=${file.path}`, "iflag=nocache", "count=0", "status=none"]);
}

/** Reads every file under `dir` through the page cache, so the next reads find it there. */
export async function warmPageCache(dir: string): Promise<void> {
  for (const file of await filesUnder(dir))
    await run(["dd", `if=${file.path}`, "of=/dev/null", "bs=1M", "status=none"]);
}

/**
 * Reads every file under `dir` with `dd iflag=direct bs=1M` (past the page cache, from the
 * device) and returns the bytes and the time dd itself reported for them (its start-up per file
 * is not counted): the machine's raw read speed of those bytes.
 */
export async function rawRead(dir: string): Promise<{ bytes: number; wallMs: number }> {
  let bytes = 0;
  let wallMs = 0;
  for (const file of await filesUnder(dir)) {
    if (file.bytes === 0) continue;
    const child = Bun.spawn(["dd", `if=${file.path}`, "of=/dev/null", "bs=1M", "iflag=direct"], {
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
    });
    const stderr = await new Response(child.stderr).text();
    if ((await child.exited) !== 0) throw new Error(`dd of ${file.path} failed: ${stderr.trim()}`);
    // "N bytes (…) copied, S s, R MB/s"
    const match = /^(\d+) bytes.* copied, ([\d.e+-]+) s,/m.exec(stderr);
    if (match === null) throw new Error(`dd printed no summary: ${stderr.trim()}`);
    bytes += Number(match[1]);
    wallMs += Number(match[2]) * 1000;
  }
  return { bytes, wallMs };
}
