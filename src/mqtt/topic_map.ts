/**
 * MQTT topic names and filters ↔ Aria topics and filter entries, lossless and injective.
 * MQTT allows any UTF-8 but U+0000, empty levels (`a//b`, `/a`, `a/`), spaces and 65,535 bytes;
 * an Aria topic is printable ASCII without space, `*`, `#`, `+`, with no empty segment and at most
 * TOPIC_BYTES_MAX bytes and TOPIC_SEGMENTS_MAX segments. Per level:
 *
 *   an Aria-valid name without `%`   → itself            `sensors/kitchen` → `sensors/kitchen`
 *   a byte outside Aria's characters → `%XX` (hex, upper) `a b/é` → `a%20b/%C3%A9`
 *   `%` itself                       → `%25`             `100%` → `100%25`
 *   an empty level                   → `%` (a lone `%`)   `a//b` → `a/%/b`, `/a` → `%/a`
 *
 * A lone `%` is never the encoding of anything else (an encoded `%` is always followed by two hex
 * digits), so the mapping is injective; a name too long once mapped is refused (the door answers
 * 0x90 topic name invalid, or 0x8F for a filter). Filters: `+` → `*`, `#` → `**` (MQTT's `a/#`
 * matches `a` as Aria's `a/**` does), `$share/G/f` → group G and filter f. MQTT's `$` rule (a
 * filter whose first level is a wildcard does not match a topic whose first level starts with `$`)
 * has no Aria counterpart: `dollarExcluded` and `isDollarTopic` let the door apply it.
 * Pure: strings in, strings out.
 */
import { TOPIC_BYTES_MAX, TOPIC_SEGMENTS_MAX } from "../constants.ts";
import { Filter, validateTopic } from "../topic/mod.ts";
import { REASON } from "./packets.ts";

/** The Aria spelling of an empty MQTT level. */
export const EMPTY_LEVEL = "%";
const SHARE_PREFIX = "$share/";

/** A mapped topic name, or why it has none (with the MQTT 5 reason code to answer). */
export type TopicMapResult =
  | { ok: true; topic: string }
  | { ok: false; reason: string; reasonCode: number };

/** A mapped filter: its Aria filter entries, its shared group, and whether `$` topics are out. */
export type FilterMapResult =
  | {
      ok: true;
      /** The Aria filter entries (one per MQTT filter). */
      entries: string[];
      /** The group G of `$share/G/f`, else null. */
      share: string | null;
      /** True when the first level is `+` or `#`: topics starting with `$` do not match. */
      dollarExcluded: boolean;
    }
  | { ok: false; reason: string; reasonCode: number };

/** Characters kept as they are: printable ASCII but `%`, `*`, `#`, `+` (and `/`, the separator). */
const KEPT: readonly boolean[] = Array.from(
  { length: 128 },
  (_, code) => code > 0x20 && code < 0x7f && !"%*#+/".includes(String.fromCharCode(code)),
);
const HEX = "0123456789ABCDEF";
const UTF8 = new TextEncoder();
const UTF8_DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function encodeLevel(level: string): string {
  if (level.length === 0) return EMPTY_LEVEL;
  let out = "";
  let index = 0;
  while (index < level.length) {
    const code = level.charCodeAt(index);
    if (code < 128 && KEPT[code]) {
      out += level[index];
      index++;
      continue;
    }
    // A run of characters to escape, as the hex of its UTF-8 bytes.
    let end = index + 1;
    while (end < level.length) {
      const next = level.charCodeAt(end);
      if (next < 128 && KEPT[next]) break;
      end++;
    }
    for (const byte of UTF8.encode(level.slice(index, end))) {
      out += `%${HEX[byte >> 4]}${HEX[byte & 15]}`;
    }
    index = end;
  }
  return out;
}

/** True when `name` needs no escaping: a valid Aria topic without `%`. */
function isPlain(name: string): boolean {
  return !name.includes("%") && validateTopic(name) === null;
}

function checkSize(topic: string, what: string): string | null {
  if (topic.length > TOPIC_BYTES_MAX) {
    return `${what} is ${topic.length} bytes as an Aria topic, more than ${TOPIC_BYTES_MAX}`;
  }
  let segments = 1;
  for (let i = 0; i < topic.length; i++) if (topic.charCodeAt(i) === 0x2f) segments++;
  if (segments > TOPIC_SEGMENTS_MAX) {
    return `${what} has ${segments} levels, more than Aria's ${TOPIC_SEGMENTS_MAX}`;
  }
  return null;
}

/** The Aria topic of an MQTT topic name (non-empty, without wildcards, well-formed UTF-8). */
export function mqttTopicToAria(name: string): TopicMapResult {
  const invalid = (reason: string) => ({
    ok: false as const,
    reason,
    reasonCode: REASON.TOPIC_NAME_INVALID,
  });
  if (isPlain(name)) return { ok: true, topic: name };
  if (name.length === 0) return invalid("topic name is empty");
  if (name.includes("+") || name.includes("#")) {
    return invalid(`topic name "${name.slice(0, 64)}" contains a wildcard`);
  }
  if (name.includes("\u0000") || !name.isWellFormed()) {
    return invalid("topic name is not well-formed UTF-8 without U+0000");
  }
  const topic = name.split("/").map(encodeLevel).join("/");
  const tooBig = checkSize(topic, `topic name "${name.slice(0, 64)}"`);
  return tooBig === null ? { ok: true, topic } : invalid(tooBig);
}

