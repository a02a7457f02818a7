import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UsageError } from "./args.ts";
import type { CliIo } from "./cli_io.ts";
import {
  describeSettings,
  environmentName,
  resolveSettings,
  type SettingSpecs,
  settingLabel,
} from "./settings.ts";

const dir = mkdtempSync(join(tmpdir(), "aria-settings-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SPECS: SettingSpecs = {
  port: { type: "string", default: "7400" },
  "admin-port": { type: "string", default: "7401" },
  "auth-token": { type: "string", secret: true },
  "allowed-hosts": { type: "string", list: true },
  verbose: { type: "boolean", default: false },
};

function io(env: Record<string, string> = {}): CliIo {
  return { out: () => {}, err: () => {}, env: () => env };
}

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

async function refusal(run: Promise<unknown>): Promise<string> {
  try {
    await run;
  } catch (error) {
    if (error instanceof UsageError) return error.message;
    throw error;
  }
  throw new Error("expected a UsageError");
}

test("flag > environment > file > default, each value naming its source", async () => {
  const config = file("all.toml", 'port = 1\nadmin-port = 2\nauth-token = "from-file"\n');
  const settings = await resolveSettings(
    SPECS,
    ["--config", config, "--port", "10"],
    io({ ARIA_PORT: "20", ARIA_ADMIN_PORT: "30" }),
  );
  expect(settings.values).toMatchObject({
    port: "10",
    "admin-port": "30",
    "auth-token": "from-file",
    verbose: false,
    "allowed-hosts": undefined,
  });
  expect(settings.sources).toMatchObject({
    port: "flag",
    "admin-port": "environment",
    "auth-token": "file",
    verbose: "default",
    "allowed-hosts": undefined,
  });
  expect(settingLabel(settings, "port")).toBe("--port");
  expect(settingLabel(settings, "admin-port")).toBe("ARIA_ADMIN_PORT");
  expect(settingLabel(settings, "auth-token")).toBe(`${config}: auth-token`);
});

test("ARIA_CONFIG names the file; a JSON file; a list as an array; booleans from the environment", async () => {
  const config = file("c.json", '{"allowed-hosts": ["a.example", "b.example"], "port": "9"}');
  const settings = await resolveSettings(
    SPECS,
    [],
    io({ ARIA_CONFIG: config, ARIA_VERBOSE: "yes" }),
  );
  expect(settings.configFile).toBe(config);
  expect(settings.values).toMatchObject({
    "allowed-hosts": "a.example,b.example",
    port: "9",
    verbose: true,
  });
  expect(environmentName("admin-allowed-hosts")).toBe("ARIA_ADMIN_ALLOWED_HOSTS");
});

test("--print-config's text: sources, secrets redacted, unset settings commented out", async () => {
  const settings = await resolveSettings(
    SPECS,
    ["--auth-token", "s3cret-value"],
    io({ ARIA_PORT: "7" }),
  );
  const text = describeSettings(SPECS, settings);
  expect(text).toBe(
    [
      'port = "7"  # environment ARIA_PORT',
      'admin-port = "7401"  # default',
      'auth-token = "<redacted>"  # flag',
      "# allowed-hosts = (not set)",
      "verbose = false  # default",
      "",
    ].join("\n"),
  );
  expect(text).not.toContain("s3cret");
});

test("bad input: unknown keys, wrong types, syntax errors with line and column, missing files", async () => {
  const resolve = (args: string[], env: Record<string, string> = {}) =>
    refusal(resolveSettings(SPECS, args, io(env)));
  expect(await resolve(["--config", file("u.toml", "port = 1\nprot = 2\n")])).toStartWith(
    `${dir}/u.toml: unknown setting "prot" (known: port, admin-port, auth-token, allowed-hosts, verbose)`,
  );
  // The flags of the command line alone are not settings a file may hold.
  expect(await resolve(["--config", file("h.toml", "help = true\n")])).toContain(
    'unknown setting "help"',
  );
  expect(await resolve(["--config", file("s.toml", "port = 1\nadmin-port = = 2\n")])).toBe(
    `${dir}/s.toml:2:14: invalid value`,
  );
  expect(await resolve(["--config", file("t.toml", "verbose = 1\n")])).toBe(
    `${dir}/t.toml: verbose: must be true or false`,
  );
  expect(await resolve(["--config", file("n.toml", "port = -1\n")])).toBe(
    `${dir}/n.toml: port: must be a string`,
  );
  expect(await resolve(["--config", file("l.toml", 'port = ["1"]\n')])).toBe(
    `${dir}/l.toml: port: must be a string`,
  );
  expect(await resolve(["--config", file("tab.toml", "[admin]\nport = 1\n")])).toContain(
    'unknown setting "admin"',
  );
  expect(await resolve(["--config", file("j.json", '{\n  "port": 1,\n  fsync: 2}')])).toStartWith(
    `${dir}/j.json:3:3: `,
  );
  expect(await resolve(["--config", file("a.json", "[1]")])).toBe(
    `${dir}/a.json: must hold a table of settings`,
  );
  expect(await resolve(["--config", file("c.yaml", "port: 1")])).toBe(
    `--config: ${dir}/c.yaml: name a .toml or .json file`,
  );
  expect(await resolve(["--config", join(dir, "none.toml")])).toBe(
    `--config: cannot read "${dir}/none.toml": no such file`,
  );
  expect(await resolve([], { ARIA_VERBOSE: "maybe" })).toBe(
    'ARIA_VERBOSE: "maybe" is not true or false',
  );
  expect(await resolve(["--nope"])).toContain("--nope");
});
