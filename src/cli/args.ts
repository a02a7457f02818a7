/**
 * Argument helpers shared by the subcommands: strict parsing with node:util's parseArgs (an
 * unknown flag or a missing value is a usage error), sizes (`256MiB`) and durations (`7d`).
 * A UsageError carries the message the command prints above its usage before exiting 2.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { parseTcpUrl } from "../client/client.ts";

/** Wrong arguments: printed with the usage, exit code 2. */
export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Parses `args` against `options`; throws UsageError on anything unknown or malformed. */
export function parseCommand<T extends Options>(
  args: string[],
  options: T,
): { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args,
      options,
      allowPositionals: true,
      strict: true,
    });
    return {
      values: values as Record<string, string | boolean | string[] | undefined>,
      positionals,
    };
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, ""));
  }
}

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  kib: 1024,
  m: 1e6,
  mb: 1e6,
  mib: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gib: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  tib: 1024 ** 4,
};

/** Parses a byte size such as `256MiB`, `1GB` or `4096`. */
export function parseSize(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/.exec(text.trim());
  const unit = match === null ? undefined : SIZE_UNITS[match[2].toLowerCase()];
  if (match === null || unit === undefined)
    throw new UsageError(`${flag}: "${text}" is not a size (e.g. 256MiB, 1GB, 4096)`);
  return Math.floor(Number(match[1]) * unit);
}

const DURATION_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** Parses a duration such as `500ms`, `30s`, `12h`, `7d`; returns milliseconds. */
export function parseDuration(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/.exec(text.trim());
  if (match === null)
    throw new UsageError(`${flag}: "${text}" is not a duration (e.g. 500ms, 30s, 12h, 7d)`);
  return Number(match[1]) * DURATION_MS[match[2]];
}

/** Parses a non-negative integer flag. */
export function parseCount(text: string, flag: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag}: "${text}" is not a whole number`);
  return Number(text);
}

/** Parses a TCP port (0 picks a free one). */
export function parsePort(text: string, flag: string): number {
  const port = parseCount(text, flag);
  if (port > 65535) throw new UsageError(`${flag}: ${port} is not a port (0-65535)`);
  return port;
}

/** The string value of a flag, or its default. */
export function stringFlag(
  values: Record<string, unknown>,
  name: string,
  fallback: string,
): string {
  const value = values[name];
  return typeof value === "string" ? value : fallback;
}

/** The server URL every client command takes by default. */
export const URL_DEFAULT = "tcp://127.0.0.1:7400";

/**
 * Checks a --url value (or ARIA_URL's, named by `label`): a malformed one is a wrong argument
 * (usage, exit 2), not an unreachable server (exit 1).
 */
export function checkUrl(url: string, label = "--url"): string {
  try {
    parseTcpUrl(url);
  } catch (error) {
    throw new UsageError(`${label}: ${(error as Error).message}`);
  }
  return url;
}

/** The flag of the client commands' credential (besides --url). */
export const CLIENT_AUTH_FLAGS = { "auth-token": { type: "string" } } as const;

/** The client commands' auth flag, as their usage lists it, its description at `column`. */
export function clientAuthUsage(column: number): string {
  return usageLine(
    "--auth-token TOKEN",
    "sign in with this token (default: ARIA_AUTH_TOKEN)",
    column,
  );
}

/** One option of a usage text: the flag, then its text at `column` (on the next line when the flag reaches it). */
export function usageLine(flag: string, text: string, column: number): string {
  const head = `  ${flag}`;
  return head.length < column
    ? `${head.padEnd(column)}${text}\n`
    : `${head}\n${" ".repeat(column)}${text}\n`;
}

/** The server URL of a client command: --url, else ARIA_URL, else `fallback`. */
export function clientUrlOf(
  values: Record<string, unknown>,
  environment: Record<string, string | undefined>,
  fallback: string,
): string;
export function clientUrlOf(
  values: Record<string, unknown>,
  environment: Record<string, string | undefined>,
  fallback: null,
): string | null;
export function clientUrlOf(
  values: Record<string, unknown>,
  environment: Record<string, string | undefined>,
  fallback: string | null,
): string | null {
  if (typeof values.url === "string") return checkUrl(values.url);
  const fromEnvironment = environment.ARIA_URL;
  if (fromEnvironment !== undefined && fromEnvironment !== "")
    return checkUrl(fromEnvironment, "ARIA_URL");
  return fallback;
}

/**
 * The token of a client command: --auth-token, else ARIA_AUTH_TOKEN, else none. An empty flag is
 * a usage error (an unset variable in `--auth-token "$TOKEN"` would otherwise sign in without).
 */
export function authTokenOf(
  values: Record<string, unknown>,
  environment: Record<string, string | undefined>,
): string | undefined {
  const flag = values["auth-token"];
  if (typeof flag === "string") {
    if (flag === "") throw new UsageError("--auth-token: must not be empty");
    return flag;
  }
  const fromEnvironment = environment.ARIA_AUTH_TOKEN;
  return fromEnvironment === undefined || fromEnvironment === "" ? undefined : fromEnvironment;
}
