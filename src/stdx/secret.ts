/**
 * secret: comparing secrets (auth tokens) in a time that does not depend on where they first
 * differ, so response times do not leak a prefix of the secret. Pure.
 */

const encoder = new TextEncoder();

/** Whether `a` and `b` are the same string, in constant time for a given length (the length is not secret). */
export function sameSecret(a: string, b: string): boolean {
  return sameBytes(encoder.encode(a), encoder.encode(b));
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.length ^ b.length;
  const length = Math.max(a.length, b.length);
  for (let i = 0; i < length; i++) difference |= (a[i % a.length] ?? 0) ^ (b[i % b.length] ?? 0);
  return difference === 0;
}
