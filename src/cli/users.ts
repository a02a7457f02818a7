/**
 * `aria users`: manages the users file of `aria serve --users FILE`. `add` makes a user and
 * prints its token once (`NAME:SECRET`; the file keeps only a salted hash), `token` gives a user
 * a new one (the old stops working at the server's next reload), `list` shows users and their
 * permissions, `remove` deletes one. The file is rewritten whole (a rename), so a server reloading
 * on SIGHUP reads the old file or the new one. A change holds the lock `FILE.lock` from its read
 * to its rename, so two `aria users` at once apply both changes, one after the other (without it,
 * a `remove` beside an `add` could be lost while both exited 0).
 *
 * Not here: the file format (src/auth/users_file.ts), hashing (the runtime's token_kdf).
 */
import { formatUsersFile, parseUsersFile, ROLES, type Role, type UserRecord } from "../auth/mod.ts";
import { Filter } from "../topic/mod.ts";
import {
  hashToken,
  lockBeside,
  newToken,
  runtime,
  tokenHashProblem,
  writeTextFileAtomic,
} from "../runtime/mod.ts";
import { parseCommand, UsageError } from "./args.ts";
import { type CliIo, EXIT_FAILURE, EXIT_OK } from "./cli_io.ts";

/** The users file when neither --users nor ARIA_USERS names one. */
const USERS_FILE_DEFAULT = "aria-users.json";
const USERS_FILE_BYTES_MAX = 64 * 1024 * 1024;

/** Usage of `aria users`. */
export const USERS_USAGE = `Usage: aria users <add|token|list|remove> [NAME] [options]

Manages the users file of 'aria serve --users FILE' (docs/security.md). A token is printed once,
as NAME:SECRET; the file keeps only its salted hash. Send SIGHUP to a running server to apply.

  aria users add NAME [permissions]   a new user; prints its token
  aria users token NAME               a new token for NAME (the old one stops at the next reload)
  aria users list                     users, credentials and permissions
  aria users remove NAME              deletes NAME

Options:
  --users FILE             the users file (default $ARIA_USERS, else ${USERS_FILE_DEFAULT})
  --publish FILTER         may publish to FILTER (app/orders/**, an exact topic); repeatable
  --subscribe FILTER       may subscribe to FILTER; repeatable
  --deny-publish FILTER    may never publish there, whatever is allowed; repeatable
  --deny-subscribe FILTER  may never subscribe to anything touching it; repeatable
  --role ROLE              admin: may use the admin app's routes; repeatable
  --cert-subject SUBJECT   signs in with a client certificate of this subject (mutual TLS)
  --no-token               add a user that signs in only with its certificate
  -h, --help               show this help
`;

/** Runs `aria users`. */
export async function usersCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    users: { type: "string" },
    publish: { type: "string", multiple: true },
    subscribe: { type: "string", multiple: true },
    "deny-publish": { type: "string", multiple: true },
    "deny-subscribe": { type: "string", multiple: true },
    role: { type: "string", multiple: true },
    "cert-subject": { type: "string" },
    "no-token": { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(USERS_USAGE);
    return EXIT_OK;
  }
  const [action, name, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const path =
    typeof values.users === "string" ? values.users : io.env?.().ARIA_USERS || USERS_FILE_DEFAULT;
  const needsName = action === "add" || action === "token" || action === "remove";
  if (action === undefined || !(needsName || action === "list"))
    throw new UsageError(`give one of add, token, list, remove (not "${action ?? ""}")`);
  if (needsName && name === undefined) throw new UsageError(`${action}: give the user's NAME`);
  if (!needsName && name !== undefined) throw new UsageError(`unexpected argument "${name}"`);

  if (action === "list") return list(path, io);
  const locked = await lockBeside(path);
  if (!locked.ok) {
    io.err(`aria users: ${locked.reason}\n`);
    return EXIT_FAILURE;
  }
  try {
    return await change(action, name as string, path, values, io);
  } finally {
    await locked.lock.release();
  }
}

async function list(path: string, io: CliIo): Promise<number> {
  const read = await readRecords(path, false);
  if (!read.ok) {
    io.err(`aria users: ${read.error}\n`);
    return EXIT_FAILURE;
  }
  io.out(read.records.length === 0 ? `no users in ${path}\n` : read.records.map(describe).join(""));
  return EXIT_OK;
}

