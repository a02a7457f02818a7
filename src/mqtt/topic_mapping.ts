/**
 * TopicMapping: the one place the door turns MQTT topic names and filters into Aria's and back.
 * The door is handed one (mqtt_door.ts); `ariaTopicMapping` is built on topic_map.ts's lossless
 * mapping. A session never looks at topic syntax itself.
 */
import { ariaTopicToMqtt, isDollarTopic, mqttFilterToAria, mqttTopicToAria } from "./topic_map.ts";

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

/** The door's mapping: topic_map.ts's lossless one (`%XX` escapes, `%` for an empty level). */
export const ariaTopicMapping: TopicMapping = {
  topicToAria: mqttTopicToAria,
  topicFromAria: ariaTopicToMqtt,
  filterToAria: mqttFilterToAria,
  isDollarTopic,
};
