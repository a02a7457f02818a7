/**
 * `aria serve`: runs the TCP protocol server and the admin HTTP app until SIGINT or SIGTERM.
 * Prints one line per listener on stdout (`tcp://HOST:PORT`, then `http://HOST:PORT`; `tls://` and
 * `https://` with --tls-cert), so a script started with --port 0 learns the ports it got.
 */
import {
  ADMIN_HOST_DEFAULT,
  TIP_BYTES_DEFAULT,
  TIP_BYTES_MAX,
  TIP_BYTES_MIN,
} from "../constants.ts";
import { allowedHostProblem } from "../admin/mod.ts";
import { runtime } from "../runtime/mod.ts";
import { FATAL_EXIT, FatalError, startServer } from "../server/mod.ts";
import type { FsyncPolicy } from "../store/mod.ts";
import {
  parseCommand,
  parseDuration,
  parsePort,
  parseSize,
  stringFlag,
  UsageError,
} from "./args.ts";
import { EXIT_OK, type CliIo } from "./cli_io.ts";
import { SERVE_TLS_FLAGS, SERVE_TLS_USAGE, serveTlsOf } from "./tls_files.ts";

/** Usage of `aria serve`. */
export const SERVE_USAGE = `Usage: aria serve [options]

Runs the Aria server: the TCP protocol and the admin HTTP app.

Options:
  --host HOST            address to listen on (default 127.0.0.1)
  --port PORT            TCP protocol port; 0 picks a free one (default 7400)
  --admin-port PORT      admin HTTP port; 0 picks a free one (default 7401)
  --data-dir DIR         where messages are stored (default ./aria-data)
  --tip-bytes SIZE       memory for the newest messages, e.g. 256MiB (default 256MiB)
  --fsync POLICY         always | interval | never (default always)
  --retain-age DURATION  delete segments older than this, e.g. 7d (default: keep)
  --retain-bytes SIZE    delete the oldest segments beyond this size, e.g. 50GiB (default: keep)
  --auth-token TOKEN     clients must present this token in their handshake
  --users FILE           users with tokens and topic permissions (docs/security.md); reloaded on
                         SIGHUP; not with --auth-token
  --admin-host HOST      address of the admin HTTP app (default 127.0.0.1)
  --admin-token TOKEN    the admin app requires "Authorization: Bearer TOKEN" (all but /healthz)
  --admin-allowed-hosts LIST
                         host names the admin app answers as, comma-separated, beyond localhost,
                         127.0.0.1, [::1] and --admin-host; * answers any (default: none)
${SERVE_TLS_USAGE}  -h, --help             show this help
`;

const FSYNC_POLICIES: FsyncPolicy[] = ["always", "interval", "never"];

