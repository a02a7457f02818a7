/**
 * `aria serve`: runs the TCP protocol server and the admin HTTP app until SIGINT or SIGTERM.
 * Prints one line per listener on stdout (`tcp://HOST:PORT`, then `http://HOST:PORT`, then
 * `mqtt://HOST:PORT` with --mqtt-port; `tls://`, `https://`, `mqtts://` with --tls-cert), so a
 * script started with --port 0 learns the ports it got.
 */
import {
  ADMIN_HOST_DEFAULT,
  AUTH_TOKEN_BYTES_MAX,
  TIP_BYTES_DEFAULT,
  TIP_BYTES_MAX,
  TIP_BYTES_MIN,
} from "../constants.ts";
import { allowedHostProblem } from "../admin/mod.ts";
import { NODE_ID_PATTERN, processLog, runtime } from "../runtime/mod.ts";
import { parseTcpUrl } from "../client/mod.ts";
import { ACK_MODES } from "../replica/mod.ts";
import { FATAL_EXIT, FatalError, type FollowOptions, startServer } from "../server/mod.ts";
import type { FsyncPolicy } from "../store/mod.ts";
import { LOG_LEVELS, type LogFields } from "../stdx/log.ts";
import { parseDuration, parsePort, parseSize, UsageError } from "./args.ts";
import { EXIT_OK, type CliIo } from "./cli_io.ts";
import {
  describeSettings,
  type ResolvedSettings,
  resolveSettings,
  type SettingSpecs,
  settingLabel,
} from "./settings.ts";
import { SERVE_TLS_FLAGS, SERVE_TLS_USAGE, serveTlsOf, TLS_FILE_BYTES_MAX } from "./tls_files.ts";

const LOG_FORMATS = ["text", "json"] as const;

/** Usage of `aria serve`. */
export const SERVE_USAGE = `Usage: aria serve [options]

Runs the Aria server: the TCP protocol and the admin HTTP app.

Options:
  --host HOST            address to listen on (default 127.0.0.1)
  --port PORT            TCP protocol port; 0 picks a free one (default 7400)
  --admin-port PORT      admin HTTP port; 0 picks a free one (default 7401)
  --mqtt-port PORT       also serve MQTT 3.1.1 and 5.0 on this port (mqtts:// with --tls-cert);
                         0 picks a free one (default: no MQTT; docs/mqtt.md)
  --mqtt-aria-seq on|off each PUBLISH to an MQTT 5 subscriber carries user property aria-seq
                         (default on; off: byte-for-byte what other brokers send)
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
${SERVE_TLS_USAGE}  --follow URL           run as a replica of the leader at URL (tcp:// or tls://): hold its
                         log seq for seq, serve readers, refuse publishes (docs/cluster.md)
  --follow-auth-token TOKEN
                         the token this replica signs in to its leader with (default: none)
  --follow-ca FILE       trust this CA (PEM) for a tls:// leader (default: the system's CAs)
  --node-id ID           this node's name, as its leader lists it (default: a random one kept in
                         DATA_DIR/node-id)
  --acks MODE            leader | quorum | all: a publish is acknowledged once durable on this
                         server, on a majority of it and its replicas, or on every in-sync replica
                         too (default leader; docs/cluster.md)
  --replicas N           the replicas --acks quorum counts, connected yet or not (default: those
                         that connected since start)
  --isr-max-lag DURATION a replica not caught up with the leader within the last DURATION leaves
                         the in-sync set (default 10s; a quiet spell does not count)
  --log-format FORMAT    text | json: one line per event on stderr (default text)
  --log-level LEVEL      debug | info | warn | error: the least severe written (default info)
  --config FILE          settings from a TOML or JSON file, keys named as these flags
                         (docs/configuration.md)
  --print-config         print the settings in force and where each came from, tokens
                         redacted, and exit
  -h, --help             show this help

Every setting can also come from the environment: ARIA_ and the flag's name in capitals, "-" as
"_" (ARIA_ADMIN_PORT=7401; ARIA_CONFIG names a config file). A flag wins over the environment,
which wins over the config file.
`;

