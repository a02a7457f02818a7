import { describe, expect, test } from "bun:test";
import { Filter, FilterMatcher, TopicTable } from "../topic/mod.ts";
import { Fanout } from "./fanout.ts";
import { type SubscriberSession, Subscription } from "./subscription.ts";

const SESSION = {} as SubscriberSession;

describe("Fanout", () => {
  test("a new topic's list comes from the filter index, not a test of every subscription", () => {
    const table = new TopicTable();
    const fanout = new Fanout();
    const subscriptions: Subscription[] = [];
    for (let s = 0; s < 5000; s++) {
      const filter = Filter.of(`c${s}/x`, `c${s}/y/**`);
      const subscription = new Subscription(
        SESSION,
        s,
        filter,
        new FilterMatcher(table, filter),
        1,
      );
      subscriptions.push(subscription);
      fanout.add(subscription);
    }
    let matcherCalls = 0;
    const original = FilterMatcher.prototype.matches;
    FilterMatcher.prototype.matches = function (this: FilterMatcher, topicId: number) {
      matcherCalls++;
      return original.call(this, topicId);
    };
    try {
      const lists = ["c7/x", "c9/y/z", "c9/yy", "new/topic"].map((name) =>
        fanout.of(table.internValid(name)).map((subscription) => subscription.id),
      );
      expect({ lists, matcherCalls }).toEqual({ lists: [[7], [9], [], []], matcherCalls: 0 });
      // Removed subscriptions leave the lists; its matcher closed, the index forgets it.
      fanout.remove(subscriptions[7]);
      subscriptions[7].matcher.close();
      expect(fanout.of(table.internValid("c7/x")).length).toBe(0);
      expect(fanout.of(table.internValid("c7/x/deeper")).length).toBe(0);
    } finally {
      FilterMatcher.prototype.matches = original;
    }
  });

  test("a new topic's list is built from the walk the table made when interning it: one walk, not two", () => {
    const table = new TopicTable();
    const fanout = new Fanout();
    for (let s = 0; s < 100; s++) {
      const filter = Filter.of(`c${s}/x`, `c${s % 10}/y/**`);
      fanout.add(new Subscription(SESSION, s, filter, new FilterMatcher(table, filter), 1));
    }
    let walks = 0;
    const original = table.filters.matching.bind(table.filters);
    table.filters.matching = (name, out) => {
      walks++;
      original(name, out);
    };
    const names = ["c7/x", "c3/y/z", "new/topic", "c3/y/z/w"];
    const lists = names.map((name) =>
      fanout
        .of(table.internValid(name))
        .map((subscription) => subscription.id)
        .sort((x, y) => x - y),
    );
    const c3y = Array.from({ length: 10 }, (_, k) => 3 + 10 * k);
    // "new/topic" is not walked at all: no entry begins with "new" (FilterIndex.mayMatchIn).
    expect({ lists, walks }).toEqual({ lists: [[7], c3y, [], c3y], walks: names.length - 1 });
    // A list dropped by a change of subscriptions is walked for again, once.
    fanout.remove(fanout.of(table.lookup("c7/x"))[0]);
    expect(fanout.of(table.lookup("c7/x"))).toEqual([]);
    expect(walks).toBe(names.length);
  });
});