/** add, token or remove `name`, the lock held. */
async function change(
  action: "add" | "token" | "remove",
  name: string,
  path: string,
  values: Record<string, unknown>,
  io: CliIo,
): Promise<number> {
  const read = await readRecords(path, action === "add");
  if (!read.ok) {
    io.err(`aria users: ${read.error}\n`);
    return EXIT_FAILURE;
  }
  const records = read.records;
  const index = records.findIndex((record) => record.name === name);
  if (action !== "add" && index < 0) {
    io.err(`aria users: no user "${name}" in ${path}\n`);
    return EXIT_FAILURE;
  }
  let token: string | null = null;
  if (action === "remove") records.splice(index, 1);
  else if (action === "token") {
    token = newToken();
    records[index] = { ...records[index], tokenHash: hashToken(token) };
  } else {
    if (index >= 0) {
      io.err(
        `aria users: user "${name}" exists in ${path} (aria users token ${name} renews its token)\n`,
      );
      return EXIT_FAILURE;
    }
    const record = recordOf(name, values);
    if (record.tokenHash === null && record.certSubject === null)
      throw new UsageError("--no-token: give --cert-subject, or the user cannot sign in");
    token = values["no-token"] === true ? null : newToken();
    records.push({ ...record, tokenHash: token === null ? null : hashToken(token) });
  }
  // The text must read back: a record this command built goes through the server's own parser.
  const text = formatUsersFile(records);
  const check = parseUsersFile(text, { tokenHashProblem });
  if (!check.ok) throw new UsageError(check.error.replace(/^\d+:\d+: /, ""));
  const written = await writeTextFileAtomic(path, text);
  if (!written.ok) {
    io.err(`aria users: Cannot write ${path}: ${written.reason}\n`);
    return EXIT_FAILURE;
  }
  if (token !== null) {
    io.out(`${name}:${token}\n`);
    io.err(`aria users: the token above is shown once; ${path} keeps only its hash\n`);
  } else io.err(`aria users: ${action === "remove" ? "removed" : "added"} "${name}" in ${path}\n`);
  return EXIT_OK;
}

async function readRecords(
  path: string,
  missingIsEmpty: boolean,
): Promise<{ ok: true; records: UserRecord[] } | { ok: false; error: string }> {
  const read = await runtime.readTextFile(path, { bytesMax: USERS_FILE_BYTES_MAX });
  if (!read.ok) {
    if (missingIsEmpty && read.reason.includes("no such file")) return { ok: true, records: [] };
    return { ok: false, error: `Cannot read ${path}: ${read.reason}` };
  }
  const parsed = parseUsersFile(read.text, { tokenHashProblem });
  if (!parsed.ok) return { ok: false, error: `${path}:${parsed.error}` };
  return { ok: true, records: parsed.users.map((user) => user.record) };
}

function recordOf(name: string, values: Record<string, unknown>): UserRecord {
  const list = (key: string): string[] => {
    const texts = (values[key] as string[] | undefined) ?? [];
    for (const text of texts) {
      const parsed = Filter.parse([text]);
      if (!parsed.ok) throw new UsageError(`--${key}: ${parsed.reason}`);
    }
    return texts;
  };
  const roles = (values.role as string[] | undefined) ?? [];
  for (const role of roles)
    if (!(ROLES as readonly string[]).includes(role))
      throw new UsageError(`--role: unknown role "${role}" (roles: ${ROLES.join(", ")})`);
  const certSubject = typeof values["cert-subject"] === "string" ? values["cert-subject"] : null;
  return {
    name,
    tokenHash: values["no-token"] === true ? null : "pending",
    certSubject,
    publish: { allow: list("publish"), deny: list("deny-publish") },
    subscribe: { allow: list("subscribe"), deny: list("deny-subscribe") },
    roles: roles as Role[],
  };
}

function describe(record: UserRecord): string {
  const credentials = [
    record.tokenHash === null ? null : "token",
    record.certSubject === null ? null : `certificate "${record.certSubject}"`,
  ].filter((text) => text !== null);
  const rule = (allow: string[], deny: string[]) =>
    `${allow.length === 0 ? "nothing" : allow.join(" ")}${deny.length === 0 ? "" : ` except ${deny.join(" ")}`}`;
  return [
    `${record.name}${record.roles.length === 0 ? "" : ` (${record.roles.join(", ")})`}: ${credentials.join(", ")}`,
    `  publish:   ${rule(record.publish.allow, record.publish.deny)}`,
    `  subscribe: ${rule(record.subscribe.allow, record.subscribe.deny)}`,
    "",
  ].join("\n");
}
