/** SharedData: frames encoded once per filter are exactly the per-message path's, round by round, within the send limit. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { FRAME_BYTES_MAX, RECORD_HEADER_BYTES } from "../constants.ts";
import { TopicCache } from "../protocol/mod.ts";
import { fcParams } from "../testing/fc_params.ts";
import { Ring } from "../tip/ring.ts";
import { Filter } from "../topic/filter.ts";
import { FilterMatcher } from "../topic/filter_matcher.ts";
import { TopicTable } from "../topic/topic_table.ts";
import type { Connection } from "./ports.ts";
import { Session } from "./session.ts";
import { SHARED_ROUND_BYTES, SharedData } from "./shared_data.ts";

const ENCODER = new TextEncoder();
const TOPICS = ["a/x/1", "a/x/2", "a/y", "b/z", "c"];
const FILTERS = [["**"], ["a/**"], ["a/x/1", "c"], ["b/z"], ["d"]];

/** A connection that takes everything and keeps it. */
class Sink implements Connection {
  readonly chunks: Uint8Array[] = [];
  write(bytes: Uint8Array): number {
    this.chunks.push(bytes.slice());
    return bytes.length;
  }
  close(): void {}
  bytes(): Uint8Array {
    const all = new Uint8Array(this.chunks.reduce((sum, chunk) => sum + chunk.length, 0));
    let at = 0;
    for (const chunk of this.chunks) {
      all.set(chunk, at);
      at += chunk.length;
    }
    return all;
  }
}

type Stream = { topics: TopicTable; ring: Ring; topicBytes: Uint8Array[] };

function stream(messages: { topic: number; payloadBytes: number }[]): Stream {
  const topics = new TopicTable();
  const topicBytes = TOPICS.map((name) => ENCODER.encode(name));
  for (const name of TOPICS) topics.internValid(name);
  let bytes = 1024;
  for (const message of messages) bytes += RECORD_HEADER_BYTES + message.payloadBytes + 8;
  const ring = new Ring(Math.ceil(bytes / 1024) * 1024, () => {});
  messages.forEach((message, i) => {
    const payload = new Uint8Array(message.payloadBytes).fill(i & 0xff);
    ring.append(message.topic, i + 1, 1_000_000 + i, payload);
  });
  return { topics, ring, topicBytes };
}

/** What the per-message path writes for subscription 7: every matching message through Session.addData. */
function perMessage(
  { ring, topicBytes }: Stream,
  matcher: FilterMatcher,
  fromSeq: number,
): Uint8Array {
  const sink = new Sink();
  const session = new Session(1, sink, new TopicCache(), Number.MAX_SAFE_INTEGER);
  let at = ring.offsetOfSeq(fromSeq);
  for (let seq = fromSeq; seq < ring.nextSeq; seq++) {
    const topicId = ring.topicAt(at);
    if (matcher.matches(topicId))
      session.addData(
        7,
        seq,
        ring.timeAt(at),
        topicBytes[topicId],
        ring.bytes,
        at + RECORD_HEADER_BYTES,
        ring.payloadLengthAt(at),
      );
    if (seq + 1 < ring.nextSeq) at = ring.after(at);
  }
  session.flush();
  return sink.bytes();
}

