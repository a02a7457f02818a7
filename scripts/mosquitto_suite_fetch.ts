/**
 * Fetches mosquitto's own test suite at test time from Debian's source package of the installed
 * mosquitto (`apt-get source mosquitto=VERSION`) into a cache outside the repository
 * (~/.cache/aria/mosquitto-suite/, or $ARIA_MOSQUITTO_SUITE_CACHE). Nothing of it is copied into
 * this repository.
 *
 * When apt has no source index yet, it writes /etc/apt/sources.list.d/aria-deb-src.sources: a
 * `deb-src` twin of every installed `deb` entry of this release (the suites named after
 * /etc/os-release's VERSION_CODENAME), only when that file is missing, then updates apt's index
 * from that file alone. Needs root for that first fetch; afterwards the cache is read as is.
 *
 * Invariant: a cache directory is complete or absent (extracted beside it, then renamed).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The file this script writes when apt knows no `deb-src` entry of the installed release. */
export const DEB_SRC_FILE = "/etc/apt/sources.list.d/aria-deb-src.sources";

/** The cache directory holding one extracted source tree per mosquitto version. */
export const SUITE_CACHE =
  process.env.ARIA_MOSQUITTO_SUITE_CACHE ?? join(homedir(), ".cache", "aria", "mosquitto-suite");

/** One `deb` entry of apt's sources: where it comes from and which suites and components. */
export interface AptEntry {
  uri: string;
  suites: string[];
  components: string[];
  signedBy?: string;
}

/** The `deb` entries of a one-line sources.list text (`deb [opts] URI SUITE COMPONENT...`). */
export function parseOneLineSources(text: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    const match = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (match === null) continue;
    const signedBy = /signed-by=(\S+)/.exec(match[1] ?? "")?.[1];
    entries.push({
      uri: match[2]!,
      suites: [match[3]!],
      components: match[4]!.split(/\s+/).filter((part) => part !== ""),
      ...(signedBy === undefined ? {} : { signedBy }),
    });
  }
  return entries;
}

/** The `deb` entries of a deb822 .sources text (stanzas separated by blank lines). */
export function parseDeb822Sources(text: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    for (const line of stanza.split("\n")) {
      const match = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
      if (match !== null && !line.startsWith("#")) fields.set(match[1]!.toLowerCase(), match[2]!);
    }
    const types = (fields.get("types") ?? "").split(/\s+/);
    if (!types.includes("deb") || fields.get("enabled")?.toLowerCase() === "no") continue;
    const words = (key: string) => (fields.get(key) ?? "").split(/\s+/).filter((w) => w !== "");
    const signedBy = fields.get("signed-by");
    for (const uri of words("uris"))
      entries.push({
        uri,
        suites: words("suites"),
        components: words("components"),
        ...(signedBy === undefined ? {} : { signedBy }),
      });
  }
  return entries;
}

/** A deb822 file of `deb-src` stanzas mirroring `entries`' suites of release `codename`. */
export function debSrcFor(entries: readonly AptEntry[], codename: string): string {
  const ofRelease = (suite: string) => suite === codename || suite.startsWith(`${codename}-`);
  const stanzas: string[] = [];
  for (const entry of entries) {
    const suites = entry.suites.filter(ofRelease);
    if (suites.length === 0 || entry.components.length === 0) continue;
    stanzas.push(
      [
        "Types: deb-src",
        `URIs: ${entry.uri}`,
        `Suites: ${suites.join(" ")}`,
        `Components: ${entry.components.join(" ")}`,
        ...(entry.signedBy === undefined ? [] : [`Signed-By: ${entry.signedBy}`]),
      ].join("\n"),
    );
  }
  return stanzas.length === 0
    ? ""
    : `# Written by aria's scripts/mosquitto_suite_fetch.ts: source packages of the installed\n# release, for mosquitto's test suite (apt-get source mosquitto).\n${stanzas.join("\n\n")}\n`;
}

