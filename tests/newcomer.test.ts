/**
 * The first ten minutes on a fresh clone, as the README promises them: `npm ci && npm start` runs
 * a server that a supervisor's SIGTERM (or a Ctrl-C's SIGINT) to npm stops cleanly; `npm test`
 * sets up the programs its tests drive (scripts/test_setup.ts) and `.ci/run` is nothing more than
 * the README's two commands, so a green CI proves the README; the tour's commands run verbatim
 * (`npx aria …`, the binary that `npm ci`'s prepare step built); `aria --version` names the commit;
 * tests leave the tracked tree alone.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ARIA_VERSION } from "../src/cli/mod.ts";
import { SYSTEM_REQUIREMENTS } from "../scripts/test_setup.ts";
import { CHROMIUM_PATH } from "./fixtures/browser_chromium.ts";
import {
  cleanupAll,
  ensureBinary,
  makeTempDir,
  ROOT,
  runAria,
  StreamText,
  waitFor,
} from "./fixtures/e2e_server.ts";

afterAll(cleanupAll);

const README = readFileSync(join(ROOT, "README.md"), "utf8");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  version: string;
  bin: Record<string, string>;
  scripts: Record<string, string>;
};

/** The pid the data directory's LOCK names, or null when there is no LOCK. */
function lockHolder(dataDir: string): number | null {
  try {
    return (JSON.parse(readFileSync(join(dataDir, "LOCK"), "utf8")) as { pid: number }).pid;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`npm start: ${signal} to npm stops the server cleanly (port and data-directory lock released)`, async () => {
    const dataDir = makeTempDir("aria-npm-start-");
    const npm = Bun.spawn(
      ["npm", "start", "--silent", "--", "--port", "0", "--admin-port", "0", "--data-dir", dataDir],
      { cwd: ROOT, stdin: "ignore", stdout: "pipe", stderr: "pipe" },
    );
    const output = new StreamText(npm.stdout);
    let serverPid: number | null = null;
    try {
      await waitFor(
        () => /^tcp:\/\/\S+\nhttp:\/\/\S+\n/.test(output.text),
        "npm start printing the server's URLs",
        30_000,
      );
      serverPid = lockHolder(dataDir);
      expect(serverPid).not.toBeNull();
      expect(serverPid).not.toBe(npm.pid);
      const adminUrl = output.text.split("\n")[1]!;
      expect((await fetch(`${adminUrl}/healthz`)).status).toBe(200);

      process.kill(npm.pid, signal);
      await waitFor(() => npm.exitCode !== null, "npm to exit", 10_000);
      await waitFor(() => !alive(serverPid!), "the server process to exit after npm did", 10_000);
      expect(existsSync(join(dataDir, "LOCK"))).toBe(false);
      expect(
        await fetch(`${adminUrl}/healthz`).then(
          () => "answered",
          () => "refused",
        ),
      ).toBe("refused");
    } finally {
      if (serverPid !== null && alive(serverPid)) process.kill(serverPid, "SIGKILL");
      if (npm.exitCode === null) npm.kill("SIGKILL");
      await output.done;
    }
  }, 60_000);
}

test("aria --version and aria version: the version, the commit the binary was built from, the runtime", async () => {
  const binary = await ensureBinary();
  expect(PACKAGE.bin.aria).toBe("dist/aria");
  expect(ARIA_VERSION).toBe(PACKAGE.version);
  const head = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { cwd: ROOT })
    .stdout.toString()
    .trim();
  const flag = await runAria(["--version"]);
  const word = await runAria(["version"]);
  expect(flag.exitCode).toBe(0);
  expect(word.stdout).toBe(flag.stdout);
  expect(flag.stdout).toMatch(
    new RegExp(
      `^aria ${PACKAGE.version.replaceAll(".", "\\.")} \\(commit ${head}(-dirty)?, bun ${Bun.version.replaceAll(".", "\\.")}\\)\\n$`,
    ),
  );
  expect(binary).toBeTruthy();
});

