/** protocol: Aria's binary wire protocol — frame layout, encoders, the streaming decoder, error codes (pure). */
export {
  ARIA_ERR_UNKNOWN,
  ARIA_ERROR_SUMMARIES,
  ARIA_ERROR_WIRE_CODES,
  AriaError,
  type AriaErrorCode,
  codeOfWire,
  wireCodeOf,
} from "./error_codes.ts";
export {
  FRAME_HEADER_BYTES,
  FRAME_SENDERS,
  FRAME_TYPES,
  type FrameKind,
  type RelatedKind,
  START_KINDS,
  type StartKind,
  SUBSCRIBE_OPTIONS,
} from "./frame_layout.ts";
export { consumerNameRefusal } from "./frame_parser.ts";
export type {
  AckFrame,
  CaughtUpFrame,
  DataFrame,
  DataMessage,
  DecodeError,
  ErrorFrame,
  ErrorInput,
  Frame,
  HelloFrame,
  OutgoingFrame,
  PingFrame,
  PongFrame,
  PublishAckFrame,
  PublishFrame,
  PublishMessage,
  ServerLimits,
  StartPosition,
  SubscribedFrame,
  SubscribeFrame,
  UnsubscribedFrame,
  UnsubscribeFrame,
  WelcomeFrame,
} from "./frames.ts";
export { FrameWriter } from "./frame_writer.ts";
export {
  encodeAck,
  encodeCaughtUp,
  encodeData,
  encodeError,
  encodeFrame,
  encodeHello,
  encodePing,
  encodePong,
  encodePublish,
  encodePublishAck,
  encodeSubscribe,
  encodeSubscribed,
  encodeUnsubscribe,
  encodeUnsubscribed,
  encodeWelcome,
} from "./frame_encode.ts";
export { FrameDecoder, type FrameDecoderOptions, InputBudget } from "./frame_decoder.ts";
export { MessageBatch } from "./message_batch.ts";
export { TopicCache } from "./topic_cache.ts";
export { describeFrame, hexDump } from "./frame_dump.ts";
export { serverLimits } from "./server_limits.ts";
