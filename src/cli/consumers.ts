/**
 * `aria consumers ls|rm`: the durable consumers of a running server, through its admin API
 * (GET /api/consumers, DELETE /api/consumers/NAME; src/admin/consumer_routes.ts). The admin URL
 * comes from --url, else from the data directory's LOCK as `aria split` finds its server (the
 * lock names the serving process's admin URL and token). Exit codes: 0 done, 1 failure (server
 * unreachable, no such consumer, consumer in use), 2 usage.
 */
import type { ConsumerInfo } from "../broker/mod.ts";
import { readLock } from "../runtime/mod.ts";
import { parseCommand, stringFlag, UsageError } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { clientTlsOf } from "./tls_files.ts";

/** Usage of `aria consumers`. */
export const CONSUMERS_USAGE = `Usage: aria consumers ls [--json] [options]
       aria consumers rm NAME [options]

Lists or removes the durable consumers of a running server (aria sub --durable NAME; the MQTT
door's persistent sessions). A consumer keeps its position until removed; removing one whose
subscription is open is refused.

Options:
  --url URL           the server's admin URL (http://HOST:PORT); default: the one that the
                      server serving --data-dir wrote into its LOCK file
  --data-dir DIR      the data directory to find the server by (default ./aria-data)
  --admin-token TOKEN the admin app's token (default ARIA_ADMIN_TOKEN, else the LOCK's)
  --ca FILE           trust this CA (PEM) when the admin app is HTTPS (default ARIA_CA)
  --json              ls: print the server's JSON answer
  -h, --help          show this help

ls prints one line per consumer: NAME, FILTER, ACKED (the last acknowledged seq), PENDING (seqs
published since, an upper bound of the matching ones), MEMBERS (open subscriptions), LAST ACTIVE,
OWNER (the user who created it, with --users; only that user may subscribe to it).
`;

/** A consumer as GET /api/consumers lists it; `owner` is absent from servers before owners. */
type ConsumerRow = Omit<ConsumerInfo, "owner"> & { owner?: string | null };

/** Runs `aria consumers`. */
export async function consumersCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    url: { type: "string" },
    "data-dir": { type: "string" },
    "admin-token": { type: "string" },
    ca: { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(CONSUMERS_USAGE);
    return EXIT_OK;
  }
  const [action, ...rest] = positionals;
  if (action === undefined) throw new UsageError("missing subcommand: ls or rm");
  if (action !== "ls" && action !== "rm") throw new UsageError(`unknown subcommand '${action}'`);
  if (action === "ls" && rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`);
  if (action === "rm" && rest.length !== 1) throw new UsageError("rm takes one NAME");
  if (action === "rm" && values.json === true) throw new UsageError("--json is for ls");
  const admin = await adminOf(values, io);
  if (typeof admin === "string") {
    io.err(`aria consumers: ${admin}\n`);
    return EXIT_FAILURE;
  }
  const path = action === "ls" ? "/api/consumers" : `/api/consumers/${encodeURIComponent(rest[0])}`;
  let response: Response;
  try {
    response = await fetch(`${admin.url}${path}`, {
      method: action === "ls" ? "GET" : "DELETE",
      headers: admin.token === undefined ? {} : { Authorization: `Bearer ${admin.token}` },
      ...(admin.ca === undefined ? {} : { tls: { ca: admin.ca } }),
    });
  } catch (error) {
    io.err(`aria consumers: cannot reach ${admin.url}: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  }
  if (action === "rm") {
    if (response.status === 204) {
      io.out(`removed durable consumer ${rest[0]}\n`);
      return EXIT_OK;
    }
    io.err(`aria consumers: ${await errorOf(response)}\n`);
    return EXIT_FAILURE;
  }
  if (!response.ok) {
    io.err(`aria consumers: ${await errorOf(response)}\n`);
    return EXIT_FAILURE;
  }
  const body = (await response.json()) as { consumers: ConsumerRow[] };
  io.out(values.json === true ? `${JSON.stringify(body)}\n` : consumersTable(body.consumers));
  return EXIT_OK;
}

/** The lines `aria consumers ls` prints. */
export function consumersTable(consumers: readonly ConsumerRow[]): string {
  if (consumers.length === 0) return "no durable consumers\n";
  const rows = [
    ["NAME", "FILTER", "ACKED", "PENDING", "MEMBERS", "LAST ACTIVE", "OWNER"],
    ...consumers.map((c) => [
      c.shared ? `${c.name} (shared)` : c.name,
      c.filter.join(","),
      String(c.ackedSeq),
      String(c.pendingSeqs),
      String(c.members),
      new Date(Math.floor(c.lastActiveUs / 1000)).toISOString(),
      c.owner ?? "-",
    ]),
  ];
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  return rows
    .map(
      (row) =>
        `${row
          .map((cell, i) => cell.padEnd(widths[i]))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("");
}

async function errorOf(response: Response): Promise<string> {
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  return body.error ?? `HTTP ${response.status}`;
}

/** The admin URL, token and CA: from the flags, else the data directory's LOCK. */
async function adminOf(
  values: Record<string, unknown>,
  io: CliIo,
): Promise<{ url: string; token?: string; ca?: string } | string> {
  const environment = io.env?.() ?? {};
  let url = typeof values.url === "string" ? values.url : undefined;
  let token =
    typeof values["admin-token"] === "string"
      ? values["admin-token"]
      : environment.ARIA_ADMIN_TOKEN || undefined;
  if (url === undefined) {
    const dataDir = stringFlag(values, "data-dir", "./aria-data");
    const holder = await readLock(dataDir);
    if (holder === null)
      return `no server is serving "${dataDir}" (no LOCK): start aria serve, or give --url`;
    if (holder.adminUrl === null)
      return `"${dataDir}" is held by pid ${holder.pid} (aria ${holder.command}), which has no admin app; give --url`;
    url = holder.adminUrl;
    token ??= holder.adminToken;
  } else if (!/^https?:\/\/[^/]+$/.test(url.replace(/\/$/, ""))) {
    throw new UsageError(`--url: "${url}" is not an admin URL (http://HOST:PORT)`);
  }
  url = url.replace(/\/$/, "");
  // The CA as for a tls:// URL (the admin app is HTTPS): --ca, else ARIA_CA.
  const tls = await clientTlsOf({ ca: values.ca }, url.startsWith("https") ? "tls://" : url, io);
  if (!tls.ok) return tls.message;
  return { url, token, ca: tls.tls?.ca };
}