const FSYNC_POLICIES: readonly FsyncPolicy[] = ["always", "interval", "never"];
const ON_OFF: readonly string[] = ["on", "off"];

/** The settings of `aria serve`: its flags, `ARIA_*` variables and config-file keys (settings.ts). */
export const SERVE_SETTINGS: SettingSpecs = {
  host: { type: "string", default: "127.0.0.1" },
  port: { type: "string", default: "7400" },
  "admin-port": { type: "string", default: "7401" },
  "mqtt-port": { type: "string" },
  "mqtt-aria-seq": { type: "string", default: "on" },
  "data-dir": { type: "string", default: "./aria-data" },
  "tip-bytes": { type: "string", default: `${TIP_BYTES_DEFAULT / 1024 ** 2}MiB` },
  fsync: { type: "string", default: "always" },
  "retain-age": { type: "string" },
  "retain-bytes": { type: "string" },
  "auth-token": { type: "string", secret: true },
  users: { type: "string" },
  "admin-host": { type: "string", default: ADMIN_HOST_DEFAULT },
  "admin-token": { type: "string", secret: true },
  "admin-allowed-hosts": { type: "string", list: true },
  ...Object.fromEntries(Object.keys(SERVE_TLS_FLAGS).map((name) => [name, { type: "string" }])),
  follow: { type: "string" },
  "follow-auth-token": { type: "string", secret: true },
  "follow-ca": { type: "string" },
  "node-id": { type: "string" },
  acks: { type: "string", default: "leader" },
  "isr-max-lag": { type: "string", default: "10s" },
  replicas: { type: "string" },
  "log-format": { type: "string", default: "text" },
  "log-level": { type: "string", default: "info" },
};

