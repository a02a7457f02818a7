/**
 * Bearer-token check of the admin app: `Authorization: Bearer <token>` (scheme case-insensitive,
 * RFC 6750). The comparison takes the same time wherever the first difference is, so response
 * times do not leak a prefix of the token. Pure.
 */

const encoder = new TextEncoder();

/** Whether an Authorization header carries exactly `token`. */
export function bearerTokenMatches(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (match === null) return false;
  return sameBytes(encoder.encode(match[1]), encoder.encode(token));
}

/** Constant-time equality of two byte strings (the length is not secret). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.length ^ b.length;
  const length = Math.max(a.length, b.length);
  for (let i = 0; i < length; i++) difference |= (a[i % a.length] ?? 0) ^ (b[i % b.length] ?? 0);
  return difference === 0;
}
