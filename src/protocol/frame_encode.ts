/**
 * Encoders: one function per frame kind, each appending one complete frame to a FrameWriter, plus
 * `encodeFrame` for any OutgoingFrame. Inputs are the decoded shapes (see frames.ts), so
 * decode(encode(f)) gives f back. Encoders assert what a correct caller guarantees (ids fit a u32,
 * u64 values are safe integers, strings within their limits except ERROR reasons, which are cut);
 * they do not validate topics or filters: callers validate user input, and tests need bad frames.
 */
import {
  AUTH_TOKEN_BYTES_MAX,
  CLIENT_NAME_BYTES_MAX,
  CONSUMER_NAME_BYTES_MAX,
  ERROR_REASON_BYTES_MAX,
} from "../constants.ts";
import { assert, unreachable } from "../stdx/assert.ts";
import { Filter } from "../topic/mod.ts";
import { wireCodeOf } from "./error_codes.ts";
import {
  FILTER_ENTRY_BYTES_MAX,
  RELATED_KINDS,
  START_KINDS,
  SUBSCRIBE_OPTIONS,
} from "./frame_layout.ts";
import type {
  AckFrame,
  CaughtUpFrame,
  DataMessage,
  ErrorInput,
  HelloFrame,
  OutgoingFrame,
  PingFrame,
  PongFrame,
  PublishAckFrame,
  PublishMessage,
  StartPosition,
  SubscribedFrame,
  UnsubscribedFrame,
  UnsubscribeFrame,
  WelcomeFrame,
} from "./frames.ts";
import type { FrameWriter } from "./frame_writer.ts";

const utf8 = new TextEncoder();

/** HELLO: version, client name, auth token (null or "" sends none). */
export function encodeHello(writer: FrameWriter, frame: Omit<HelloFrame, "kind">): void {
  writer.begin("hello");
  writer.u16(frame.version);
  writer.string(frame.clientName, { lengthBytes: 1, bytesMax: CLIENT_NAME_BYTES_MAX });
  writer.string(frame.authToken ?? "", { lengthBytes: 2, bytesMax: AUTH_TOKEN_BYTES_MAX });
  writer.end();
}

/** WELCOME: version, the server's limits, the next seq it will assign. */
export function encodeWelcome(writer: FrameWriter, frame: Omit<WelcomeFrame, "kind">): void {
  const limits = frame.limits;
  writer.begin("welcome");
  writer.u16(frame.version);
  writer.u16(0);
  writer.u32(limits.frameBytesMax);
  writer.u32(limits.payloadBytesMax);
  writer.u32(limits.publishBatchMessagesMax);
  writer.u32(limits.subscriptionsPerConnectionMax);
  writer.u16(limits.filterEntriesMax);
  writer.u16(limits.topicBytesMax);
  writer.u64(frame.nextSeq);
  writer.end();
}

/** PUBLISH of `messages` (at least one) under `requestId`. */
export function encodePublish(
  writer: FrameWriter,
  frame: { requestId: number; messages: readonly PublishMessage[] },
): void {
  // The flag PROPERTIES only when a message has some: a frame without is the v1 layout.
  const withProperties = frame.messages.some((message) => (message.properties?.length ?? 0) > 0);
  writer.beginPublish(frame.requestId, withProperties);
  for (const message of frame.messages)
    writer.addPublishMessageText(message.topic, message.payload, message.properties);
  assert(writer.endPublish() > 0, "PUBLISH has at least one message");
}

/** PUBLISH_ACK: seqs firstSeq .. firstSeq + count - 1 went to request `requestId`. */
export function encodePublishAck(writer: FrameWriter, frame: Omit<PublishAckFrame, "kind">): void {
  writer.begin("publish_ack");
  writer.u32(frame.requestId);
  writer.u32(frame.count);
  writer.u64(frame.firstSeq);
  writer.end();
}

/**
 * SUBSCRIBE: id, start, filter entries (texts such as `a/b` and `a/**`, or a parsed Filter);
 * with `durable`, option DURABLE (and SHARED with `shared`) and the consumer's name after them.
 */
export function encodeSubscribe(
  writer: FrameWriter,
  frame: {
    subscriptionId: number;
    start: StartPosition;
    filter: Filter | readonly string[];
    durable?: string;
    shared?: boolean;
    properties?: boolean;
  },
): void {
  const texts = frame.filter instanceof Filter ? frame.filter.toStrings() : frame.filter;
  const durable = frame.durable !== undefined;
  assert(durable || frame.shared !== true, "SHARED only with DURABLE");
  const options =
    (durable ? SUBSCRIBE_OPTIONS.durable : 0) |
    (frame.shared ? SUBSCRIBE_OPTIONS.shared : 0) |
    (frame.properties ? SUBSCRIBE_OPTIONS.properties : 0);
  writer.begin("subscribe");
  writer.u32(frame.subscriptionId);
  writer.u8(START_KINDS[frame.start.kind]);
  writer.u8(options);
  writer.u16(texts.length);
  writer.u64(startValue(frame.start));
  for (const text of texts)
    writer.string(text, { lengthBytes: 2, bytesMax: FILTER_ENTRY_BYTES_MAX });
  if (frame.durable !== undefined)
    writer.string(frame.durable, { lengthBytes: 1, bytesMax: CONSUMER_NAME_BYTES_MAX });
  writer.end();
}