/** Runs `aria serve`; resolves to the exit code after a signal stopped the server. */
export async function serveCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    host: { type: "string" },
    port: { type: "string" },
    "admin-port": { type: "string" },
    "data-dir": { type: "string" },
    "tip-bytes": { type: "string" },
    fsync: { type: "string" },
    "retain-age": { type: "string" },
    "retain-bytes": { type: "string" },
    "auth-token": { type: "string" },
    users: { type: "string" },
    "admin-host": { type: "string" },
    "admin-token": { type: "string" },
    "admin-allowed-hosts": { type: "string" },
    ...SERVE_TLS_FLAGS,
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SERVE_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const fsync = stringFlag(values, "fsync", "always") as FsyncPolicy;
  if (!FSYNC_POLICIES.includes(fsync))
    throw new UsageError(`--fsync: "${fsync}" is not one of ${FSYNC_POLICIES.join(", ")}`);
  const tipBytes =
    typeof values["tip-bytes"] === "string"
      ? parseSize(values["tip-bytes"], "--tip-bytes")
      : TIP_BYTES_DEFAULT;
  if (tipBytes < TIP_BYTES_MIN || tipBytes > TIP_BYTES_MAX)
    throw new UsageError(
      `--tip-bytes: must be between ${TIP_BYTES_MIN} and ${TIP_BYTES_MAX} bytes`,
    );
  const options = {
    host: stringFlag(values, "host", "127.0.0.1"),
    port: parsePort(stringFlag(values, "port", "7400"), "--port"),
    adminPort: parsePort(stringFlag(values, "admin-port", "7401"), "--admin-port"),
    dataDir: stringFlag(values, "data-dir", "./aria-data"),
    tipBytes: tipBytes - (tipBytes % 8),
    fsync,
    retainAgeUs:
      typeof values["retain-age"] === "string"
        ? parseDuration(values["retain-age"], "--retain-age") * 1000
        : undefined,
    retainBytes:
      typeof values["retain-bytes"] === "string"
        ? parseSize(values["retain-bytes"], "--retain-bytes")
        : undefined,
    authToken: typeof values["auth-token"] === "string" ? values["auth-token"] : undefined,
    usersFile: typeof values.users === "string" ? values.users : undefined,
    adminHost: stringFlag(values, "admin-host", ADMIN_HOST_DEFAULT),
    adminToken: typeof values["admin-token"] === "string" ? values["admin-token"] : undefined,
    adminAllowedHosts: allowedHostsOf(values["admin-allowed-hosts"]),
  };
  if (options.adminToken !== undefined && !/^[\x21-\x7e]+$/.test(options.adminToken))
    throw new UsageError("--admin-token: must be printable ASCII without spaces");
  // An empty host could mean every interface to the runtime: the admin app and its split routes open to all.
  if (options.host === "") throw new UsageError("--host: must not be empty");
  if (options.adminHost === "") throw new UsageError("--admin-host: must not be empty");
  // An empty token (an unset variable in `--auth-token "$TOKEN"`) would mean no auth at all.
  if (options.authToken === "")
    throw new UsageError(
      "--auth-token: must not be empty (leave the flag out for a server without auth)",
    );
  if (options.usersFile !== undefined && options.authToken !== undefined)
    throw new UsageError(
      "--users and --auth-token: choose one (with --users each client signs in with its user's token)",
    );
  if (options.usersFile === "") throw new UsageError("--users: must not be empty");
  const tls = await serveTlsOf(values);
  if (!tls.ok) {
    io.err(`aria serve: Cannot serve TLS: ${tls.message}\n`);
    return FATAL_EXIT.tls;
  }
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer({ ...options, tls: tls.tls, adminTls: tls.adminTls });
  } catch (error) {
    if (error instanceof FatalError) {
      io.err(`aria serve: ${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
  const recovery = server.recovery;
  for (const cut of recovery.cuts) {
    // After a crash a recycled journal's cut includes the older generation's bytes it still held.
    const after =
      cut.recordsAfterCut === 0
        ? "no valid record after it"
        : `${cut.recordsAfterCut} valid-looking records after it, unsynced writes the crash kept out of order`;
    io.err(
      `aria serve: recovery cut ${cut.file} at offset ${cut.offset} after its last whole record: ${cut.bytesCut} bytes, ${after}\n`,
    );
  }
  if (recovery.journalsAdopted > 0)
    io.err(
      `aria serve: recovery adopted the journal staged at the last roll (written while the one before it was sealed; its records continue it)\n`,
    );
  for (const problem of recovery.problems)
    io.err(`aria serve: recovery: ${JSON.stringify(problem)}\n`);
  io.out(`${server.tcpUrl}\n${server.adminUrl}\n`);
  // SIGHUP (systemctl reload) must not end the server; what it reloads is listed in docs/operations.md.
  runtime.onReloadSignal(() => {
    io.err("aria serve: SIGHUP: reloading\n");
    void server.reloadUsers().then((reloaded) => io.err(reloaded.line));
  });
  const signal = await new Promise<string>((resolve) => runtime.onShutdownSignal(resolve));
  io.err(`aria serve: ${signal}: shutting down\n`);
  await server.stop();
  return EXIT_OK;
}

/** The names of --admin-allowed-hosts (a DNS rebinding page cannot use any other name). */
function allowedHostsOf(value: unknown): string[] | undefined {
  if (typeof value !== "string") return undefined;
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (names.length === 0)
    throw new UsageError("--admin-allowed-hosts: give host names separated by commas, or *");
  for (const name of names) {
    const problem = allowedHostProblem(name);
    if (problem !== null) throw new UsageError(`--admin-allowed-hosts: ${problem}`);
  }
  return names;
}
