/** ConsumerRegistry: attach rules, positions that never go back, persistence through the port. */
import { describe, expect, test } from "bun:test";
import { MemoryConsumerStore } from "../testing/memory_consumer_store.ts";
import { Filter } from "../topic/filter.ts";
import { ConsumerRegistry } from "./consumer_registry.ts";

const A = Filter.of("a/**");

describe("ConsumerRegistry", () => {
  test("a new consumer is stored only once its subscription began, at its first seq", () => {
    const store = new MemoryConsumerStore();
    const registry = new ConsumerRegistry(store);
    const attached = registry.attach("c", A, { shared: false, nowUs: 5 });
    if (!attached.ok) throw new Error(attached.reason);
    expect(store.load()).toEqual([]);
    expect(registry.list(10)).toEqual([]);
    attached.consumer.began(7);
    expect(store.load()).toEqual([
      { name: "c", filter: ["a/**"], shared: false, nextSeq: 7, lastActiveUs: 5 },
    ]);
    // A second began (a later subscription of the same consumer) does not move it.
    attached.consumer.began(99);
    expect(registry.get("c")?.nextSeq).toBe(7);
  });

  test("positions past the store's end at start (seqs a crash lost) are cut back to it", () => {
    const store = new MemoryConsumerStore();
    const record = { filter: ["a/**"], lastActiveUs: 1 };
    store.save({ ...record, name: "plain", shared: false, nextSeq: 50 });
    store.save({ ...record, name: "kept", shared: false, nextSeq: 8 });
    store.save({
      ...record,
      name: "group",
      shared: true,
      nextSeq: 3,
      group: { readSeq: 50, unackedSeqs: [3, 12, 30] },
    });
    store.save({
      ...record,
      name: "gone",
      shared: true,
      nextSeq: 12,
      group: { readSeq: 50, unackedSeqs: [12, 30] },
    });
    const registry = new ConsumerRegistry(store, 10, 11);
    expect(registry.get("plain")?.nextSeq).toBe(11);
    expect(registry.get("kept")?.nextSeq).toBe(8);
    expect(registry.get("group")?.nextSeq).toBe(3);
    expect(registry.get("group")?.group).toEqual({ readSeq: 11, unackedSeqs: [3] });
    // Nothing unacknowledged is left below the end: the position is the end.
    expect(registry.get("gone")?.nextSeq).toBe(11);
    expect(registry.get("gone")?.group).toBeNull();
  });

  test("a consumer that never began goes away with its subscription", () => {
    const registry = new ConsumerRegistry(new MemoryConsumerStore());
    const attached = registry.attach("c", A, { shared: false, nowUs: 0 });
    if (!attached.ok) throw new Error(attached.reason);
    registry.detach(attached.consumer);
    expect(registry.size).toBe(0);
  });

  test("busy, mismatch (filter, shared) and full are refused with their codes", () => {
    const registry = new ConsumerRegistry(new MemoryConsumerStore(), 2);
    const first = registry.attach("c", A, { shared: false, nowUs: 0 });
    if (!first.ok) throw new Error(first.reason);
    first.consumer.began(1);
    const code = (result: ReturnType<ConsumerRegistry["attach"]>) =>
      result.ok ? "ok" : result.code;
    expect(code(registry.attach("c", A, { shared: false, nowUs: 0 }))).toBe(
      "ARIA_ERR_CONSUMER_BUSY",
    );
    expect(code(registry.attach("c", Filter.of("b"), { shared: false, nowUs: 0 }))).toBe(
      "ARIA_ERR_CONSUMER_MISMATCH",
    );
    expect(code(registry.attach("c", A, { shared: true, nowUs: 0 }))).toBe(
      "ARIA_ERR_CONSUMER_MISMATCH",
    );
    // Equal filters compare normalised: a/x under a/** is dropped.
    registry.detach(first.consumer);
    expect(code(registry.attach("c", Filter.of("a/**", "a/x"), { shared: false, nowUs: 0 }))).toBe(
      "ok",
    );
    expect(code(registry.attach("d", A, { shared: false, nowUs: 0 }))).toBe("ok");
    expect(code(registry.attach("e", A, { shared: false, nowUs: 0 }))).toBe(
      "ARIA_ERR_CONSUMERS_FULL",
    );
  });

  test("ACKs move the position forward only; a restart loads it", () => {
    const store = new MemoryConsumerStore();
    const registry = new ConsumerRegistry(store);
    const attached = registry.attach("c", A, { shared: false, nowUs: 0 });
    if (!attached.ok) throw new Error(attached.reason);
    const consumer = attached.consumer;
    consumer.began(3);
    registry.ack(consumer, 10, 1);
    registry.ack(consumer, 4, 2);
    expect(consumer.nextSeq).toBe(11);
    const writes = store.writes;
    registry.ack(consumer, 10, 3);
    expect(store.writes).toBe(writes);
    const again = new ConsumerRegistry(store);
    expect(again.list(20)).toEqual([
      {
        name: "c",
        filter: ["a/**"],
        shared: false,
        ackedSeq: 10,
        nextSeq: 11,
        pendingSeqs: 9,
        members: 0,
        // Stored with the last position that moved (an ACK below it writes nothing).
        lastActiveUs: 1,
        owner: null,
      },
    ]);
  });

  test("remove: busy while open, unknown when absent, removed from the store", () => {
    const store = new MemoryConsumerStore();
    const registry = new ConsumerRegistry(store);
    const attached = registry.attach("c", A, { shared: false, nowUs: 0 });
    if (!attached.ok) throw new Error(attached.reason);
    attached.consumer.began(1);
    expect(registry.remove("c")).toBe("busy");
    expect(registry.remove("x")).toBe("unknown");
    registry.detach(attached.consumer);
    expect(registry.remove("c")).toBe("removed");
    expect(store.load()).toEqual([]);
    expect(registry.size).toBe(0);
  });
});
