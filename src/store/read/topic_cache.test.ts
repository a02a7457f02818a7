/**
 * A reader's topic cache (topic_cache.ts): a record's topic is found by its bytes, named once per
 * topic, and a borrowing read hands the topic's bytes out with each message (the broker writes
 * them into DATA frames without looking the name up), shared by the messages of one topic.
 */
import { expect, test } from "bun:test";
import { TOPIC_CACHE_ENTRIES_MAX } from "../../constants.ts";
import { SimDisk } from "../../testing/sim_disk.ts";
import { Filter } from "../../topic/filter.ts";
import { Store } from "../mod.ts";
import { RECORD_TOPIC_BYTES_OFFSET, RECORD_TOPIC_OFFSET } from "../record.ts";
import { TopicCache } from "./topic_cache.ts";

/** A buffer holding, at offset `at`, the head and topic of a record of `topic`. */
function recordOf(topic: string, at: number): { buffer: Uint8Array; view: DataView } {
  const buffer = new Uint8Array(at + RECORD_TOPIC_OFFSET + topic.length + 8).fill(0x61);
  const view = new DataView(buffer.buffer);
  view.setUint16(at + RECORD_TOPIC_BYTES_OFFSET, topic.length, true);
  buffer.set(new TextEncoder().encode(topic), at + RECORD_TOPIC_OFFSET);
  return { buffer, view };
}

test("a topic is found by its bytes wherever they lie, named once, matched by the filter", () => {
  const cache = new TopicCache(Filter.of("app/a/**"));
  const first = recordOf("app/a/x", 0);
  const again = recordOf("app/a/x", 100);
  const other = recordOf("app/b/x", 3);
  const entry = cache.find(first.buffer, first.view, 0);
  expect(cache.find(again.buffer, again.view, 100)).toBe(entry);
  const otherEntry = cache.find(other.buffer, other.view, 3);
  expect(otherEntry).not.toBe(entry);
  expect(cache.names[entry]).toBe("app/a/x");
  expect(new TextDecoder().decode(cache.bytes[otherEntry])).toBe("app/b/x");
  expect(cache.matches(entry)).toBe(true);
  expect(cache.matches(otherEntry)).toBe(false);
  expect(cache.size).toBe(2);
});

test("past its bound the cache starts again, and still names every topic right", () => {
  const cache = new TopicCache(Filter.of("**"));
  const count = TOPIC_CACHE_ENTRIES_MAX + 100;
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < count; i++) {
      const { buffer, view } = recordOf(`t/${i}`, 0);
      const entry = cache.find(buffer, view, 0);
      expect(cache.names[entry]).toBe(`t/${i}`);
      expect(cache.size).toBeLessThanOrEqual(TOPIC_CACHE_ENTRIES_MAX);
    }
  }
});

test("a borrowing read hands out each message's topic bytes, one shared array per topic", async () => {
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const payload = new Uint8Array(16).fill(3);
  // 4 partitions of 50 interleaved topics each: more than a lane kept before.
  const messages = 4000;
  for (let seq = 1; seq <= messages; seq++) {
    store.append(seq, seq, `app/p${seq % 4}/t${(seq * 7) % 50}`, payload);
    if (seq % 1000 === 0) await store.commit();
  }
  await store.sortAll();
  for (const filter of ["**", "app/p1/**", "app/*/t3"]) {
    const reader = store.read(Filter.of(filter), { seq: 1 }, { borrow: true, batchBytesMax: 4096 });
    const byTopic = new Map<string, Uint8Array>();
    let seen = 0;
    for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch()) {
      for (const message of batch) {
        const bytes = message.topicUtf8;
        expect(bytes).toBeDefined();
        expect(new TextDecoder().decode(bytes)).toBe(message.topic);
        expect(message.topic).toBe(`app/p${message.seq % 4}/t${(message.seq * 7) % 50}`);
        const known = byTopic.get(message.topic);
        if (known === undefined) byTopic.set(message.topic, bytes as Uint8Array);
        else expect(bytes).toBe(known);
        seen++;
      }
    }
    const expected = filter === "**" ? messages : filter === "app/p1/**" ? messages / 4 : 80;
    expect(seen).toBe(expected);
  }
  await store.close();
});
