/**
 * Foreign syntax: advice for topics and filters written as another system writes them — MQTT's
 * `#` (multi-level) and `+` (single-level) wildcards, NATS's `.` separator with its `*` and `>`
 * wildcards — so that a habit gets a sentence saying what Aria writes instead, never a silent
 * wrong answer. Only words: validation (topic.ts, filter.ts) decides what is valid: `#`, `+`,
 * `*` are invalid in a topic whatever this says, and `*` as a whole segment is Aria's own
 * single-level wildcard in a filter (so `a/*` gets no advice); `orders.>` is a valid topic, which the CLI
 * refuses with this advice because no one means it (filter.ts adds the advice to its reasons).
 * Pure: strings in, strings out.
 */

/** The subtree filter of `prefix` (`**` for everything). */
function subtreeOf(prefix: readonly string[]): string {
  return prefix.length === 0 ? "**" : `${prefix.join("/")}/**`;
}

/** MQTT's single-level `+` segments as Aria's `*`. */
function starred(segments: readonly string[]): string[] {
  return segments.map((segment) => (segment === "+" ? "*" : segment));
}

/**
 * What to write instead of a filter (or topic) that uses MQTT's or NATS's wildcards, or null when
 * it uses none: `app/#`, `app/+/x`, `orders.>`, `orders.*`, `>`. Aria's `*` (a whole segment)
 * gets none.
 */
export function foreignFilterAdvice(text: string): string | null {
  const segments = text.split("/");
  const mqttMulti = segments.indexOf("#");
  if (mqttMulti >= 0) {
    const prefix = starred(segments.slice(0, mqttMulti));
    return `'#' is MQTT's multi-level wildcard: Aria writes ${subtreeOf(prefix)} (${prefix.length === 0 ? "every topic" : `${prefix.join("/")} and every topic below it`})`;
  }
  const mqttSingle = segments.indexOf("+");
  if (mqttSingle >= 0) {
    return `'+' is MQTT's single-level wildcard: Aria writes ${starred(segments).join("/")}`;
  }
  if (text === ">") return "'>' is NATS's wildcard for everything: Aria writes **";
  for (let index = 0; index < segments.length; index++) {
    const tokens = segments[index].split(".");
    if (tokens.length < 2) continue;
    /** The segments before the NATS wildcard at token `end`, as Aria writes them. */
    const before = (end: number) =>
      [...segments.slice(0, index), ...tokens.slice(0, end)].filter((token) => token !== "");
    if (tokens[tokens.length - 1] === ">") {
      return `Aria's separator is '/', not '.' (NATS's): the subtree is ${subtreeOf(before(tokens.length - 1))}`;
    }
    const star = tokens.indexOf("*");
    if (star >= 0) {
      const rest = segments.slice(index + 1).flatMap((segment) => segment.split("."));
      const aria = [...before(tokens.length), ...rest].filter((token) => token !== "");
      return `Aria's separator is '/', not '.' (NATS's): Aria writes ${aria.join("/")}`;
    }
  }
  return null;
}

/**
 * A warning for a topic that is legal in Aria but reads as a dotted name of another system
 * (`orders.created`: one segment, not two), or null. Only names without any `/`: whoever wrote a
 * `/` knows Aria's separator, and `app/v1.2` or `files/a.txt` mean their dots.
 */
export function dottedTopicAdvice(text: string): string | null {
  if (!/^[^./*#+>]+(\.[^./*#+>]+)+$/.test(text)) return null;
  const tokens = text.split(".");
  return `Aria's separator is '/', not '.': this is one segment (${tokens.join("/")} has ${tokens.length})`;
}
