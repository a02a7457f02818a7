/**
 * Test support: fast-check arbitraries for every outgoing frame kind, and `expectedOf`, the plain
 * object `describeFrame` should give back after a round trip. Frames drawn here are valid, so they
 * decode; fuzz tests mutate their bytes to reach the error paths.
 */
import fc from "fast-check";
import { PROTOCOL_VERSION } from "../constants.ts";
import { Filter } from "../topic/mod.ts";
import { ARIA_ERROR_WIRE_CODES, type AriaErrorCode } from "./error_codes.ts";
import type { OutgoingFrame, StartPosition } from "./frames.ts";

const utf8 = new TextEncoder();
const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const u16 = fc.integer({ min: 0, max: 0xffff });
const safe = fc.maxSafeNat();

const segment = fc.string({ unit: fc.constantFrom(..."abcxyz019_.-"), minLength: 1, maxLength: 6 });
/** A valid topic: 1..4 short segments, now and then a longest (255-byte) one. */
export const topicArbitrary: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join("/")),
  },
  { weight: 1, arbitrary: fc.constant(`${"t".repeat(127)}/${"u".repeat(127)}`) },
);
const payload = fc.oneof(
  { weight: 8, arbitrary: fc.uint8Array({ maxLength: 64 }) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 65, maxLength: 3000 }) },
);
/** A message's properties: none, a few bytes, or some hundreds (the limit: frame_writer.test). */
const properties = fc.oneof(
  { weight: 4, arbitrary: fc.constant(new Uint8Array(0)) },
  { weight: 8, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 40 }) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 41, maxLength: 300 }) },
);
/** Any text whose UTF-8 fits `bytesMax`. */
const text = (bytesMax: number, minLength = 0) =>
  fc
    .string({ unit: "binary", minLength, maxLength: 24 })
    .filter((s) => utf8.encode(s).length <= bytesMax);

const start: fc.Arbitrary<StartPosition> = fc.oneof(
  fc.constant({ kind: "live" as const }),
  fc.constant({ kind: "earliest" as const }),
  fc
    .integer({ min: 1, max: Number.MAX_SAFE_INTEGER })
    .map((seq) => ({ kind: "seq" as const, seq })),
  safe.map((timeUs) => ({ kind: "time" as const, timeUs })),
);
const filterEntry = fc.oneof(
  topicArbitrary,
  topicArbitrary.map((t) => `${t.slice(0, 200)}/**`),
  fc.constant("**"),
);

/** A valid durable consumer name: 1..64 characters of `[A-Za-z0-9_.:/$-]`. */
const consumerName = fc.string({
  unit: fc.constantFrom(..."abcXYZ019_.:-/$"),
  minLength: 1,
  maxLength: 64,
});

const dataMessages = fc
  .tuple(
    fc.integer({ min: 1, max: 2 ** 40 }),
    fc.array(fc.tuple(fc.integer({ min: 1, max: 1000 }), safe, topicArbitrary, payload), {
      minLength: 1,
      maxLength: 12,
    }),
  )
  .map(([firstSeq, rows]) => {
    let seq = firstSeq;
    return rows.map(([gap, timeUs, topic, body]) => ({
      seq: (seq += gap),
      timeUs,
      topic,
      payload: body,
    }));
  });
/** DATA messages that carry properties (a frame with the flag PROPERTIES). */
const dataMessagesWithProperties = fc
  .tuple(dataMessages, fc.array(properties, { minLength: 12, maxLength: 12 }))
  .map(([messages, bytes]) => messages.map((message, i) => ({ ...message, properties: bytes[i] })));

