/**
 * TLS flags of the commands: `aria serve`'s certificate files (--tls-cert, --tls-key,
 * --tls-client-ca, --admin-tls-cert, --admin-tls-key) and the client commands' (--ca, --cert,
 * --key, and ARIA_CA when --ca is not given), read into the PEM text the server and the client
 * take (neither reads files).
 *
 * Not here: verifying anything (the server checks its pair before listening, src/runtime/tls.ts;
 * the client's handshake checks the server). Invariants: a TLS flag is never ignored — a client
 * flag with a tcp:// URL, or half of a pair, is a usage error; an unreadable file is an error
 * naming its flag, never a fall-back to plain TCP.
 */
import type { DialTls } from "../client/mod.ts";
import { runtime, type TlsServerOptions } from "../runtime/mod.ts";
import { UsageError, usageLine } from "./args.ts";
import type { CliIo } from "./cli_io.ts";

/** A PEM file read whole: a certificate chain is a few KiB; a wrong path (a log) is refused. */
export const TLS_FILE_BYTES_MAX = 1024 * 1024;

/** The flags of the client commands' TLS, for parseCommand. */
export const CLIENT_TLS_FLAGS = {
  ca: { type: "string" },
  cert: { type: "string" },
  key: { type: "string" },
} as const;

/** The client commands' TLS flags, as their usage lists them, descriptions at `column`. */
export function clientTlsUsage(column: number): string {
  const lines: [string, string][] = [
    ["--ca FILE", "trust this CA (PEM) for a tls:// URL (default: ARIA_CA, else the"],
    ["", "system's CAs)"],
    ["--cert FILE", "client certificate (PEM), for a server that requires one"],
    ["--key FILE", "the client certificate's private key (PEM)"],
  ];
  return lines
    .map(([flag, text]) =>
      flag === "" ? `${" ".repeat(column)}${text}\n` : usageLine(flag, text, column),
    )
    .join("");
}

/** The flags of `aria serve`'s TLS, for parseCommand. */
export const SERVE_TLS_FLAGS = {
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-client-ca": { type: "string" },
  "admin-tls-cert": { type: "string" },
  "admin-tls-key": { type: "string" },
} as const;

/** `aria serve`'s TLS flags, as its usage lists them. */
export const SERVE_TLS_USAGE = `  --tls-cert FILE        serve the TCP protocol over TLS (tls://) with this certificate (PEM)
  --tls-key FILE         the certificate's private key (PEM)
  --tls-client-ca FILE   require client certificates signed by this CA (mutual TLS)
  --admin-tls-cert FILE  serve the admin app over HTTPS with this certificate (default: with
                         --tls-cert, the same one)
  --admin-tls-key FILE   the admin certificate's private key (default: --tls-key)
`;

/** A file's text, or an Error naming the flag that gave it. */
type Read = { ok: true; text: string } | { ok: false; message: string };

/** Reads the PEM file `path` given by `flag`. */
async function readPem(flag: string, path: string): Promise<Read> {
  if (path === "") return { ok: false, message: `${flag}: needs a file` };
  const read = await runtime.readTextFile(path, { bytesMax: TLS_FILE_BYTES_MAX });
  return read.ok ? read : { ok: false, message: `${flag}: ${read.reason}` };
}