/** Runs `argv`, returning its exit code and combined output. */
function run(argv: string[], cwd?: string): { exitCode: number; output: string } {
  const child = Bun.spawnSync(argv, {
    cwd,
    stdin: "ignore",
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return {
    exitCode: child.exitCode,
    output: `${child.stdout.toString()}${child.stderr.toString()}`,
  };
}

/** The installed mosquitto package's version (e.g. 2.0.11-1.2+deb12u2); throws when absent. */
export function installedMosquittoVersion(): string {
  // dpkg-query's own ${Version} field syntax, kept out of a template literal.
  const query = run(["dpkg-query", "-W", `-f=${"$"}{Version}`, "mosquitto"]);
  if (query.exitCode !== 0 || query.output.trim() === "")
    throw new Error(
      "mosquitto is not installed (npm test's set-up installs it: npx bun scripts/test_setup.ts)",
    );
  return query.output.trim();
}

/** Every `deb` entry apt reads: /etc/apt/sources.list and sources.list.d's .list and .sources. */
function installedEntries(): AptEntry[] {
  const entries: AptEntry[] = [];
  if (existsSync("/etc/apt/sources.list"))
    entries.push(...parseOneLineSources(readFileSync("/etc/apt/sources.list", "utf8")));
  const dir = "/etc/apt/sources.list.d";
  for (const name of existsSync(dir) ? readdirSync(dir).sort() : []) {
    const text = () => readFileSync(join(dir, name), "utf8");
    if (name.endsWith(".list")) entries.push(...parseOneLineSources(text()));
    else if (name.endsWith(".sources")) entries.push(...parseDeb822Sources(text()));
  }
  return entries;
}

/** Writes DEB_SRC_FILE (when missing) and updates apt's index from that file alone. */
function addDebSrc(): void {
  if (!existsSync(DEB_SRC_FILE)) {
    const codename = /^VERSION_CODENAME=(\S+)$/m.exec(readFileSync("/etc/os-release", "utf8"))?.[1];
    if (codename === undefined) throw new Error("/etc/os-release names no VERSION_CODENAME");
    const text = debSrcFor(installedEntries(), codename);
    if (text === "") throw new Error(`no installed deb entry of release ${codename} to mirror`);
    writeFileSync(DEB_SRC_FILE, text);
  }
  const update = run([
    "apt-get",
    "update",
    "-qq",
    `-o=Dir::Etc::SourceList=${DEB_SRC_FILE}`,
    "-o=Dir::Etc::SourceParts=-",
    "-o=APT::Get::List-Cleanup=0",
  ]);
  if (update.exitCode !== 0)
    throw new Error(`apt-get update (for ${DEB_SRC_FILE}) failed:\n${update.output}`);
}

/**
 * The directory of the suite's test/broker for the installed mosquitto, fetching and extracting
 * its source package first when the cache does not hold it.
 */
export function ensureSuite(): string {
  const version = installedMosquittoVersion();
  const tree = join(SUITE_CACHE, `mosquitto-${version}`);
  const broker = join(tree, "test", "broker");
  if (existsSync(join(broker, "test.py"))) return broker;
  if (process.getuid?.() !== 0)
    throw new Error(
      `mosquitto's test suite is not in ${SUITE_CACHE}; fetching it (apt-get source) needs root`,
    );
  mkdirSync(SUITE_CACHE, { recursive: true });
  const work = mkdtempSync(join(SUITE_CACHE, ".fetch-"));
  try {
    const source = () => run(["apt-get", "source", "-qq", `mosquitto=${version}`], work);
    let fetched = source();
    if (fetched.exitCode !== 0) {
      addDebSrc();
      fetched = source();
    }
    if (fetched.exitCode !== 0)
      throw new Error(`apt-get source mosquitto=${version} failed:\n${fetched.output}`);
    const extracted = readdirSync(work).find((name) => existsSync(join(work, name, "test")));
    if (extracted === undefined)
      throw new Error(`apt-get source mosquitto=${version} left no source tree in ${work}`);
    renameSync(join(work, extracted), tree);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return broker;
}
