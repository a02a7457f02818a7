/**
 * Permissions: what one user may publish to and subscribe to, as filters (`app/orders/**`,
 * exact topics) allowed and denied; deny wins over allow. A publish is checked per topic; a
 * subscription per filter entry, and refused whole when any entry reaches outside: an entry must
 * lie inside an allowed entry and touch no denied topic (`app/**` for a user allowed only
 * `app/orders/**` is refused, never narrowed). Publish answers are cached per topic id, a byte
 * per id like FilterMatcher, so the publish path pays an array read per topic once warmed.
 *
 * Not here: who the user is (users.ts), the file format (users_file.ts). Invariants: an answer
 * cached for a topic id never changes (a reload builds new Permissions). Pure.
 */
import { type Filter, type FilterEntry, isUnder } from "../topic/mod.ts";

/** Allowed and denied filters of one action; null: none. */
export interface Rule {
  allow: Filter | null;
  deny: Filter | null;
}

const UNKNOWN = 0;
const NO = 1;
const YES = 2;

/** A user's publish and subscribe rules, with the publish answers cached per topic id. */
export class Permissions {
  private publishAnswers = new Uint8Array(256);

  constructor(
    readonly publish: Rule,
    readonly subscribe: Rule,
  ) {}

  /** Whether `topic` may be published to (`topicId`: its id, or -1 when not interned yet). */
  mayPublish(topic: string, topicId: number): boolean {
    if (topicId < 0) return ruleAllows(this.publish, topic);
    const answers = this.publishAnswers;
    const answer = topicId < answers.length ? answers[topicId] : UNKNOWN;
    if (answer !== UNKNOWN) return answer === YES;
    const allowed = ruleAllows(this.publish, topic);
    if (topicId >= answers.length) this.grow(topicId);
    this.publishAnswers[topicId] = allowed ? YES : NO;
    return allowed;
  }

  /** The first entry of `filter` outside the subscribe rule (its text), or null when all are in. */
  subscribeRefusal(filter: Filter): string | null {
    const texts = filter.toStrings();
    for (let i = 0; i < filter.entries.length; i++) {
      if (!entryAllowed(this.subscribe, filter.entries[i])) return texts[i];
    }
    return null;
  }

  private grow(topicId: number): void {
    let length = this.publishAnswers.length;
    while (length <= topicId) length *= 2;
    const grown = new Uint8Array(length);
    grown.set(this.publishAnswers);
    this.publishAnswers = grown;
  }
}

/** Whether one topic is allowed and not denied. */
function ruleAllows(rule: Rule, topic: string): boolean {
  if (rule.allow === null || !rule.allow.matches(topic)) return false;
  return rule.deny === null || !rule.deny.matches(topic);
}

/** Whether every topic `entry` can match is allowed and none is denied. */
function entryAllowed(rule: Rule, entry: FilterEntry): boolean {
  if (entry.kind === "exact") return ruleAllows(rule, entry.topic);
  if (rule.allow === null) return false;
  const prefix = entry.prefix;
  const inside = rule.allow.entries.some(
    (allowed) => allowed.kind === "subtree" && isUnder(prefix, allowed.prefix),
  );
  if (!inside) return false;
  if (rule.deny === null) return true;
  // A denied topic or subtree below the entry, or a denied subtree holding it, overlaps it.
  return !rule.deny.entries.some((denied) =>
    denied.kind === "exact"
      ? isUnder(denied.topic, prefix)
      : isUnder(denied.prefix, prefix) || isUnder(prefix, denied.prefix),
  );
}
