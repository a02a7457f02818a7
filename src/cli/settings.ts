/**
 * Settings of a command from three sources besides its defaults: flags, `ARIA_*` environment
 * variables, and a config file (`--config FILE` or `ARIA_CONFIG`, TOML or JSON). One table of
 * settings per command is the schema of all three: a setting `admin-port` is the flag
 * `--admin-port`, the variable `ARIA_ADMIN_PORT` and the file key `admin-port`. Precedence: flag >
 * environment > file > default (syntax errors of either format say line and column).
 * `--print-config` shows each value and where it came from, secrets redacted.
 *
 * Not here: what a value means (the command parses and checks its values as it did its flags, so
 * a bad value reads the same whatever its source, prefixed by where it came from). Invariants: an
 * unknown flag or file key is an error, never ignored; a secret's value is never printed.
 */
import { parse as parseToml, TomlError } from "smol-toml";
import { JsonSourceError, parseJsonSource } from "../auth/mod.ts";
import { CONFIG_FILE_BYTES_MAX } from "../constants.ts";
import { runtime } from "../runtime/mod.ts";
import { parseCommand, UsageError } from "./args.ts";
import type { CliIo } from "./cli_io.ts";

/** One setting of a command. */
export interface SettingSpec {
  type: "string" | "boolean";
  /** A one-letter flag alias (flags only). */
  short?: string;
  /** The value when no source sets it (absent: unset). */
  default?: string | boolean;
  /** Never printed (tokens): `--print-config` and logs show "<redacted>". */
  secret?: boolean;
  /** A comma-separated list: a config file may give it as an array of strings. */
  list?: boolean;
  /** A flag only (`--help`, `--config`, `--print-config`): not a file key nor a variable. */
  flagOnly?: boolean;
}

/** The settings of a command, by name (the flag without its dashes). */
export type SettingSpecs = Record<string, SettingSpec>;

/** Where a value came from. */
export type SettingSource = "flag" | "environment" | "file" | "default";

/** Every setting's value (defaults applied) and where it came from. */
export interface ResolvedSettings {
  values: Record<string, string | boolean | undefined>;
  sources: Record<string, SettingSource | undefined>;
  positionals: string[];
  /** The config file read, if any. */
  configFile?: string;
}

/** The flags every command with settings takes besides its own. */
export const SETTINGS_FLAGS: SettingSpecs = {
  config: { type: "string", flagOnly: true },
  "print-config": { type: "boolean", flagOnly: true },
  help: { type: "boolean", short: "h", flagOnly: true },
};

/** The environment variable of a setting: `admin-port` → `ARIA_ADMIN_PORT`. */
export function environmentName(setting: string): string {
  return `ARIA_${setting.toUpperCase().replaceAll("-", "_")}`;
}

/** How an error names a setting: as its source gave it (`--port`, `ARIA_PORT`, `FILE: port`). */
export function settingLabel(resolved: ResolvedSettings, name: string): string {
  const source = resolved.sources[name];
  if (source === "environment") return environmentName(name);
  if (source === "file") return `${resolved.configFile}: ${name}`;
  return `--${name}`;
}

/** The flags of `specs`, as parseCommand takes them. */
export function flagsOf(
  specs: SettingSpecs,
): Record<string, { type: "string" | "boolean"; short?: string }> {
  const flags: Record<string, { type: "string" | "boolean"; short?: string }> = {};
  for (const [name, spec] of Object.entries(specs))
    flags[name] =
      spec.short === undefined ? { type: spec.type } : { type: spec.type, short: spec.short };
  return flags;
}

/** Resolves `specs` from `args`, `io.env()` and the config file they name. Throws UsageError. */
export async function resolveSettings(
  specs: SettingSpecs,
  args: string[],
  io: CliIo,
): Promise<ResolvedSettings> {
  const all = { ...specs, ...SETTINGS_FLAGS };
  const { values: flags, positionals } = parseCommand(args, flagsOf(all));
  // --help needs no other source to be valid (a broken ARIA_CONFIG must not hide the usage).
  if (flags.help === true)
    return { values: { help: true }, sources: { help: "flag" }, positionals };
  const environment = io.env?.() ?? {};
  const fromEnvironment: Record<string, string | boolean> = {};
  for (const [name, spec] of Object.entries(specs)) {
    if (spec.flagOnly === true) continue;
    const text = environment[environmentName(name)];
    if (text !== undefined) fromEnvironment[name] = valueOfText(spec, text, environmentName(name));
  }
  const configFile =
    typeof flags.config === "string" ? flags.config : environment.ARIA_CONFIG || undefined;
  const fromFile = configFile === undefined ? {} : await readConfigFile(specs, configFile);
  const resolved: ResolvedSettings = { values: {}, sources: {}, positionals, configFile };
  for (const [name, spec] of Object.entries(all)) {
    const flag = flags[name] as string | boolean | undefined;
    const [value, source]: [string | boolean | undefined, SettingSource | undefined] =
      flag !== undefined
        ? [flag, "flag"]
        : name in fromEnvironment
          ? [fromEnvironment[name], "environment"]
          : name in fromFile
            ? [fromFile[name], "file"]
            : spec.default !== undefined
              ? [spec.default, "default"]
              : [undefined, undefined];
    resolved.values[name] = value;
    resolved.sources[name] = source;
  }
  return resolved;
}

