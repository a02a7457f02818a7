/**
 * Topic names: validation with a reason, and the partition a topic belongs to.
 * A topic is 1..TOPIC_SEGMENTS_MAX non-empty segments joined by "/", at most TOPIC_BYTES_MAX
 * bytes, printable ASCII without whitespace and without the wildcard characters `*`, `#`, `+`.
 * Pure: strings in, strings out.
 */
import { PARTITION_SEGMENTS, TOPIC_BYTES_MAX, TOPIC_SEGMENTS_MAX } from "../constants.ts";

const CODE_SLASH = 0x2f;

/** Returns null when `name` is a valid topic, else the reason it is not. */
export function validateTopic(name: string): string | null {
  if (typeof name !== "string") return "topic must be a string";
  if (name.length === 0) return "topic is empty";
  if (name.length > TOPIC_BYTES_MAX) {
    return `topic is ${name.length} bytes, more than the limit of ${TOPIC_BYTES_MAX}`;
  }
  let segments = 1;
  let segmentBytes = 0;
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code === CODE_SLASH) {
      if (segmentBytes === 0) {
        return i === 0 ? "topic starts with '/'" : `topic has an empty segment at byte ${i}`;
      }
      segments++;
      segmentBytes = 0;
      continue;
    }
    const reason = characterReason(code);
    if (reason !== null) return `topic has ${reason} at byte ${i}`;
    segmentBytes++;
  }
  if (segmentBytes === 0) return "topic ends with '/'";
  if (segments > TOPIC_SEGMENTS_MAX) {
    return `topic has ${segments} segments, more than the limit of ${TOPIC_SEGMENTS_MAX}`;
  }
  return null;
}

function characterReason(code: number): string | null {
  if (code === 0x2a || code === 0x23 || code === 0x2b) {
    return `wildcard character '${String.fromCharCode(code)}'`;
  }
  if (code <= 0x20 || code === 0x7f) return "whitespace or a control character";
  if (code > 0x7f) return "a non-ASCII character";
  return null;
}

/** The partition of a valid topic: its first PARTITION_SEGMENTS segments. */
export function partitionOf(name: string): string {
  let slash = -1;
  for (let i = 0; i < PARTITION_SEGMENTS; i++) {
    slash = name.indexOf("/", slash + 1);
    if (slash < 0) return name;
  }
  return name.slice(0, slash);
}

/** True when `name` equals `prefix` or lies below it (`a/b` is under `a` and under `a/b`). */
export function isUnder(name: string, prefix: string): boolean {
  if (prefix.length === 0) return true;
  if (!name.startsWith(prefix)) return false;
  return name.length === prefix.length || name.charCodeAt(prefix.length) === CODE_SLASH;
}
