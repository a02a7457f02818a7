/**
 * Fanout: which subscriptions a message of a given topic id goes to, without testing every
 * subscription per message. The list for a topic id is computed once, from one walk of the topic
 * table's filter index (topic/filter_index.ts: O(segments + matches), not O(subscriptions)) — for a
 * new topic the walk the table makes when interning it (onIntern), so it costs no second one — and
 * cached until the set of subscriptions changes. A new topic just has no list yet; an id the table
 * reclaims has its list dropped (the table tells every batch), so its next topic gets its own.
 *
 * Lists hold every matching subscription whatever its phase; the broker checks the phase, so a
 * subscription stalling and resuming (which happens often under back-pressure) costs nothing here.
 *
 * It also groups subscriptions by filter (equal filters print equally) and DATA options (with or
 * without properties): the members of a group receive the same frames, so live fan-out can encode
 * them once (shared_data.ts).
 */
import { assert } from "../stdx/assert.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import type { Subscription } from "./subscription.ts";

const NONE: readonly Subscription[] = [];

/** Subscriptions with equal keys receive equal DATA frames: the filter, and the PROPERTIES option. */
function groupKey(subscription: Subscription): string {
  const filter = subscription.filter.toString();
  return subscription.withProperties ? `properties ${filter}` : filter;
}

/** Per-topic-id cache of matching subscriptions. */
export class Fanout {
  /** Registered subscriptions by their matcher (the index yields matchers). */
  private readonly all = new Map<FilterMatcher, Subscription>();
  /** The table of every registered subscription's matcher (one per server). */
  private table: TopicTable | null = null;
  private readonly matched: FilterMatcher[] = [];
  /** Subscriptions by the text of their filter. */
  private readonly byFilter = new Map<string, Subscription[]>();
  private shared: (readonly Subscription[])[] = [];
  private sharedVersion = -1;
  private lists: (readonly Subscription[] | undefined)[] = [];
  private version = 0;
  private listVersions = new Int32Array(1024);

  /** Subscriptions currently registered. */
  get size(): number {
    return this.all.size;
  }

  /** Registers a subscription (its matcher is registered in its table's filter index). */
  add(subscription: Subscription): void {
    if (this.table === null) {
      this.table = subscription.matcher.table;
      this.table.onReclaim((ids) => this.forget(ids));
      this.table.onIntern((topicId, matched) => this.interned(topicId, matched));
    }
    assert(this.table === subscription.matcher.table, "Fanout.add: one topic table");
    this.all.set(subscription.matcher, subscription);
    const key = groupKey(subscription);
    const group = this.byFilter.get(key);
    if (group === undefined) this.byFilter.set(key, [subscription]);
    else group.push(subscription);
    this.version++;
  }

  /** Unregisters a subscription. */
  remove(subscription: Subscription): void {
    if (!this.all.delete(subscription.matcher)) return;
    const key = groupKey(subscription);
    const group = this.byFilter.get(key) as Subscription[];
    group.splice(group.indexOf(subscription), 1);
    if (group.length === 0) this.byFilter.delete(key);
    this.version++;
  }

  /** The groups of two or more subscriptions with equal filters and options (any phase). */
  groups(): readonly (readonly Subscription[])[] {
    if (this.sharedVersion !== this.version) {
      this.shared = [...this.byFilter.values()].filter((group) => group.length >= 2);
      this.sharedVersion = this.version;
    }
    return this.shared;
  }

  /** A new topic: its list from the matchers the table's walk found. */
  private interned(topicId: number, matched: readonly FilterMatcher[]): void {
    if (this.all.size === 0) return;
    if (topicId >= this.listVersions.length) this.growVersions(topicId);
    let list: Subscription[] | undefined;
    for (let i = 0; i < matched.length; i++) {
      const subscription = this.all.get(matched[i]);
      if (subscription !== undefined) (list ??= []).push(subscription);
    }
    this.lists[topicId] = list;
    this.listVersions[topicId] = this.version + 1;
  }

  private growVersions(topicId: number): void {
    let length = this.listVersions.length;
    while (length <= topicId) length *= 2;
    const grown = new Int32Array(length);
    grown.set(this.listVersions);
    this.listVersions = grown;
  }

  /** Drops the lists of reclaimed ids. */
  private forget(ids: Int32Array): void {
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] >= this.listVersions.length) continue;
      this.listVersions[ids[i]] = 0;
      this.lists[ids[i]] = undefined;
    }
  }

  /** The subscriptions whose filter matches topic `topicId`. */
  of(topicId: number): readonly Subscription[] {
    if (topicId >= this.listVersions.length) this.growVersions(topicId);
    if (this.listVersions[topicId] === this.version + 1) return this.lists[topicId] ?? NONE;
    let list: Subscription[] | undefined;
    if (this.table !== null && this.all.size > 0) {
      const matched = this.matched;
      this.table.filters.matching(this.table.topicName(topicId), matched);
      for (let i = 0; i < matched.length; i++) {
        const subscription = this.all.get(matched[i]);
        if (subscription !== undefined) (list ??= []).push(subscription);
      }
      matched.length = 0;
    }
    this.lists[topicId] = list;
    this.listVersions[topicId] = this.version + 1;
    return list ?? NONE;
  }
}
