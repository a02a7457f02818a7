/**
 * Permissions: what one user may publish to and subscribe to, as filters (`app/orders/**`,
 * exact topics) allowed and denied; deny wins over allow. A publish is checked per topic; a
 * subscription per filter entry, and refused whole when any entry reaches outside: an entry must
 * lie inside an allowed entry and touch no denied topic (`app/**` for a user allowed only
 * `app/orders/**` is refused, never narrowed). Publish answers are cached per topic id, a byte
 * per id like FilterMatcher, so the publish path pays a lookup and an array read per topic once
 * warmed. Ids the table reclaims (topics retention removed) are forgotten before the next answer,
 * as FilterMatcher does: an answer is never one for an id's previous name.
 *
 * Not here: who the user is (users.ts), the file format (users_file.ts). Invariants: a cached
 * answer is for the name the id has now (a reload builds new Permissions). Pure.
 */
import {
  entriesIntersect,
  entryCovers,
  type Filter,
  type FilterEntry,
  type TopicTable,
} from "../topic/mod.ts";

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
  /** The table the answers are for, and its reclaim epoch they are up to date with. */
  private table: TopicTable | null = null;
  private epoch = 0;

  constructor(
    readonly publish: Rule,
    readonly subscribe: Rule,
  ) {}

  /** Whether `topic` may be published to (answers cached by its id in `topics`, when it has one). */
  mayPublish(topic: string, topics: TopicTable): boolean {
    const topicId = topics.lookup(topic);
    if (topicId < 0) return ruleAllows(this.publish, topic);
    if (this.table !== topics || this.epoch !== topics.reclaimEpoch) this.forgetReclaimed(topics);
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

  /** Clears the answers of ids `topics` reclaimed since the last look (all of them if unknown). */
  private forgetReclaimed(topics: TopicTable): void {
    const batches = this.table === topics ? topics.reclaimedSince(this.epoch) : null;
    this.table = topics;
    this.epoch = topics.reclaimEpoch;
    const answers = this.publishAnswers;
    if (batches === null) answers.fill(UNKNOWN);
    else
      for (const ids of batches)
        for (let i = 0; i < ids.length; i++) if (ids[i] < answers.length) answers[ids[i]] = UNKNOWN;
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
  // Inside one allowed entry (`app/*` + `/x` inside `app/**`), and overlapping no denied one.
  if (!rule.allow.entries.some((allowed) => entryCovers(allowed, entry))) return false;
  return rule.deny === null || !rule.deny.entries.some((denied) => entriesIntersect(denied, entry));
}