/** The string value of `name`, or undefined. */
function text(values: Record<string, unknown>, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

/** Reads every named file; the first failure's message instead. */
async function readAll<K extends string>(
  paths: Partial<Record<K, { flag: string; path: string }>>,
): Promise<{ ok: true; texts: Partial<Record<K, string>> } | { ok: false; message: string }> {
  const texts: Partial<Record<K, string>> = {};
  for (const [name, given] of Object.entries(paths) as [K, { flag: string; path: string }][]) {
    const read = await readPem(given.flag, given.path);
    if (!read.ok) return read;
    texts[name] = read.text;
  }
  return { ok: true, texts };
}

/** What `aria serve`'s TLS flags give: the listeners' material, or why a file cannot be read. */
export type ServeTls =
  | {
      ok: true;
      tls?: TlsServerOptions;
      adminTls?: Pick<TlsServerOptions, "cert" | "key">;
    }
  | { ok: false; message: string };

/**
 * Reads `aria serve`'s TLS files. Throws UsageError for half a pair or a client CA without a
 * certificate; the admin app takes the protocol's pair unless it has its own.
 */
export async function serveTlsOf(
  values: Record<string, unknown>,
  label: (name: string) => string = (name) => `--${name}`,
): Promise<ServeTls> {
  const [cert, key, clientCa] = ["tls-cert", "tls-key", "tls-client-ca"].map((n) =>
    text(values, n),
  );
  const [adminCert, adminKey] = ["admin-tls-cert", "admin-tls-key"].map((n) => text(values, n));
  if ((cert === undefined) !== (key === undefined))
    throw new UsageError(
      `${label("tls-cert")} and ${label("tls-key")} go together: give both or neither`,
    );
  if ((adminCert === undefined) !== (adminKey === undefined))
    throw new UsageError(
      `${label("admin-tls-cert")} and ${label("admin-tls-key")} go together: give both or neither`,
    );
  if (clientCa !== undefined && cert === undefined)
    throw new UsageError(
      `${label("tls-client-ca")} needs ${label("tls-cert")} and ${label("tls-key")} (mutual TLS is TLS)`,
    );
  const file = (name: string, path: string | undefined) =>
    path === undefined ? undefined : { flag: label(name), path };
  const read = await readAll(
    Object.fromEntries(
      [
        ["cert", file("tls-cert", cert)],
        ["key", file("tls-key", key)],
        ["clientCa", file("tls-client-ca", clientCa)],
        ["adminCert", file("admin-tls-cert", adminCert)],
        ["adminKey", file("admin-tls-key", adminKey)],
      ].filter(([, given]) => given !== undefined),
    ) as Partial<
      Record<"cert" | "key" | "clientCa" | "adminCert" | "adminKey", { flag: string; path: string }>
    >,
  );
  if (!read.ok) return read;
  const t = read.texts;
  const tls =
    t.cert === undefined || t.key === undefined
      ? undefined
      : { cert: t.cert, key: t.key, ...(t.clientCa === undefined ? {} : { clientCa: t.clientCa }) };
  const adminTls =
    t.adminCert !== undefined && t.adminKey !== undefined
      ? { cert: t.adminCert, key: t.adminKey }
      : tls === undefined
        ? undefined
        : { cert: tls.cert, key: tls.key };
  return { ok: true, tls, adminTls };
}

/** What a client command's TLS flags give: the dial's material, or why a file cannot be read. */
export type ClientTls = { ok: true; tls?: DialTls } | { ok: false; message: string };

/**
 * Reads a client command's TLS files for `url`: --ca (else ARIA_CA), --cert, --key. Throws
 * UsageError for a TLS flag with a tcp:// URL or half a certificate pair; ARIA_CA with a tcp://
 * URL is left unused (the environment serves every command).
 */
export async function clientTlsOf(
  values: Record<string, unknown>,
  url: string,
  io: CliIo,
): Promise<ClientTls> {
  const isTls = url.startsWith("tls://");
  const [ca, cert, key] = ["ca", "cert", "key"].map((n) => text(values, n));
  const given = [ca && "--ca", cert && "--cert", key && "--key"].filter(Boolean);
  if (!isTls) {
    if (given.length > 0)
      throw new UsageError(`${given[0]} is for a tls:// URL; ${url} is plain TCP`);
    return { ok: true };
  }
  if ((cert === undefined) !== (key === undefined))
    throw new UsageError("--cert and --key go together: give both or neither");
  const caFromEnvironment = io.env?.().ARIA_CA;
  const caPath = ca ?? (caFromEnvironment === "" ? undefined : caFromEnvironment);
  const read = await readAll({
    ...(caPath === undefined
      ? {}
      : { ca: { flag: ca === undefined ? "ARIA_CA" : "--ca", path: caPath } }),
    ...(cert === undefined ? {} : { cert: { flag: "--cert", path: cert } }),
    ...(key === undefined ? {} : { key: { flag: "--key", path: key } }),
  });
  if (!read.ok) return read;
  return { ok: true, tls: read.texts };
}
