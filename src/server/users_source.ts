/**
 * users_source: the users file of `aria serve --users FILE` read from disk into the broker's
 * Users (tokens verified with the runtime's scrypt), reloaded on SIGHUP, and the admin app's
 * check that a bearer token belongs to a user with the `admin` role.
 *
 * Not here: the file format and permissions (src/auth/). Invariants: a file that fails to read
 * or parse changes nothing (the users loaded before stay); every error names the file, and the
 * line and column where the text is wrong.
 */
import type { AdminCredential } from "../admin/mod.ts";
import { parseUsersFile, type User, Users } from "../auth/mod.ts";
import { runtime, tokenDigest, tokenHashProblem, verifyToken } from "../runtime/mod.ts";
import { sameSecret } from "../stdx/secret.ts";

/** A users file larger than this is refused (a million users is ~300 MB; this is far beyond use). */
const USERS_FILE_BYTES_MAX = 64 * 1024 * 1024;

/** Reads and parses `path`: its users, or why not (`PATH:LINE:COLUMN: reason`). */
export async function readUsersFile(
  path: string,
): Promise<{ ok: true; users: User[] } | { ok: false; error: string }> {
  const read = await runtime.readTextFile(path, { bytesMax: USERS_FILE_BYTES_MAX });
  if (!read.ok) return { ok: false, error: `${path}: ${read.reason}` };
  const parsed = parseUsersFile(read.text, { tokenHashProblem });
  return parsed.ok ? parsed : { ok: false, error: `${path}:${parsed.error}` };
}

/** The broker's users over the runtime's KDF. */
export function usersOf(list: readonly User[]): Users {
  return new Users(list, { verify: verifyToken, digest: tokenDigest });
}

/** Reads `path` again into `users`; what to log, saying what changed or why nothing did. */
export async function reloadUsers(
  path: string,
  users: Users,
): Promise<{ ok: boolean; message: string }> {
  const read = await readUsersFile(path);
  const before = users.all().length;
  if (!read.ok)
    return {
      ok: false,
      message: `users not reloaded: ${read.error}; keeping the ${before} users loaded before`,
    };
  users.replace(read.users);
  return { ok: true, message: `users reloaded from ${path}: ${read.users.length} users` };
}

/**
 * The admin app's credential with a users file: a user's token whose user has the `admin` role,
 * or `adminToken` when one is set too (what `aria split` finds in the data directory's lock).
 * A bearer token refused is told to `onRefused` (counted with the failed sign-ins, and logged).
 * A token not verified before shares the KDF gate with HELLOs, as the source "admin app": a flood
 * of bearer tokens gets one turn in the queue, never all the verifications.
 */
export function adminCredentialOf(
  users: Users,
  adminToken: string | undefined,
  onRefused: (reason: string, address: string | undefined) => void = () => {},
): AdminCredential {
  return async (bearer, address) => {
    if (adminToken !== undefined && sameSecret(bearer, adminToken)) return true;
    // Its KDF waits its turn with the protocol's sign-ins (Users' gate), as one source.
    const signIn = await users.signIn(bearer, undefined, "admin app");
    if (signIn.ok && signIn.user.admin) return true;
    onRefused(
      signIn.ok ? `user "${signIn.user.name}" does not have the admin role` : signIn.reason,
      address,
    );
    return false;
  };
}