/**
 * The effective settings as a config file would hold them, one per line with its source;
 * secrets redacted, unset ones commented out. What `--print-config` prints.
 */
export function describeSettings(specs: SettingSpecs, resolved: ResolvedSettings): string {
  const lines: string[] = [];
  if (resolved.configFile !== undefined) lines.push(`# config file: ${resolved.configFile}`);
  for (const [name, spec] of Object.entries(specs)) {
    if (spec.flagOnly === true) continue;
    const value = resolved.values[name];
    const source = resolved.sources[name];
    if (value === undefined || source === undefined) {
      lines.push(`# ${name} = (not set)`);
      continue;
    }
    const shown =
      spec.secret === true
        ? '"<redacted>"'
        : typeof value === "boolean"
          ? `${value}`
          : tomlString(value);
    const where = source === "environment" ? `environment ${environmentName(name)}` : source;
    lines.push(`${name} = ${shown}  # ${where}`);
  }
  return `${lines.join("\n")}\n`;
}

/** A TOML basic string (JSON's escapes are TOML's, and JSON.stringify never writes `\/`). */
function tomlString(text: string): string {
  return JSON.stringify(text);
}

function valueOfText(spec: SettingSpec, text: string, where: string): string | boolean {
  if (spec.type === "string") return text;
  if (/^(true|1|yes)$/i.test(text)) return true;
  if (/^(false|0|no)$/i.test(text)) return false;
  throw new UsageError(`${where}: "${text}" is not true or false`);
}

/** The settings a config file sets, checked against `specs`; throws UsageError. */
async function readConfigFile(
  specs: SettingSpecs,
  path: string,
): Promise<Record<string, string | boolean>> {
  const read = await runtime.readTextFile(path, { bytesMax: CONFIG_FILE_BYTES_MAX });
  if (!read.ok) throw new UsageError(`--config: ${read.reason}`);
  let document: unknown;
  if (path.endsWith(".json")) {
    try {
      document = JSON.parse(read.text);
    } catch (error) {
      // JSON.parse says what but not where: the users file's reader says where.
      try {
        parseJsonSource(read.text);
      } catch (located) {
        if (located instanceof JsonSourceError)
          throw new UsageError(`${path}:${located.line}:${located.column}: ${located.reason}`);
      }
      throw new UsageError(`${path}: not valid JSON: ${(error as Error).message}`);
    }
  } else if (path.endsWith(".toml")) {
    try {
      document = parseToml(read.text);
    } catch (error) {
      if (!(error instanceof TomlError)) throw error;
      const what = error.message.split("\n")[0].replace(/^Invalid TOML document: /, "");
      throw new UsageError(`${path}:${error.line}:${error.column}: ${what}`);
    }
  } else throw new UsageError(`--config: ${path}: name a .toml or .json file`);
  if (typeof document !== "object" || document === null || Array.isArray(document))
    throw new UsageError(`${path}: must hold a table of settings`);
  const settings: Record<string, string | boolean> = {};
  for (const [key, value] of Object.entries(document)) {
    const spec = specs[key];
    if (spec === undefined || spec.flagOnly === true)
      throw new UsageError(
        `${path}: unknown setting "${key}" (known: ${Object.keys(specs)
          .filter((name) => specs[name].flagOnly !== true)
          .join(", ")})`,
      );
    settings[key] = fileValue(spec, value, `${path}: ${key}`);
  }
  return settings;
}

function fileValue(spec: SettingSpec, value: unknown, where: string): string | boolean {
  if (spec.type === "boolean") {
    if (typeof value === "boolean") return value;
    throw new UsageError(`${where}: must be true or false`);
  }
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (spec.list === true && Array.isArray(value) && value.every((v) => typeof v === "string"))
    return value.join(",");
  throw new UsageError(
    `${where}: must be ${spec.list === true ? "a string or an array of strings" : "a string"}`,
  );
}
