/**
 * The shapes of Aria's frames as values: what the decoder returns (`Frame`, `DecodeError`) and
 * what the encoders take (`OutgoingFrame`). Decoded frames are plain objects, one per frame; the
 * messages of PUBLISH and DATA are read through a `MessageBatch` cursor, never one object each.
 * Types only, plus `StartPosition` helpers; the byte layout lives in frame_layout.ts.
 */
import type { Filter } from "../topic/mod.ts";
import type { ARIA_ERR_UNKNOWN, AriaErrorCode } from "./error_codes.ts";
import type { FrameKind, RelatedKind } from "./frame_layout.ts";
import type { MessageBatch } from "./message_batch.ts";

/** Where a subscription starts: at the live tip, at the oldest message, at a seq, or at a time (µs). */
export type StartPosition =
  | { readonly kind: "live" }
  | { readonly kind: "earliest" }
  | { readonly kind: "seq"; readonly seq: number }
  | { readonly kind: "time"; readonly timeUs: number };

/** The limits a server announces in WELCOME. */
export interface ServerLimits {
  frameBytesMax: number;
  payloadBytesMax: number;
  publishBatchMessagesMax: number;
  subscriptionsPerConnectionMax: number;
  filterEntriesMax: number;
  topicBytesMax: number;
}

/** HELLO: the client opens the handshake. `authToken` null when none is sent (sent as length 0). */
export interface HelloFrame {
  kind: "hello";
  version: number;
  clientName: string;
  authToken: string | null;
}
/** WELCOME: the server accepts the handshake. */
export interface WelcomeFrame {
  kind: "welcome";
  version: number;
  limits: ServerLimits;
  nextSeq: number;
}
/** PUBLISH: a batch of messages. `messages` is valid until the decoder's next push() or next(). */
export interface PublishFrame {
  kind: "publish";
  requestId: number;
  messages: MessageBatch;
}
/** PUBLISH_ACK: seqs firstSeq .. firstSeq + count - 1 were assigned to the batch, in order. */
export interface PublishAckFrame {
  kind: "publish_ack";
  requestId: number;
  firstSeq: number;
  count: number;
}
/**
 * SUBSCRIBE: a subscription with a validated filter. `durable` (option DURABLE) names a durable
 * consumer; `shared` (option SHARED, only with `durable`) makes it a shared group's member. Both
 * absent on a plain subscription.
 */
export interface SubscribeFrame {
  kind: "subscribe";
  subscriptionId: number;
  start: StartPosition;
  filter: Filter;
  durable?: string;
  shared?: boolean;
  /** Option PROPERTIES: DATA frames carry each message's properties (absent: v1 DATA). */
  properties?: boolean;
}
/** SUBSCRIBED: the subscription's cursor starts at `firstSeq`. */
export interface SubscribedFrame {
  kind: "subscribed";
  subscriptionId: number;
  firstSeq: number;
}
/** DATA: messages of one subscription, seqs ascending. `messages` is valid until the next push() or next(). */
export interface DataFrame {
  kind: "data";
  subscriptionId: number;
  messages: MessageBatch;
}
/** CAUGHT_UP: the subscription reached the live tip; `nextSeq` is the next seq it will see. */
export interface CaughtUpFrame {
  kind: "caught_up";
  subscriptionId: number;
  nextSeq: number;
}
/** UNSUBSCRIBE: the client ends a subscription. */
export interface UnsubscribeFrame {
  kind: "unsubscribe";
  subscriptionId: number;
}
/** UNSUBSCRIBED: no more DATA follows for the subscription. */
export interface UnsubscribedFrame {
  kind: "unsubscribed";
  subscriptionId: number;
}
/** PING: the peer answers PONG with the same token. */
export interface PingFrame {
  kind: "ping";
  token: number;
}
/** PONG: the answer to PING. */
export interface PongFrame {
  kind: "pong";
  token: number;
}
/** ACK: every message of a durable subscription delivered with seq <= `seq` is processed. */
export interface AckFrame {
  kind: "ack";
  subscriptionId: number;
  seq: number;
}
/** ERROR: a failure, with the request or subscription it concerns; fatal ones close the connection. */
export interface ErrorFrame {
  kind: "error";
  code: AriaErrorCode | typeof ARIA_ERR_UNKNOWN;
  wireCode: number;
  fatal: boolean;
  relatedKind: RelatedKind;
  relatedId: number;
  reason: string;
}

/** A decoded frame. */
export type Frame =
  | HelloFrame
  | WelcomeFrame
  | PublishFrame
  | PublishAckFrame
  | SubscribeFrame
  | SubscribedFrame
  | DataFrame
  | CaughtUpFrame
  | UnsubscribeFrame
  | UnsubscribedFrame
  | PingFrame
  | PongFrame
  | ErrorFrame
  | AckFrame;

/**
 * Why bytes did not decode to a frame. Fatal: the stream can no longer be split into frames and the
 * decoder refuses further input. Non-fatal: the frame was skipped and decoding goes on. The fields
 * match `encodeError`'s input, so a broker can answer with `encodeError(writer, decodeError)`.
 */
export interface DecodeError {
  kind: "decode_error";
  code: AriaErrorCode;
  fatal: boolean;
  /** The frame kind when the header named a known one. */
  frameKind: FrameKind | null;
  relatedKind: RelatedKind;
  relatedId: number;
  reason: string;
}

/** One message to publish. `properties`: opaque bytes kept with it (absent or empty: none). */
export interface PublishMessage {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly properties?: Uint8Array;
}
/** One message to deliver. `properties` is set when the DATA frame carries them (flag 0x01). */
export interface DataMessage {
  readonly seq: number;
  readonly timeUs: number;
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly properties?: Uint8Array;
}

/** What `encodeFrame` takes: decoded shapes, with messages as arrays and the filter as texts or a Filter. */
export type OutgoingFrame =
  | HelloFrame
  | WelcomeFrame
  | PublishAckFrame
  | SubscribedFrame
  | CaughtUpFrame
  | UnsubscribeFrame
  | UnsubscribedFrame
  | PingFrame
  | PongFrame
  | AckFrame
  | { kind: "publish"; requestId: number; messages: readonly PublishMessage[] }
  | {
      kind: "subscribe";
      subscriptionId: number;
      start: StartPosition;
      filter: Filter | readonly string[];
      durable?: string;
      shared?: boolean;
      properties?: boolean;
    }
  | {
      kind: "data";
      subscriptionId: number;
      messages: readonly DataMessage[];
      /** Flag PROPERTIES: every message carries its properties (empty when it has none). */
      properties?: boolean;
    }
  | ({ kind: "error" } & ErrorInput);

/** What `encodeError` takes. A DecodeError fits. */
export interface ErrorInput {
  code: AriaErrorCode;
  fatal: boolean;
  relatedKind?: RelatedKind;
  relatedId?: number;
  reason: string;
}
