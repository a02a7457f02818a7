/**
 * The byte layout of Aria's frames: frame type numbers, header offsets, fixed body sizes, start
 * kinds and related-id kinds. docs/protocol.md draws the same layouts as tables; this file is the
 * source of truth and asserts at load that the sizes add up and that a frame holds a largest message.
 * All integers are little-endian. No logic beyond lookups.
 *
 *   header (8 bytes):  +0 u32 frame bytes (header included)  +4 u8 type  +5 u8 flags  +6 u16 reserved=0
 *
 * Flags are 0 except FRAME_FLAG_PROPERTIES on PUBLISH and DATA: every message of the frame carries
 * `u16 properties bytes, properties` between its topic and its payload length.
 */
import {
  FRAME_BYTES_MAX,
  PAYLOAD_BYTES_MAX,
  PROPERTIES_BYTES_MAX,
  TOPIC_BYTES_MAX,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";

/** Bytes of the frame header. */
export const FRAME_HEADER_BYTES = 8;
/** Header offset of the u32 frame length (header included). */
export const HEADER_LENGTH_OFFSET = 0;
/** Header offset of the u8 frame type. */
export const HEADER_TYPE_OFFSET = 4;
/** Header offset of the u8 flags (0, or FRAME_FLAG_PROPERTIES on PUBLISH and DATA). */
export const HEADER_FLAGS_OFFSET = 5;
/** PUBLISH and DATA flag: each message carries its properties (u16 length, then the bytes). */
export const FRAME_FLAG_PROPERTIES = 0x01;
/** Bytes of a message's properties length field (u16), present under FRAME_FLAG_PROPERTIES. */
export const PROPERTIES_HEAD_BYTES = 2;
/** Header offset of the u16 reserved field (0). */
export const HEADER_RESERVED_OFFSET = 6;

/** Frame kinds and their wire type numbers. */
export const FRAME_TYPES = {
  hello: 0x01,
  welcome: 0x02,
  publish: 0x03,
  publish_ack: 0x04,
  subscribe: 0x05,
  subscribed: 0x06,
  data: 0x07,
  caught_up: 0x08,
  unsubscribe: 0x09,
  unsubscribed: 0x0a,
  ping: 0x0b,
  pong: 0x0c,
  error: 0x0d,
  ack: 0x0e,
} as const;

/** The name of a frame type. */
export type FrameKind = keyof typeof FRAME_TYPES;

/** Wire type number → frame kind (undefined for unknown numbers). */
export const FRAME_KIND_OF_TYPE: readonly (FrameKind | undefined)[] = (() => {
  const kinds: (FrameKind | undefined)[] = new Array(256).fill(undefined);
  for (const kind of Object.keys(FRAME_TYPES) as FrameKind[]) kinds[FRAME_TYPES[kind]] = kind;
  return kinds;
})();

/** Who sends each frame kind. The decoder accepts every kind; the broker rejects wrong directions. */
export const FRAME_SENDERS: Readonly<Record<FrameKind, "client" | "server" | "both">> = {
  hello: "client",
  welcome: "server",
  publish: "client",
  publish_ack: "server",
  subscribe: "client",
  subscribed: "server",
  data: "server",
  caught_up: "server",
  unsubscribe: "client",
  unsubscribed: "server",
  ping: "both",
  pong: "both",
  error: "server",
  ack: "client",
};

// Fixed body sizes (after the header). "HEAD" sizes precede a variable part.
/** HELLO: u16 version, u8 name bytes (then name), then u16 token bytes (then token). */
export const HELLO_BODY_BYTES_MIN = 2 + 1 + 2;
/** WELCOME: u16 version, u16 reserved, u32 ×4 limits, u16 ×2 limits, u64 next seq. */
export const WELCOME_BODY_BYTES = 32;
/** PUBLISH head: u32 request id, u32 message count. */
export const PUBLISH_HEAD_BYTES = 8;
/** PUBLISH message head: u8 topic bytes, then the topic, then u32 payload bytes, then the payload. */
export const PUBLISH_MESSAGE_HEAD_BYTES = 1 + 4;
/** PUBLISH_ACK: u32 request id, u32 count, u64 first seq. */
export const PUBLISH_ACK_BODY_BYTES = 16;
/** SUBSCRIBE head: u32 subscription id, u8 start kind, u8 options, u16 entry count, u64 start value. */
export const SUBSCRIBE_HEAD_BYTES = 16;
/** SUBSCRIBE entry head: u16 entry bytes, then the entry text. */
export const FILTER_ENTRY_HEAD_BYTES = 2;
/** Longest filter entry: a largest topic followed by "/**". */
export const FILTER_ENTRY_BYTES_MAX = TOPIC_BYTES_MAX + 3;
/**
 * SUBSCRIBE options bits (byte 5). PROPERTIES: the subscription's DATA frames carry each message's
 * properties (frame flag PROPERTIES). DURABLE: a durable consumer's name follows the filter entries
 * (u8 name bytes, name); SHARED (only with DURABLE): the name is a shared group's.
 */
export const SUBSCRIBE_OPTIONS = { properties: 0x01, durable: 0x02, shared: 0x04 } as const;
/** SUBSCRIBE name head: u8 name bytes, then the name (after the filter entries, with DURABLE). */
export const CONSUMER_NAME_HEAD_BYTES = 1;
/** ACK: u32 subscription id, u32 reserved, u64 seq (cumulative). */
export const ACK_BODY_BYTES = 16;
/** SUBSCRIBED: u32 subscription id, u32 reserved, u64 first seq. */
export const SUBSCRIBED_BODY_BYTES = 16;
/** DATA head: u32 subscription id, u32 message count. */
export const DATA_HEAD_BYTES = 8;
/** DATA message head: u64 seq, u64 time µs, u8 topic bytes (topic), u32 payload bytes (payload). */
export const DATA_MESSAGE_HEAD_BYTES = 8 + 8 + 1 + 4;
/** CAUGHT_UP: u32 subscription id, u32 reserved, u64 next seq. */
export const CAUGHT_UP_BODY_BYTES = 16;
/** UNSUBSCRIBE and UNSUBSCRIBED: u32 subscription id. */
export const UNSUBSCRIBE_BODY_BYTES = 4;
/** PING and PONG: u64 token. */
export const PING_BODY_BYTES = 8;
/** ERROR head: u16 code, u8 fatal, u8 related kind, u32 related id, u16 reason bytes (then reason). */
export const ERROR_HEAD_BYTES = 10;

/** Start kinds of SUBSCRIBE and their wire numbers. */
export const START_KINDS = { live: 0, earliest: 1, seq: 2, time: 3 } as const;
/** The name of a start kind. */
export type StartKind = keyof typeof START_KINDS;
/** Wire number → start kind. */
export const START_KIND_OF_NUMBER: readonly StartKind[] = ["live", "earliest", "seq", "time"];

/** What the related id of an ERROR frame names, and the wire numbers. */
export const RELATED_KINDS = { none: 0, request: 1, subscription: 2 } as const;
/** The name of a related kind. */
export type RelatedKind = keyof typeof RELATED_KINDS;
/** Wire number → related kind. */
export const RELATED_KIND_OF_NUMBER: readonly RelatedKind[] = ["none", "request", "subscription"];

/** Largest integer a u32 field holds. */
export const U32_MAX = 0xffff_ffff;

assert(
  FRAME_BYTES_MAX >=
    FRAME_HEADER_BYTES +
      DATA_HEAD_BYTES +
      DATA_MESSAGE_HEAD_BYTES +
      TOPIC_BYTES_MAX +
      PROPERTIES_HEAD_BYTES +
      PROPERTIES_BYTES_MAX +
      PAYLOAD_BYTES_MAX,
  "a DATA frame holds one largest message",
);
assert(
  FRAME_BYTES_MAX >=
    FRAME_HEADER_BYTES +
      PUBLISH_HEAD_BYTES +
      PUBLISH_MESSAGE_HEAD_BYTES +
      TOPIC_BYTES_MAX +
      PROPERTIES_HEAD_BYTES +
      PROPERTIES_BYTES_MAX +
      PAYLOAD_BYTES_MAX,
  "a PUBLISH frame holds one largest message",
);
assert(WELCOME_BODY_BYTES === 2 + 2 + 4 * 4 + 2 * 2 + 8, "WELCOME fields add up");
assert(
  START_KIND_OF_NUMBER.every((kind, number) => START_KINDS[kind] === number),
  "start kinds agree",
);
assert(
  RELATED_KIND_OF_NUMBER.every((kind, number) => RELATED_KINDS[kind] === number),
  "related kinds agree",
);