/** ACK: every message of durable subscription `subscriptionId` up to `seq` is processed. */
export function encodeAck(writer: FrameWriter, frame: Omit<AckFrame, "kind">): void {
  writer.begin("ack");
  writer.u32(frame.subscriptionId);
  writer.u32(0);
  writer.u64(frame.seq);
  writer.end();
}

/** SUBSCRIBED: the subscription starts at `firstSeq`. */
export function encodeSubscribed(writer: FrameWriter, frame: Omit<SubscribedFrame, "kind">): void {
  writer.begin("subscribed");
  writer.u32(frame.subscriptionId);
  writer.u32(0);
  writer.u64(frame.firstSeq);
  writer.end();
}

/**
 * DATA from message objects (tests, simple servers); the broker streams with writer.beginData().
 * `properties`: the flag PROPERTIES, each message with its properties (empty when it has none).
 */
export function encodeData(
  writer: FrameWriter,
  frame: { subscriptionId: number; messages: readonly DataMessage[]; properties?: boolean },
): void {
  writer.beginData(frame.subscriptionId, frame.properties === true);
  for (const message of frame.messages) {
    const properties = message.properties ?? new Uint8Array(0);
    writer.addDataMessage(
      message.seq,
      message.timeUs,
      utf8.encode(message.topic),
      message.payload,
      0,
      message.payload.length,
      properties,
      0,
      properties.length,
    );
  }
  assert(writer.endData() > 0, "DATA has at least one message");
}

/** CAUGHT_UP: the subscription reached the live tip. */
export function encodeCaughtUp(writer: FrameWriter, frame: Omit<CaughtUpFrame, "kind">): void {
  writer.begin("caught_up");
  writer.u32(frame.subscriptionId);
  writer.u32(0);
  writer.u64(frame.nextSeq);
  writer.end();
}

/** UNSUBSCRIBE of `subscriptionId`. */
export function encodeUnsubscribe(
  writer: FrameWriter,
  frame: Omit<UnsubscribeFrame, "kind">,
): void {
  writer.begin("unsubscribe");
  writer.u32(frame.subscriptionId);
  writer.end();
}

/** UNSUBSCRIBED of `subscriptionId`. */
export function encodeUnsubscribed(
  writer: FrameWriter,
  frame: Omit<UnsubscribedFrame, "kind">,
): void {
  writer.begin("unsubscribed");
  writer.u32(frame.subscriptionId);
  writer.end();
}

/** PING with `token`. */
export function encodePing(writer: FrameWriter, frame: Omit<PingFrame, "kind">): void {
  writer.begin("ping");
  writer.u64(frame.token);
  writer.end();
}

/** PONG echoing `token`. */
export function encodePong(writer: FrameWriter, frame: Omit<PongFrame, "kind">): void {
  writer.begin("pong");
  writer.u64(frame.token);
  writer.end();
}

/** ERROR: code, fatal flag, related request or subscription, reason (cut to ERROR_REASON_BYTES_MAX). */
export function encodeError(writer: FrameWriter, error: ErrorInput): void {
  writer.begin("error");
  writer.u16(wireCodeOf(error.code));
  writer.u8(error.fatal ? 1 : 0);
  writer.u8(RELATED_KINDS[error.relatedKind ?? "none"]);
  writer.u32(error.relatedId ?? 0);
  writer.string(error.reason, { lengthBytes: 2, bytesMax: ERROR_REASON_BYTES_MAX, truncate: true });
  writer.end();
}

/** Encodes any frame. */
export function encodeFrame(writer: FrameWriter, frame: OutgoingFrame): void {
  switch (frame.kind) {
    case "hello":
      return encodeHello(writer, frame);
    case "welcome":
      return encodeWelcome(writer, frame);
    case "publish":
      return encodePublish(writer, frame);
    case "publish_ack":
      return encodePublishAck(writer, frame);
    case "subscribe":
      return encodeSubscribe(writer, frame);
    case "subscribed":
      return encodeSubscribed(writer, frame);
    case "data":
      return encodeData(writer, frame);
    case "caught_up":
      return encodeCaughtUp(writer, frame);
    case "unsubscribe":
      return encodeUnsubscribe(writer, frame);
    case "unsubscribed":
      return encodeUnsubscribed(writer, frame);
    case "ping":
      return encodePing(writer, frame);
    case "pong":
      return encodePong(writer, frame);
    case "error":
      return encodeError(writer, frame);
    case "ack":
      return encodeAck(writer, frame);
    default:
      return unreachable(frame);
  }
}

function startValue(start: StartPosition): number {
  switch (start.kind) {
    case "live":
    case "earliest":
      return 0;
    case "seq":
      return start.seq;
    case "time":
      return start.timeUs;
    default:
      return unreachable(start);
  }
}