function firstDifference(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

const messagesArb = fc.array(
  fc.record({
    topic: fc.nat(TOPICS.length - 1),
    payloadBytes: fc.oneof(fc.nat(200), fc.nat(40_000)),
  }),
  // Up to ~6 MB of payloads: most runs take several rounds.
  { minLength: 1, maxLength: 300, size: "max" },
);

let roundsMax = 0;

describe("SharedData", () => {
  test("property: its rounds copied to a session are byte for byte the per-message path's frames", () => {
    fc.assert(
      fc.property(
        messagesArb,
        fc.nat(FILTERS.length - 1),
        fc.nat(400),
        (messages, filterIndex, fromIndex) => {
          const s = stream(messages);
          const matcher = new FilterMatcher(s.topics, Filter.of(...FILTERS[filterIndex]));
          const fromSeq = 1 + (fromIndex % messages.length);
          const sink = new Sink();
          const session = new Session(1, sink, new TopicCache(), Number.MAX_SAFE_INTEGER);
          const shared = new SharedData();
          const position = { seq: fromSeq, at: s.ring.offsetOfSeq(fromSeq) };
          let delivered = 0;
          let rounds = 0;
          while (position.seq < s.ring.nextSeq) {
            shared.encode(s.ring, position, s.ring.nextSeq, {
              matcher,
              topicUtf8: (id) => s.topicBytes[id],
            });
            expect(shared.endSeq).toBeGreaterThan(position.seq);
            expect(
              shared.frame(shared.frameCount - 1).byteOffset +
                shared.frame(shared.frameCount - 1).length,
            ).toBeLessThanOrEqual(SHARED_ROUND_BYTES + FRAME_BYTES_MAX);
            for (let i = 0; i < shared.frameCount; i++) {
              expect(shared.firstSeq(i)).toBeGreaterThanOrEqual(position.seq);
              if (i > 0) expect(shared.firstSeq(i)).toBeGreaterThan(shared.firstSeq(i - 1));
              delivered += shared.messages(i);
            }
            expect(session.addSharedFrames(7, shared)).toBe(shared.frameCount);
            position.seq = shared.endSeq;
            position.at = shared.endAt;
            rounds++;
          }
          roundsMax = Math.max(roundsMax, rounds);
          session.flush();
          const got = sink.bytes();
          const want = perMessage(s, matcher, fromSeq);
          expect(got.length).toBe(want.length);
          expect(firstDifference(got, want)).toBe(-1);
          const matching = messages
            .slice(fromSeq - 1)
            .filter((m) => matcher.matches(m.topic)).length;
          expect(delivered).toBe(matching);
        },
      ),
      fcParams({ runs: 100 }),
    );
    expect(roundsMax).toBeGreaterThanOrEqual(2);
  });

  test("a round stops at a frame boundary once it holds SHARED_ROUND_BYTES", () => {
    const s = stream(Array.from({ length: 100 }, () => ({ topic: 0, payloadBytes: 30_000 })));
    const matcher = new FilterMatcher(s.topics, Filter.of("**"));
    const shared = new SharedData();
    shared.encode(s.ring, { seq: 1, at: s.ring.offsetOfSeq(1) }, s.ring.nextSeq, {
      matcher,
      topicUtf8: (id) => s.topicBytes[id],
    });
    // A frame closes once it holds 64 KiB: three 30 kB messages each, so 1 MiB takes 12 frames.
    expect({ frames: shared.frameCount, endSeq: shared.endSeq, first: shared.messages(0) }).toEqual(
      { frames: 12, endSeq: 37, first: 3 },
    );
    expect(shared.firstSeq(11)).toBe(34);
    expect(s.ring.seqAt(shared.endAt)).toBe(37);
  });

  test("addSharedFrames copies only frames that leave the session below its limit", () => {
    const s = stream(Array.from({ length: 10 }, () => ({ topic: 0, payloadBytes: 40_000 })));
    const matcher = new FilterMatcher(s.topics, Filter.of("**"));
    const shared = new SharedData();
    shared.encode(s.ring, { seq: 1, at: s.ring.offsetOfSeq(1) }, s.ring.nextSeq, {
      matcher,
      topicUtf8: (id) => s.topicBytes[id],
    });
    // Two 40 kB messages a frame: 80,068 bytes each; the limit takes two frames and a half.
    expect(shared.frameCount).toBe(5);
    const session = new Session(1, { write: () => 0, close() {} }, new TopicCache(), 200_000);
    expect(session.addSharedFrames(3, shared)).toBe(2);
    expect(session.backedUp).toBe(false);
    session.flush();
    expect(session.queuedBytes).toBe(2 * shared.frame(0).length);
    // A frame never carries another subscription's id.
    expect(
      new DataView(shared.frame(1).buffer, shared.frame(1).byteOffset).getUint32(8, true),
    ).toBe(0);
  });
});