/** Any valid outgoing frame. */
export const frameArbitrary: fc.Arbitrary<OutgoingFrame> = fc.oneof(
  fc.record({
    kind: fc.constant("hello" as const),
    version: fc.constant(PROTOCOL_VERSION),
    clientName: text(64),
    authToken: fc.option(text(1024, 1)),
  }),
  fc.record({
    kind: fc.constant("welcome" as const),
    version: fc.constant(PROTOCOL_VERSION),
    nextSeq: safe,
    limits: fc.record({
      frameBytesMax: u32,
      payloadBytesMax: u32,
      publishBatchMessagesMax: u32,
      subscriptionsPerConnectionMax: u32,
      filterEntriesMax: u16,
      topicBytesMax: u16,
    }),
  }),
  fc.record({
    kind: fc.constant("publish" as const),
    requestId: u32,
    messages: fc.array(fc.record({ topic: topicArbitrary, payload }), {
      minLength: 1,
      maxLength: 12,
    }),
  }),
  fc.record({
    kind: fc.constant("publish" as const),
    requestId: u32,
    messages: fc.array(fc.record({ topic: topicArbitrary, payload, properties }), {
      minLength: 1,
      maxLength: 12,
    }),
  }),
  fc.record({
    kind: fc.constant("publish_ack" as const),
    requestId: u32,
    firstSeq: safe,
    count: u32,
  }),
  fc.record({
    kind: fc.constant("subscribe" as const),
    subscriptionId: u32,
    start,
    filter: fc.array(filterEntry, { minLength: 1, maxLength: 6 }),
  }),
  fc.record({
    kind: fc.constant("subscribe" as const),
    subscriptionId: u32,
    start,
    filter: fc.array(filterEntry, { minLength: 1, maxLength: 6 }),
    durable: consumerName,
    shared: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("ack" as const), subscriptionId: u32, seq: safe }),
  fc.record({ kind: fc.constant("subscribed" as const), subscriptionId: u32, firstSeq: safe }),
  fc.record({ kind: fc.constant("data" as const), subscriptionId: u32, messages: dataMessages }),
  fc.record({
    kind: fc.constant("data" as const),
    subscriptionId: u32,
    properties: fc.constant(true),
    messages: dataMessagesWithProperties,
  }),
  fc.record({ kind: fc.constant("caught_up" as const), subscriptionId: u32, nextSeq: safe }),
  fc.record({ kind: fc.constant("unsubscribe" as const), subscriptionId: u32 }),
  fc.record({ kind: fc.constant("unsubscribed" as const), subscriptionId: u32 }),
  fc.record({ kind: fc.constant("ping" as const), token: safe }),
  fc.record({ kind: fc.constant("pong" as const), token: safe }),
  fc.record({
    kind: fc.constant("error" as const),
    code: fc.constantFrom(...(Object.keys(ARIA_ERROR_WIRE_CODES) as AriaErrorCode[])),
    fatal: fc.boolean(),
    relatedKind: fc.constantFrom("none" as const, "request" as const, "subscription" as const),
    relatedId: u32,
    reason: text(1024),
  }),
);

/** What describeFrame(decode(encode(frame))) should be. */
export function expectedOf(frame: OutgoingFrame): Record<string, unknown> {
  switch (frame.kind) {
    case "publish": {
      // The flag PROPERTIES is set when a message has some; then every message carries them.
      const withProperties = frame.messages.some((m) => (m.properties?.length ?? 0) > 0);
      return {
        ...frame,
        messages: frame.messages.map(({ topic, payload, properties }) =>
          withProperties
            ? { topic, payload, properties: properties ?? new Uint8Array(0) }
            : { topic, payload },
        ),
      };
    }
    case "subscribe":
      return {
        ...frame,
        ...(frame.durable === undefined ? {} : { shared: frame.shared === true }),
        filter: (frame.filter instanceof Filter
          ? frame.filter
          : Filter.of(...frame.filter)
        ).toStrings(),
      };
    case "error":
      return { ...frame, wireCode: ARIA_ERROR_WIRE_CODES[frame.code] };
    case "hello":
      return { ...frame, authToken: frame.authToken === "" ? null : frame.authToken };
    default:
      return { ...frame };
  }
}