/** The commands of the README's `sh` blocks that a reader types (`$ …` lines, or every line of a block without prompts). */
function readmeCommands(): string[] {
  const commands: string[] = [];
  for (const block of README.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const lines = block[1]!.split("\n").filter((line) => line.trim() !== "");
    const prompted = lines.filter((line) => line.startsWith("$ "));
    for (const line of prompted.length > 0 ? prompted.map((line) => line.slice(2)) : lines)
      commands.push(line.replace(/\s+#.*$/, ""));
  }
  return commands;
}

test("the README's tour runs verbatim after the two commands: every aria command goes through npx aria, and each subcommand answers", async () => {
  await ensureBinary();
  const commands = readmeCommands();
  expect(commands.length).toBeGreaterThan(10);
  const bare = commands.filter((command) => /(^|[|;&]\s*)aria\s/.test(command));
  expect(bare).toEqual([]);
  const subcommands = new Set<string>();
  for (const command of commands)
    for (const match of command.matchAll(/npx aria (\w+)/g)) subcommands.add(match[1]!);
  expect([...subcommands].sort()).toEqual(
    expect.arrayContaining(["pub", "serve", "simulate", "split", "sub"]),
  );
  for (const subcommand of subcommands) {
    const npx = Bun.spawnSync(["npx", "--no-install", "aria", subcommand, "--help"], { cwd: ROOT });
    expect({ subcommand, exitCode: npx.exitCode }).toEqual({ subcommand, exitCode: 0 });
  }
  // npm ci builds the binary (prepare), so npx aria has something to run on a fresh clone.
  expect(PACKAGE.scripts.prepare).toContain("scripts/build.ts");
}, 60_000);

test("the README's test command sets up what its tests need, and .ci/run is only the README's two steps", () => {
  expect(README).toContain("npm ci && npm start");
  expect(PACKAGE.scripts.test).toStartWith("bun scripts/test_setup.ts && ");
  const ciSteps = readFileSync(join(ROOT, ".ci", "run"), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"));
  expect(ciSteps.filter((line) => !/^(set |cd |export CI=)/.test(line))).toEqual([
    "npm ci --no-audit --no-fund",
    "npm test",
  ]);
  // The browser the browser tests launch is one the set-up installs.
  expect(SYSTEM_REQUIREMENTS.map((requirement) => requirement.path)).toContain(CHROMIUM_PATH);
  // A supervisor's signal to npm must reach the server: the start script replaces npm's shell.
  expect(PACKAGE.scripts.start).toStartWith("exec ");
});

test("tests write only to temporary directories: no test file names a tracked file of docs/ as an output", () => {
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (
        entry.name.endsWith(".ts") &&
        /\$\{ROOT\}\/docs\/|join\(ROOT, "docs"/.test(readFileSync(path, "utf8"))
      )
        offenders.push(path);
    }
  };
  walk(join(ROOT, "tests"));
  expect(offenders).toEqual([]);
});

test("the test set-up plans apt-get for exactly what is missing, once each package", async () => {
  const { installCommands, missingRequirements } = await import("../scripts/test_setup.ts");
  const requirements = [
    { path: "/usr/bin/a", debianPackage: "pkg-a", neededBy: "x" },
    { path: "/usr/bin/b", debianPackage: "pkg-b", neededBy: "y" },
    { path: "/usr/bin/b2", debianPackage: "pkg-b", neededBy: "z" },
  ];
  expect(installCommands(missingRequirements(requirements, () => true))).toEqual([]);
  expect(
    installCommands(missingRequirements(requirements, (path) => path === "/usr/bin/a")),
  ).toEqual([
    ["apt-get", "update", "-qq"],
    ["apt-get", "install", "-y", "-qq", "pkg-b"],
  ]);
});

test("npm test fails on unformatted or lint-failing code: biome ci runs first, with the project's configuration", () => {
  expect(PACKAGE.scripts.test).toContain(" && biome ci . && ");
  const dir = makeTempDir("aria-biome-");
  const biome = join(ROOT, "node_modules", ".bin", "biome");
  const config = join(ROOT, "biome.jsonc");
  const check = (name: string, source: string) => {
    writeFileSync(join(dir, name), source);
    return Bun.spawnSync([biome, "ci", "--config-path", config, "--vcs-enabled=false", name], {
      cwd: dir,
    }).exitCode;
  };
  expect(check("tidy.ts", 'export const tidy = "yes";\n')).toBe(0);
  expect(check("untidy.ts", "export const untidy   =  'no'\n")).not.toBe(0);
  expect(
    check(
      "long.ts",
      `export const long = [${Array.from({ length: 30 }, (_, i) => `"item${i}"`).join(", ")}];\n`,
    ),
  ).not.toBe(0);
  expect(
    check(
      "lint.ts",
      "export function f(items: number[]): void {\n  items.forEach((item) => console.log(item));\n  let x;\n  x = 1;\n  console.log(x);\n}\n",
    ),
  ).not.toBe(0);
});