/**
 * The MQTT topic name of an Aria topic: the inverse of mqttTopicToAria on its results. A native
 * topic that is not such a result (a `%` not followed by hex, `%41` for `A`) is shown as it is.
 */
export function ariaTopicToMqtt(topic: string): string {
  if (!topic.includes("%")) return topic;
  const levels = topic.split("/");
  const decoded: string[] = [];
  for (const level of levels) {
    if (level === EMPTY_LEVEL) {
      decoded.push("");
      continue;
    }
    const text = decodeLevel(level);
    if (text === null) return topic;
    decoded.push(text);
  }
  const name = decoded.join("/");
  const back = mqttTopicToAria(name);
  return back.ok && back.topic === topic ? name : topic;
}

function decodeLevel(level: string): string | null {
  const bytes: number[] = [];
  for (let index = 0; index < level.length; index++) {
    const code = level.charCodeAt(index);
    if (code > 0x7f) return null;
    if (code !== 0x25) {
      bytes.push(code);
      continue;
    }
    if (index + 2 >= level.length) return null;
    const high = HEX.indexOf(level[index + 1]);
    const low = HEX.indexOf(level[index + 2]);
    if (high < 0 || low < 0) return null;
    bytes.push(high * 16 + low);
    index += 2;
  }
  try {
    return UTF8_DECODER.decode(Uint8Array.from(bytes));
  } catch {
    return null;
  }
}

/** True when an MQTT topic name is a `$` topic (its first level starts with `$`). */
export function isDollarTopic(name: string): boolean {
  return name.charCodeAt(0) === 0x24;
}

/**
 * The Aria filter of an MQTT topic filter (`$share/G/f` parsed into group G and filter f), or why
 * it is invalid: a `+` or `#` not alone in its level, a `#` not last, an empty filter or group.
 */
export function mqttFilterToAria(filter: string): FilterMapResult {
  const invalid = (reason: string) => ({
    ok: false as const,
    reason,
    reasonCode: REASON.TOPIC_FILTER_INVALID,
  });
  let share: string | null = null;
  let text = filter;
  if (filter.startsWith(SHARE_PREFIX)) {
    const rest = filter.slice(SHARE_PREFIX.length);
    const slash = rest.indexOf("/");
    if (slash < 0) return invalid(`shared filter "${filter.slice(0, 64)}" has no topic filter`);
    share = rest.slice(0, slash);
    if (share.length === 0) return invalid("shared filter has an empty group name");
    if (share.includes("+") || share.includes("#")) {
      return invalid(`shared group "${share.slice(0, 64)}" contains a wildcard`);
    }
    text = rest.slice(slash + 1);
  }
  if (text.length === 0) return invalid("topic filter is empty");
  if (text.includes("\u0000") || !text.isWellFormed()) {
    return invalid("topic filter is not well-formed UTF-8 without U+0000");
  }
  const levels = text.split("/");
  const mapped: string[] = [];
  for (let index = 0; index < levels.length; index++) {
    const level = levels[index];
    if (level === "+") {
      mapped.push("*");
    } else if (level === "#") {
      if (index !== levels.length - 1)
        return invalid(`'#' is not the last level of "${text.slice(0, 64)}"`);
      mapped.push("**");
    } else if (level.includes("+") || level.includes("#")) {
      return invalid(`a wildcard is not a whole level in "${text.slice(0, 64)}"`);
    } else {
      mapped.push(encodeLevel(level));
    }
  }
  const entry = mapped.join("/");
  // `**` counts as a level here but is no segment of a topic: size the matched topics.
  const tooBig = checkSize(entry.endsWith("/**") ? entry.slice(0, -3) : entry, "topic filter");
  if (tooBig !== null) return invalid(tooBig);
  const parsed = Filter.parse([entry]);
  if (!parsed.ok) return invalid(parsed.reason);
  return {
    ok: true,
    entries: [entry],
    share,
    dollarExcluded: levels[0] === "+" || levels[0] === "#",
  };
}

/**
 * The MQTT matching rule, written from the spec (4.7): a reference for tests, and for a caller
 * that holds MQTT strings. `filter` without `$share/`; `$` topics skip leading wildcards.
 */
export function mqttFilterMatches(filter: string, name: string): boolean {
  const filterLevels = filter.split("/");
  const nameLevels = name.split("/");
  if (isDollarTopic(name) && (filterLevels[0] === "+" || filterLevels[0] === "#")) return false;
  for (let index = 0; index < filterLevels.length; index++) {
    const level = filterLevels[index];
    if (level === "#") return true;
    if (index >= nameLevels.length) return false;
    if (level !== "+" && level !== nameLevels[index]) return false;
  }
  return filterLevels.length === nameLevels.length;
}
