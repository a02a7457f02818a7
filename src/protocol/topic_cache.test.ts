/** TopicCache: hits return the same string, collisions and prefixes never confuse topics, invalid bytes give reasons. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { topicArbitrary } from "./frame_arbitraries.ts";
import { TopicCache } from "./topic_cache.ts";

const bytesOf = (text: string) => new TextEncoder().encode(text);

describe("TopicCache", () => {
  test("a one-slot cache (every topic collides) resolves prefixes and extensions correctly", () => {
    const cache = new TopicCache({ slots: 1 });
    const buffer = bytesOf("a/b/c");
    expect(cache.resolve(buffer, 0, 3)).toBe("a/b");
    expect(cache.resolve(buffer, 0, 5)).toBe("a/b/c");
    expect(cache.resolve(buffer, 0, 1)).toBe("a");
    expect(cache.resolve(buffer, 0, 3)).toBe("a/b");
  });

  test("a cached topic never answers for non-ASCII bytes, nor for a longer or shorter run", () => {
    const cache = new TopicCache({ slots: 1 });
    expect(cache.resolve(bytesOf("a/b"), 0, 3)).toBe("a/b");
    // "a/é" is 4 bytes: a slot compared by char codes must not take its first 3 for "a/b".
    expect(cache.resolve(bytesOf("a/\u00e9"), 0, 4)).toBeNull();
    expect(cache.reason).toBe("topic has a non-ASCII character at byte 2");
    expect(cache.resolve(bytesOf("a/bc"), 0, 4)).toBe("a/bc");
    expect(cache.resolve(bytesOf("a/bc"), 0, 3)).toBe("a/b");
    expect(cache.resolve(Uint8Array.of(0x61, 0x2f, 0xe2), 0, 3)).toBeNull();
    expect(cache.reason).toBe("topic is not valid UTF-8");
    expect(cache.resolve(bytesOf("a/b"), 0, 3)).toBe("a/b");
  });

  test("matches a reference decoder for any sequence of topics", () => {
    fc.assert(
      fc.property(
        fc.array(topicArbitrary, { maxLength: 40 }),
        fc.constantFrom(1, 2, 8),
        (topics, slots) => {
          const cache = new TopicCache({ slots });
          for (const topic of topics) {
            const padded = bytesOf(`xx${topic}yy`);
            expect(cache.resolve(padded, 2, padded.length - 4)).toBe(topic);
          }
        },
      ),
      fcParams(),
    );
  });

  test("invalid bytes give a reason and are not cached", () => {
    const cache = new TopicCache();
    const reasons = [[0xff], [0xef, 0xbb, 0xbf, 0x61], [...bytesOf("a/")], []].map((bytes) => {
      expect(cache.resolve(Uint8Array.from(bytes), 0, bytes.length)).toBeNull();
      return cache.reason;
    });
    expect(reasons).toMatchInlineSnapshot(`
      [
        "topic is not valid UTF-8",
        "topic has a non-ASCII character at byte 0",
        "topic ends with '/'",
        "topic is empty",
      ]
    `);
  });
});
