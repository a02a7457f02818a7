/**
 * Fanout: which subscriptions a message of a given topic id goes to, without testing every
 * subscription per message. The list for a topic id is computed once (testing each
 * subscription's matcher) and cached until the set of subscriptions changes; topic ids are dense
 * and append-only, so a new topic just has no list yet.
 *
 * Lists hold every matching subscription whatever its phase; the broker checks the phase, so a
 * subscription stalling and resuming (which happens often under back-pressure) costs nothing here.
 *
 * It also groups subscriptions by filter (equal filters print equally): the members of a group
 * receive the same messages, so live fan-out can encode their DATA frames once (shared_data.ts).
 */
import type { Subscription } from "./subscription.ts";

const NONE: readonly Subscription[] = [];

/** Per-topic-id cache of matching subscriptions. */
export class Fanout {
  private readonly all = new Set<Subscription>();
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

  add(subscription: Subscription): void {
    this.all.add(subscription);
    const key = subscription.filter.toString();
    const group = this.byFilter.get(key);
    if (group === undefined) this.byFilter.set(key, [subscription]);
    else group.push(subscription);
    this.version++;
  }

  remove(subscription: Subscription): void {
    if (!this.all.delete(subscription)) return;
    const key = subscription.filter.toString();
    const group = this.byFilter.get(key) as Subscription[];
    group.splice(group.indexOf(subscription), 1);
    if (group.length === 0) this.byFilter.delete(key);
    this.version++;
  }

  /** The groups of two or more subscriptions with equal filters (any phase). */
  groups(): readonly (readonly Subscription[])[] {
    if (this.sharedVersion !== this.version) {
      this.shared = [...this.byFilter.values()].filter((group) => group.length >= 2);
      this.sharedVersion = this.version;
    }
    return this.shared;
  }

  /** The subscriptions whose filter matches topic `topicId`. */
  of(topicId: number): readonly Subscription[] {
    if (topicId >= this.listVersions.length) {
      let length = this.listVersions.length;
      while (length <= topicId) length *= 2;
      const grown = new Int32Array(length);
      grown.set(this.listVersions);
      this.listVersions = grown;
    }
    if (this.listVersions[topicId] === this.version + 1) return this.lists[topicId] ?? NONE;
    let list: Subscription[] | undefined;
    for (const subscription of this.all) {
      if (subscription.matcher.matches(topicId)) (list ??= []).push(subscription);
    }
    this.lists[topicId] = list;
    this.listVersions[topicId] = this.version + 1;
    return list ?? NONE;
  }
}
