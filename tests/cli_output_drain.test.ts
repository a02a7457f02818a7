/**
 * End to end: a command's whole output reaches a pipe before the process exits. Bun keeps what a
 * pipe did not take at once in the stream's buffer and `process.exit` dropped it: `aria split
 * plan --json` of a 100,000-topic volume table (about 9 MB) arrived through `| wc -c` as 64 or
 * 128 KiB, while redirected to a file it was whole. The exit now waits for stdout and stderr to
 * drain (src/runtime/process.ts). Also under Deno, whose exit path is the same Runtime.exit.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanupAll, ensureBinary, makeTempDir, ROOT } from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const TOPICS = 100_000;
const RUNS = 20;

/** A volume table of TOPICS topics over 300 partitions, sizes from a fixed sequence. */
function writeVolumeTable(path: string): void {
  const rows = ["topic,bytes,messages"];
  let state = 12345;
  for (let i = 0; i < TOPICS; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    rows.push(`app/p${i % 300}/t${i},${1 + (state % 1_000_000)},${1 + (state % 997)}`);
  }
  writeFileSync(path, `${rows.join("\n")}\n`);
}

/** Runs a shell line; resolves to its stdout, trimmed. */
async function sh(script: string, args: string[]): Promise<string> {
  const child = Bun.spawn(["bash", "-c", script, ...args], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (exitCode !== 0) throw new Error(`bash -c ${script} exited ${exitCode}: ${stderr}`);
  return stdout.trim();
}

test(`split plan --json of ${TOPICS} topics through a pipe, ${RUNS} times: every byte arrives, as in a file`, async () => {
  const binary = await ensureBinary();
  const dir = makeTempDir("aria-e2e-drain-");
  const csv = join(dir, "volumes.csv");
  writeVolumeTable(csv);
  const plan = ["split", "plan", "--volumes", csv, "--algorithm", "adaptive", "--json"];
  const file = join(dir, "plan.json");
  await sh(`"$0" "$@" > "${file}"`, [binary, ...plan]);
  const wholeBytes = statSync(file).size;
  expect(wholeBytes).toBeGreaterThan(1024 * 1024); // well past a pipe's 64 KiB
  JSON.parse(await Bun.file(file).text());

  const counts: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    // Every other reader starts late, so the pipe is full when the plan is printed.
    const reader = run % 2 === 0 ? "wc -c" : "(sleep 0.2; wc -c)";
    counts.push(Number(await sh(`"$0" "$@" | ${reader}`, [binary, ...plan])));
  }
  expect(counts).toEqual(Array(RUNS).fill(wholeBytes));
}, 120_000);

test("under Deno too: the plan through a pipe is whole", async () => {
  const deno = join(ROOT, "node_modules", ".bin", "deno");
  if (!existsSync(deno))
    throw new Error(
      `${deno} is missing: Deno comes from the npm package "deno" (a devDependency); run 'npm ci'`,
    );
  const dir = makeTempDir("aria-e2e-drain-deno-");
  const csv = join(dir, "volumes.csv");
  writeVolumeTable(csv);
  const plan = ["split", "plan", "--volumes", csv, "--algorithm", "adaptive", "--json"];
  const main = join(ROOT, "main.ts");
  const config = join(ROOT, "deno.json");
  const file = join(dir, "plan.json");
  await sh(`"$0" run --allow-all --no-check --config "${config}" "${main}" "$@" > "${file}"`, [
    deno,
    ...plan,
  ]);
  const wholeBytes = statSync(file).size;
  expect(wholeBytes).toBeGreaterThan(1024 * 1024);
  const piped = await sh(
    `"$0" run --allow-all --no-check --config "${config}" "${main}" "$@" | (sleep 0.2; wc -c)`,
    [deno, ...plan],
  );
  expect(Number(piped)).toBe(wholeBytes);
}, 120_000);
