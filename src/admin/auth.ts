/**
 * Bearer-token check of the admin app: `Authorization: Bearer <token>` (scheme case-insensitive,
 * RFC 6750). The comparison takes the same time wherever the first difference is, so response
 * times do not leak a prefix of the token (sameSecret). Pure.
 */
import { sameSecret } from "../stdx/secret.ts";

/** Whether an Authorization header carries exactly `token`. */
export function bearerTokenMatches(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (match === null) return false;
  return sameSecret(match[1], token);
}