/** Runs `aria serve`; resolves to the exit code after a signal stopped the server. */
export async function serveCommand(args: string[], io: CliIo): Promise<number> {
  // SIGHUP (systemctl reload) must never end the server, during start-up either: a reload asked
  // before it serves runs once it does; reloads asked while one runs are folded into one more.
  const reloads = new ReloadQueue();
  runtime.onReloadSignal(() => reloads.ask());
  const settings = await resolveSettings(SERVE_SETTINGS, args, io);
  const { values, positionals } = settings;
  if (values.help === true) {
    io.out(SERVE_USAGE);
    return EXIT_OK;
  }
  const label = (name: string) => settingLabel(settings, name);
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const fsync = oneOf(values.fsync, FSYNC_POLICIES, label("fsync"));
  const tipBytes = parseSize(values["tip-bytes"] as string, label("tip-bytes"));
  if (tipBytes < TIP_BYTES_MIN || tipBytes > TIP_BYTES_MAX)
    throw new UsageError(
      `${label("tip-bytes")}: must be between ${TIP_BYTES_MIN} and ${TIP_BYTES_MAX} bytes`,
    );
  const logFormat = oneOf(values["log-format"], LOG_FORMATS, label("log-format"));
  const logLevel = oneOf(values["log-level"], LOG_LEVELS, label("log-level"));
  const text = (name: string) => values[name] as string | undefined;
  const options = {
    host: text("host") as string,
    port: parsePort(text("port") as string, label("port")),
    adminPort: parsePort(text("admin-port") as string, label("admin-port")),
    mqttPort:
      text("mqtt-port") === undefined
        ? undefined
        : parsePort(text("mqtt-port") as string, label("mqtt-port")),
    mqttAriaSeq: oneOf(values["mqtt-aria-seq"], ON_OFF, label("mqtt-aria-seq")) === "on",
    dataDir: text("data-dir") as string,
    tipBytes: tipBytes - (tipBytes % 8),
    fsync,
    retainAgeUs:
      text("retain-age") === undefined
        ? undefined
        : parseDuration(text("retain-age") as string, label("retain-age")) * 1000,
    retainBytes:
      text("retain-bytes") === undefined
        ? undefined
        : parseSize(text("retain-bytes") as string, label("retain-bytes")),
    authToken: text("auth-token"),
    usersFile: text("users"),
    adminHost: text("admin-host") as string,
    adminToken: text("admin-token"),
    adminAllowedHosts: allowedHostsOf(text("admin-allowed-hosts"), label("admin-allowed-hosts")),
  };
  if (options.adminToken !== undefined && !/^[\x21-\x7e]+$/.test(options.adminToken))
    throw new UsageError(`${label("admin-token")}: must be printable ASCII without spaces`);
  // An empty host could mean every interface to the runtime: the admin app and its split routes open to all.
  if (options.host === "") throw new UsageError(`${label("host")}: must not be empty`);
  if (options.adminHost === "") throw new UsageError(`${label("admin-host")}: must not be empty`);
  // An empty token (an unset variable in `--auth-token "$TOKEN"`) would mean no auth at all.
  if (options.authToken === "")
    throw new UsageError(
      `${label("auth-token")}: must not be empty (leave it out for a server without auth)`,
    );
  // A token no client could send (HELLO carries at most AUTH_TOKEN_BYTES_MAX bytes) locks everyone out.
  if (
    options.authToken !== undefined &&
    new TextEncoder().encode(options.authToken).length > AUTH_TOKEN_BYTES_MAX
  )
    throw new UsageError(
      `${label("auth-token")}: longer than ${AUTH_TOKEN_BYTES_MAX} bytes, which no client can send`,
    );
  if (options.usersFile !== undefined && options.authToken !== undefined)
    throw new UsageError(
      `${label("users")} and ${label("auth-token")}: choose one (with users each client signs in with its user's token)`,
    );
  if (options.usersFile === "") throw new UsageError(`${label("users")}: must not be empty`);
  const nodeId = text("node-id");
  if (nodeId !== undefined && !NODE_ID_PATTERN.test(nodeId))
    throw new UsageError(`${label("node-id")}: 1 to 64 of A-Z a-z 0-9 _ . : -`);
  const acks = oneOf(values.acks, ACK_MODES, label("acks"));
  const isrMaxLagUs = parseDuration(text("isr-max-lag") as string, label("isr-max-lag")) * 1000;
  const replicas = text("replicas");
  if (replicas !== undefined && !/^\d{1,3}$/.test(replicas))
    throw new UsageError(`${label("replicas")}: a count of replicas, 0 to 999`);
  if (values["print-config"] === true) {
    io.out(describeSettings(SERVE_SETTINGS, settings));
    return EXIT_OK;
  }
  const tls = await serveTlsOf(values, label);
  if (!tls.ok) {
    io.err(`aria serve: Cannot serve TLS: ${tls.message}\n`);
    return FATAL_EXIT.tls;
  }
  const follow = await followOf(values, label);
  const log = processLog({ level: logLevel, format: logFormat });
  log.info("starting", startFields(settings));
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer({
      ...options,
      tls: tls.tls,
      adminTls: tls.adminTls,
      log,
      follow,
      nodeId,
      acks,
      isrMaxLagUs,
      replicasExpected: replicas === undefined ? undefined : Number(replicas),
    });
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
    log.warn("recovery cut a journal after its last whole record", {
      file: cut.file,
      offset: cut.offset,
      bytesCut: cut.bytesCut,
      after,
    });
  }
  if (recovery.journalsAdopted > 0)
    log.info(
      "recovery adopted the journal staged at the last roll (written while the one before it was sealed; its records continue it)",
    );
  for (const problem of recovery.problems)
    log.warn("recovery found a problem", { problem: JSON.stringify(problem) });
  // Listened for before the URL lines and the log say it serves: a supervisor may stop it then.
  const stopAsked = new Promise<string>((resolve) => runtime.onShutdownSignal(resolve));
  log.info("serving", { protocol: server.tcpUrl, admin: server.adminUrl, mqtt: server.mqttUrl });
  io.out(`${server.tcpUrl}\n${server.adminUrl}\n`);
  if (server.mqttUrl !== undefined) io.out(`${server.mqttUrl}\n`);
  // What a reload reads again: docs/operations.md.
  reloads.start(async () => {
    log.info("SIGHUP: reloading");
    try {
      const reloaded = await server.reloadUsers();
      if (reloaded.ok) log.info(reloaded.message);
      else log.error(reloaded.message);
    } catch (error) {
      log.error("reload failed", {
        reason: error instanceof Error ? error.message : String(error),
      });
    }
  });
  const ended = await Promise.race([stopAsked, server.failed]);
  if (ended instanceof FatalError) {
    // A replica that cannot go on (docs/cluster.md): stopped with its own exit code.
    io.err(`aria serve: ${ended.message}\n`);
    await server.stop();
    log.info("stopped");
    return ended.exitCode;
  }
  log.info("shutting down", { signal: ended });
  await server.stop();
  log.info("stopped");
  return EXIT_OK;
}

