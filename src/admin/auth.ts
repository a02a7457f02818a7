/**
 * Bearer-token check of the admin app: `Authorization: Bearer <token>` (scheme case-insensitive,
 * RFC 6750). The credential is one token, compared in the same time wherever the first
 * difference is, so response times do not leak a prefix of the token (sameSecret); or, with a
 * users file, a check that the bearer signs in as a user with the `admin` role (the server's,
 * src/server/server.ts), which may take a KDF's time once per token. Pure.
 */
import { sameSecret } from "../stdx/secret.ts";

/**
 * The admin app's credential: one token, or a check of a bearer token (users with `admin`) sent
 * from `address` (the client's IP, when the runtime says).
 */
export type AdminCredential =
  | string
  | ((bearer: string, address?: string) => boolean | Promise<boolean>);

/** Whether an Authorization header carries a bearer token `credential` accepts. */
export function bearerTokenMatches(
  header: string | undefined,
  credential: AdminCredential,
  address?: string,
): boolean | Promise<boolean> {
  if (header === undefined) return false;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (match === null) return false;
  if (typeof credential === "function") return credential(match[1], address);
  return sameSecret(match[1], credential);
}
