/**
 * The first step of `npm test`: makes sure the machine has the programs the tests drive for real,
 * installing Debian's packages that are missing (never a browser or tool download of a test tool's
 * own). With it, `npm ci && npm test` is all a fresh machine with Node.js and npm needs, and CI
 * (`.ci/run`) proves exactly that: it runs nothing else.
 *
 * A program already present is left alone. A missing one is installed with apt-get when this
 * process may (root, apt-get on the PATH); otherwise the script says which package to install and
 * exits 1, so the test run fails with the fix instead of a browser test failing later.
 */
import { existsSync } from "node:fs";

/** A program a test needs, and the Debian package that brings it. */
export interface SystemRequirement {
  /** The program's absolute path (as the tests use it). */
  path: string;
  /** The Debian package that installs `path`. */
  debianPackage: string;
  /** The tests that need it, for the messages. */
  neededBy: string;
}

/** Every program the tests drive that npm cannot bring. */
export const SYSTEM_REQUIREMENTS: readonly SystemRequirement[] = [
  {
    path: "/usr/bin/chromium",
    debianPackage: "chromium",
    neededBy: "tests/browser.test.ts (the web UI in a real browser, driven by playwright-core)",
  },
  {
    path: "/usr/bin/openssl",
    debianPackage: "openssl",
    neededBy:
      "tests/tls.test.ts and src/runtime/tls_transport.test.ts (test certificates made at run " +
      "time; openssl s_client as a third-party TLS client)",
  },
  {
    path: "/usr/sbin/mosquitto",
    debianPackage: "mosquitto",
    neededBy:
      "tests/mosquitto_suite.test.ts (mosquitto's own broker tests, checked against the reference " +
      "broker) and bench/mqtt_vs_mosquitto.ts (the side-by-side benchmark)",
  },
  {
    path: "/usr/bin/mosquitto_pub",
    debianPackage: "mosquitto-clients",
    neededBy:
      "tests/mqtt_clients.test.ts (mosquitto_pub and mosquitto_sub against Aria's MQTT door)",
  },
  {
    path: "/usr/bin/dpkg-source",
    debianPackage: "dpkg-dev",
    neededBy:
      "tests/mosquitto_suite.test.ts (apt-get source mosquitto unpacks mosquitto's test suite " +
      "with it)",
  },
  {
    path: "/usr/lib/python3/dist-packages/paho/mqtt/client.py",
    debianPackage: "python3-paho-mqtt",
    neededBy:
      "tests/mqtt_clients.test.ts (paho's Python client, run by /usr/bin/python3) and " +
      "tests/mosquitto_suite.test.ts (mosquitto's tests import paho)",
  },
];

/** The requirements missing on this machine, given how to tell whether a path exists. */
export function missingRequirements(
  requirements: readonly SystemRequirement[],
  exists: (path: string) => boolean,
): SystemRequirement[] {
  return requirements.filter((requirement) => !exists(requirement.path));
}

/** The commands that install `missing` with apt-get (empty when nothing is missing). */
export function installCommands(missing: readonly SystemRequirement[]): string[][] {
  if (missing.length === 0) return [];
  const packages = [...new Set(missing.map((requirement) => requirement.debianPackage))];
  return [
    ["apt-get", "update", "-qq"],
    ["apt-get", "install", "-y", "-qq", ...packages],
  ];
}

/** Runs `argv` with its output kept back (apt's progress is thousands of lines); the output's tail when it fails. */
async function run(argv: string[]): Promise<{ exitCode: number; tail: string }> {
  const child = Bun.spawn(argv, {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  const [exitCode, out, err] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  return { exitCode, tail: `${out}${err}`.split("\n").slice(-30).join("\n") };
}

async function main(): Promise<number> {
  const missing = missingRequirements(SYSTEM_REQUIREMENTS, existsSync);
  if (missing.length === 0) return 0;
  const list = missing
    .map(
      (requirement) =>
        `  ${requirement.debianPackage} (${requirement.path}) for ${requirement.neededBy}`,
    )
    .join("\n");
  const commands = installCommands(missing);
  const canInstall = process.getuid?.() === 0 && Bun.which("apt-get") !== null;
  if (!canInstall) {
    process.stderr.write(
      `test setup: missing programs the tests need:\n${list}\nInstall them as root: ${commands.map((command) => command.join(" ")).join(" && ")}\n`,
    );
    return 1;
  }
  process.stderr.write(`test setup: installing Debian packages the tests need:\n${list}\n`);
  for (const command of commands) {
    const { exitCode, tail } = await run(command);
    if (exitCode !== 0) {
      process.stderr.write(
        `test setup: '${command.join(" ")}' failed with exit ${exitCode}:\n${tail}\n`,
      );
      return 1;
    }
  }
  const still = missingRequirements(missing, existsSync);
  if (still.length > 0) {
    process.stderr.write(
      `test setup: still missing after the install: ${still.map((requirement) => requirement.path).join(", ")}\n`,
    );
    return 1;
  }
  return 0;
}

if (import.meta.main) process.exit(await main());
