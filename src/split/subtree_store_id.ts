/**
 * Subtree store ids: the stable, readable, file-name-safe name of a subtree store.
 *
 * An id is the topic prefix the subtree store is cut at, with `/` written `+` (a character no topic may
 * hold, so the mapping is one-to-one) and every character outside `[A-Za-z0-9._-]` written `%XX`:
 * `app/orders/new` -> `app+orders+new`. A store holding only the topic named exactly by a prefix
 * that also has topics below it gets a trailing `=` (`app/orders` alone -> `app+orders=`).
 * A leading `.` is escaped, so no id is `.`, `..` or hidden. An id longer than
 * SPLIT_STORE_ID_BYTES_MAX keeps its first bytes and ends in `~` + a hash of the whole prefix.
 * Pure: the same prefix always gives the same id.
 */
import { SPLIT_STORE_ID_BYTES_MAX } from "../constants.ts";

const HASH_SUFFIX_BYTES = 9; // "~" + 8 hex digits
/** Prefixes needing no escape (the common case): safe characters and "/", no leading ".". */
const PLAIN = /^[A-Za-z0-9_-][A-Za-z0-9._/-]*$/;

/** The id of the subtree store cut at `prefix`; `exact` when it holds only the topic `prefix` itself. */
export function subtreeStoreIdOf(prefix: string, exact: boolean): string {
  if (PLAIN.test(prefix)) {
    const plain = prefix.replaceAll("/", "+") + (exact ? "=" : "");
    if (plain.length <= SPLIT_STORE_ID_BYTES_MAX) return plain;
  }
  let id = "";
  for (let i = 0; i < prefix.length; i++) {
    const code = prefix.charCodeAt(i);
    if (code === 0x2f) id += "+";
    else if (isSafe(code) && !(i === 0 && code === 0x2e)) id += prefix[i];
    else id += `%${code.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  if (exact) id += "=";
  if (id.length <= SPLIT_STORE_ID_BYTES_MAX) return id;
  // Cut at a whole escape so the kept part stays readable; the hash keeps distinct prefixes apart.
  let keep = SPLIT_STORE_ID_BYTES_MAX - HASH_SUFFIX_BYTES;
  const percent = id.lastIndexOf("%", keep);
  if (percent > keep - 3) keep = percent;
  return `${id.slice(0, keep)}~${fnv1a32(id).toString(16).padStart(8, "0")}`;
}

function isSafe(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) ||
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    code === 0x2e ||
    code === 0x5f ||
    code === 0x2d
  );
}

function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++)
    hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash >>> 0;
}