/** --follow and its client flags, checked and read (the CA file), or undefined. */
async function followOf(
  values: Record<string, string | boolean | undefined>,
  label: (name: string) => string,
): Promise<FollowOptions | undefined> {
  const url = values.follow as string | undefined;
  const authToken = values["follow-auth-token"] as string | undefined;
  const caPath = values["follow-ca"] as string | undefined;
  if (url === undefined) {
    for (const name of ["follow-auth-token", "follow-ca"])
      if (values[name] !== undefined) throw new UsageError(`${label(name)} needs --follow URL`);
    return undefined;
  }
  try {
    parseTcpUrl(url);
  } catch (error) {
    throw new UsageError(`${label("follow")}: ${(error as Error).message}`);
  }
  if (authToken === "") throw new UsageError(`${label("follow-auth-token")}: must not be empty`);
  if (caPath === undefined)
    return { url, authToken, tls: url.startsWith("tls://") ? {} : undefined };
  if (!url.startsWith("tls://"))
    throw new UsageError(`${label("follow-ca")} is for a tls:// leader; ${url} is plain TCP`);
  const read = await runtime.readTextFile(caPath, { bytesMax: TLS_FILE_BYTES_MAX });
  if (!read.ok) throw new UsageError(`${label("follow-ca")}: ${read.reason}`);
  return { url, authToken, tls: { ca: read.text } };
}

/** The start-up line's fields: every setting that is set, secrets redacted, and the config file. */
function startFields(settings: ResolvedSettings): LogFields {
  const fields: LogFields = { configFile: settings.configFile };
  for (const [name, spec] of Object.entries(SERVE_SETTINGS)) {
    const value = settings.values[name];
    if (value !== undefined) fields[name] = spec.secret === true ? "<redacted>" : value;
  }
  return fields;
}

/** The names of --admin-allowed-hosts (a DNS rebinding page cannot use any other name). */
function allowedHostsOf(value: string | undefined, label: string): string[] | undefined {
  if (value === undefined) return undefined;
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (names.length === 0)
    throw new UsageError(`${label}: give host names separated by commas, or *`);
  for (const name of names) {
    const problem = allowedHostProblem(name);
    if (problem !== null) throw new UsageError(`${label}: ${problem}`);
  }
  return names;
}

/** `value` if it is one of `allowed`; a usage error naming `label` otherwise. */
function oneOf<T extends string>(value: unknown, allowed: readonly T[], label: string): T {
  if (allowed.includes(value as T)) return value as T;
  throw new UsageError(`${label}: "${String(value)}" is not one of ${allowed.join(", ")}`);
}

/**
 * SIGHUPs to reloads: none runs before `start` (a reload asked earlier runs then), one at a time,
 * and any number asked while one runs make one more after it (each reload reads the newest file).
 */
export class ReloadQueue {
  private reload: (() => Promise<void>) | null = null;
  private asked = false;
  private running = false;

  /** A SIGHUP came. */
  ask(): void {
    this.asked = true;
    void this.drain();
  }

  /** The server serves: reloads may run (one asked before runs now). */
  start(reload: () => Promise<void>): void {
    this.reload = reload;
    void this.drain();
  }

  private async drain(): Promise<void> {
    if (this.running || this.reload === null) return;
    this.running = true;
    try {
      while (this.asked) {
        this.asked = false;
        await this.reload().catch(() => {});
      }
    } finally {
      this.running = false;
    }
  }
}
