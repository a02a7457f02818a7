/**
 * What signing in as a user costs a connection: the built binary serves twice (with a users file,
 * and without), and a client connects over and over (HELLO → WELCOME, then close), alternating
 * between the two. The first sign-in runs the KDF (scrypt); later ones find the token
 * remembered. Prints the first time and the medians.
 *
 *   npx bun bench/users_sign_in.ts [--bin dist/aria] [--connects 41]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "../src/server/connect.ts";

const { values } = parseArgs({
  options: { bin: { type: "string" }, connects: { type: "string" } },
});
const BIN = values.bin ?? "dist/aria";
const CONNECTS = Number(values.connects ?? 41);
const dir = mkdtempSync(join(tmpdir(), "aria-users-sign-in-"));

async function run(args: string[]): Promise<string> {
  const child = Bun.spawn([BIN, ...args], { stdin: "ignore", stdout: "pipe", stderr: "ignore" });
  const out = await new Response(child.stdout).text();
  if ((await child.exited) !== 0) throw new Error(`${BIN} ${args.join(" ")} failed`);
  return out.trim();
}

/** Starts `aria serve` with `extra` flags; its URL and a stop. */
async function serve(name: string, extra: string[]) {
  const child = Bun.spawn(
    [BIN, "serve", "--port", "0", "--admin-port", "0", "--fsync", "never"].concat(
      ["--data-dir", join(dir, name)],
      extra,
    ),
    { stdin: "ignore", stdout: "pipe", stderr: "ignore" },
  );
  const reader = child.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`aria serve (${name}) ended before printing its URL`);
    text += new TextDecoder().decode(value);
  }
  return {
    url: text.split("\n")[0],
    stop: async () => {
      child.kill("SIGTERM");
      await child.exited;
    },
  };
}

async function connectMs(url: string, authToken?: string): Promise<number> {
  const started = performance.now();
  const client = await connect(url, { clientName: "sign-in", reconnect: false, authToken });
  const ms = performance.now() - started;
  await client.close();
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const usersFile = join(dir, "users.json");
const token = await run(["users", "add", "bench", "--users", usersFile, "--publish", "**"]);
const withUsers = await serve("users", ["--users", usersFile]);
const without = await serve("plain", []);
try {
  await connectMs(without.url); // the client's own first-connect costs, outside the figures
  const first = await connectMs(withUsers.url, token);
  const remembered: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < CONNECTS; i++) {
    remembered.push(await connectMs(withUsers.url, token));
    plain.push(await connectMs(without.url));
  }
  console.log(
    `first sign-in ${first.toFixed(1)} ms (scrypt); then median ${median(remembered).toFixed(2)} ms with the token remembered, ${median(plain).toFixed(2)} ms to a server without users (${CONNECTS} connects each, alternated)`,
  );
} finally {
  await withUsers.stop();
  await without.stop();
  rmSync(dir, { recursive: true, force: true });
}
