/**
 * TopicMapping: the one place the door turns MQTT topic names and filters into Aria's and back.
 * The door is handed one (mqtt_door.ts); `ariaTopicMapping` is built on topic_map.ts's lossless
 * mapping. A session never looks at topic syntax itself.
 */
import { Filter, validateTopic } from "../topic/mod.ts";

/** An MQTT filter as the door subscribes it. */
export type MappedFilter =
  | { ok: true; entries: string[]; share: string | null; dollarExcluded: boolean }
  | { ok: false; reason: string };

/** MQTT names and filters ↔ Aria topics and filter entries. */
export interface TopicMapping {
  /** The Aria topic of an MQTT topic name, or why it has none (too long once mapped). */
  topicToAria(name: string): { ok: true; topic: string } | { ok: false; reason: string };
  /** The MQTT topic name of an Aria topic. */
  topicFromAria(topic: string): string;
  /** The Aria filter entries of an MQTT filter; `$share/G/f` gives the group G. */
  filterToAria(filter: string): MappedFilter;
  /** MQTT's `$` rule: true when an MQTT topic name starts with `$` (no leading wildcard matches it). */
  isDollarTopic(name: string): boolean;
}

/**
 * A mapping for topics that are valid on both sides as they are (`a/b`, filters of whole-level
 * `+` and `#`): what the door uses until topic_map.ts's lossless mapping is wired in. A name that
 * is not a valid Aria topic is refused.
 */
export const plainTopicMapping: TopicMapping = {
  topicToAria(name) {
    const problem = validateTopic(name);
    return problem === null ? { ok: true, topic: name } : { ok: false, reason: problem };
  },
  topicFromAria: (topic) => topic,
  filterToAria(filter) {
    let share: string | null = null;
    let text = filter;
    if (text.startsWith("$share/")) {
      const rest = text.slice("$share/".length);
      const slash = rest.indexOf("/");
      if (slash <= 0) return { ok: false, reason: `shared filter "${filter}" has no group` };
      share = rest.slice(0, slash);
      text = rest.slice(slash + 1);
    }
    const levels = text.split("/");
    // `+` is Aria's `*`, `#` its `**` (MQTT's `a/#` matches `a` too, as Aria's `a/**` does).
    const converted = levels.map((level) => (level === "+" ? "*" : level === "#" ? "**" : level));
    const entries = [converted.join("/")];
    const parsed = Filter.parse(entries);
    if (!parsed.ok) return { ok: false, reason: parsed.reason };
    const first = levels[0];
    return { ok: true, entries, share, dollarExcluded: first === "+" || first === "#" };
  },
  isDollarTopic: (name) => name.startsWith("$"),
};
