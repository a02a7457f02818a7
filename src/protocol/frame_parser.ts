/**
 * FrameParser: turns the bytes of one complete frame (header included) into a Frame or a
 * DecodeError. Checks everything that needs no server state: field bounds, counts against the
 * bytes left, trailing bytes, reserved fields, safe u64s, UTF-8, topics (through a TopicCache),
 * filters (Filter.parse), start kinds, payload and batch limits. Session rules (handshake first,
 * known subscription ids, frame direction) belong to the broker.
 * A field read past the frame's end returns 0 and records the failure; the first failure wins and
 * parse() returns it. Every error here is non-fatal (the frame's length is known, the stream goes
 * on) except an unsupported version, after which nothing can be read.
 */
import {
  AUTH_TOKEN_BYTES_MAX,
  CLIENT_NAME_BYTES_MAX,
  CONSUMER_NAME_BYTES_MAX,
  ERROR_REASON_BYTES_MAX,
  FILTER_ENTRIES_MAX,
  PAYLOAD_BYTES_MAX,
  PROPERTIES_BYTES_MAX,
  PROTOCOL_VERSION,
  PUBLISH_BATCH_MESSAGES_MAX,
} from "../constants.ts";
import { Filter } from "../topic/mod.ts";
import { type AriaErrorCode, codeOfWire } from "./error_codes.ts";
import {
  DATA_MESSAGE_HEAD_BYTES,
  FILTER_ENTRY_BYTES_MAX,
  FILTER_ENTRY_HEAD_BYTES,
  FRAME_FLAG_PROPERTIES,
  FRAME_HEADER_BYTES,
  FRAME_KIND_OF_TYPE,
  type FrameKind,
  HEADER_FLAGS_OFFSET,
  HEADER_RESERVED_OFFSET,
  HEADER_TYPE_OFFSET,
  PROPERTIES_HEAD_BYTES,
  PUBLISH_MESSAGE_HEAD_BYTES,
  RELATED_KIND_OF_NUMBER,
  type RelatedKind,
  START_KIND_OF_NUMBER,
  SUBSCRIBE_OPTIONS,
} from "./frame_layout.ts";
import type { DecodeError, Frame, StartPosition, SubscribeFrame } from "./frames.ts";
import { MessageBatch } from "./message_batch.ts";
import type { TopicCache } from "./topic_cache.ts";
import { readU64 } from "./u64.ts";

/** Limits the parser enforces; a client may pass the ones its server announced. */
export interface ParseLimits {
  payloadBytesMax: number;
  publishBatchMessagesMax: number;
  filterEntriesMax: number;
}

/** Default parse limits: the constants. */
export const PARSE_LIMITS_DEFAULT: ParseLimits = {
  payloadBytesMax: PAYLOAD_BYTES_MAX,
  publishBatchMessagesMax: PUBLISH_BATCH_MESSAGES_MAX,
  filterEntriesMax: FILTER_ENTRIES_MAX,
};

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Parses complete frames; reuses its scratch between frames. */
export class FrameParser {
  private bytes: Uint8Array = new Uint8Array(0);
  private view: DataView = new DataView(this.bytes.buffer);
  private frameStart = 0;
  private at = 0;
  private end = 0;
  private kindName = "";
  private kind: FrameKind | null = null;
  private failure: DecodeError | null = null;
  private relatedKind: RelatedKind = "none";
  private relatedId = 0;
  /** The frame (PUBLISH or DATA) has the flag PROPERTIES. */
  private withProperties = false;
  /** Topic of each message of the last PUBLISH or DATA, read by its MessageBatch. */
  private readonly topics: string[] = [];

  constructor(
    private readonly limits: ParseLimits,
    private readonly topicCache: TopicCache,
  ) {}

  /** Parses bytes[start, start + frameBytes) of `view` (which spans `bytes` with equal offsets). */
  parse(bytes: Uint8Array, view: DataView, start: number, frameBytes: number): Frame | DecodeError {
    this.bytes = bytes;
    this.view = view;
    this.frameStart = start;
    this.at = start + FRAME_HEADER_BYTES;
    this.end = start + frameBytes;
    this.failure = null;
    this.relatedKind = "none";
    this.relatedId = 0;
    const type = bytes[start + HEADER_TYPE_OFFSET];
    this.kind = FRAME_KIND_OF_TYPE[type] ?? null;
    if (this.kind === null) {
      return this.fail(
        "ARIA_ERR_UNKNOWN_FRAME_TYPE",
        `unknown frame type 0x${hex2(type)}; the frame is skipped`,
      );
    }
    this.kindName = this.kind.toUpperCase();
    const flags = bytes[start + HEADER_FLAGS_OFFSET];
    // PUBLISH and DATA may carry FRAME_FLAG_PROPERTIES; every other bit, and any flag elsewhere, is
    // malformed.
    const flagsAllowed =
      this.kind === "publish" || this.kind === "data" ? FRAME_FLAG_PROPERTIES : 0;
    this.withProperties = flags === FRAME_FLAG_PROPERTIES && flagsAllowed !== 0;
    if (
      (flags & ~flagsAllowed) !== 0 ||
      view.getUint16(start + HEADER_RESERVED_OFFSET, true) !== 0
    ) {
      return this.fail(
        "ARIA_ERR_MALFORMED_FRAME",
        `${this.kindName} header has non-zero flags or reserved bits`,
      );
    }
    const frame = this.parseBody(this.kind);
    if (this.failure !== null) return this.failure;
    if (this.at !== this.end) {
      return this.fail(
        "ARIA_ERR_MALFORMED_FRAME",
        `${this.kindName} has ${this.end - this.at} trailing bytes`,
      );
    }
    return frame!;
  }

  private parseBody(kind: FrameKind): Frame | null {
    switch (kind) {
      case "hello":
        return this.parseHello();
      case "welcome":
        return this.parseWelcome();
      case "publish":
        return this.parsePublish();
      case "publish_ack": {
        const requestId = this.id("request id", "request");
        const count = this.u32("count");
        return { kind, requestId, count, firstSeq: this.u64("first seq") };
      }
      case "subscribe":
        return this.parseSubscribe();
      case "subscribed": {
        const subscriptionId = this.id("subscription id", "subscription");
        this.zero32();
        return { kind, subscriptionId, firstSeq: this.u64("first seq") };
      }
      case "data":
        return this.parseData();
      case "caught_up": {
        const subscriptionId = this.id("subscription id", "subscription");
        this.zero32();
        return { kind, subscriptionId, nextSeq: this.u64("next seq") };
      }
      case "unsubscribe":
      case "unsubscribed":
        return { kind, subscriptionId: this.id("subscription id", "subscription") };
      case "ping":
      case "pong":
        return { kind, token: this.u64("token") };
      case "error":
        return this.parseError();
      case "ack": {
        const subscriptionId = this.id("subscription id", "subscription");
        this.zero32();
        return { kind, subscriptionId, seq: this.u64("seq") };
      }
    }
  }

  private parseHello(): Frame | null {
    const version = this.version();
    if (this.failure !== null) return null;
    const clientName = this.string8("client name", CLIENT_NAME_BYTES_MAX);
    const token = this.string16("auth token", AUTH_TOKEN_BYTES_MAX);
    return { kind: "hello", version, clientName, authToken: token === "" ? null : token };
  }

  private parseWelcome(): Frame | null {
    const version = this.version();
    if (this.failure !== null) return null;
    if (this.u16("reserved") !== 0) this.malformed("reserved field is not zero");
    const limits = {
      frameBytesMax: this.u32("frame bytes max"),
      payloadBytesMax: this.u32("payload bytes max"),
      publishBatchMessagesMax: this.u32("publish batch messages max"),
      subscriptionsPerConnectionMax: this.u32("subscriptions per connection max"),
      filterEntriesMax: this.u16("filter entries max"),
      topicBytesMax: this.u16("topic bytes max"),
    };
    return { kind: "welcome", version, limits, nextSeq: this.u64("next seq") };
  }

  private parsePublish(): Frame | null {
    const requestId = this.id("request id", "request");
    // At least each message's head: an empty topic is read, and refused as an INVALID_TOPIC.
    const count = this.batchCount(
      PUBLISH_MESSAGE_HEAD_BYTES + (this.withProperties ? PROPERTIES_HEAD_BYTES : 0),
      this.limits.publishBatchMessagesMax,
    );
    const first = this.at;
    for (let index = 0; index < count && this.failure === null; index++) this.message(index, -1);
    if (this.failure !== null) return null;
    return {
      kind: "publish",
      requestId,
      messages: new MessageBatch(
        this.bytes,
        this.view,
        first,
        this.at,
        count,
        false,
        this.topics,
        0,
        0,
        this.withProperties,
      ),
    };
  }

  private parseData(): Frame | null {
    const subscriptionId = this.id("subscription id", "subscription");
    const count = this.batchCount(
      DATA_MESSAGE_HEAD_BYTES + 1 + (this.withProperties ? PROPERTIES_HEAD_BYTES : 0),
      Number.POSITIVE_INFINITY,
    );
    const first = this.at;
    let seqBefore = 0;
    let firstSeq = 0;
    for (let index = 0; index < count && this.failure === null; index++) {
      const seq = this.messageU64(index, "seq");
      this.messageU64(index, "time");
      if (this.failure === null && seq <= seqBefore) {
        this.malformed(`message ${index} has seq ${seq}, not above the previous seq ${seqBefore}`);
      }
      if (index === 0) firstSeq = seq;
      seqBefore = seq;
      this.message(index, seq);
    }
    if (this.failure !== null) return null;
    return {
      kind: "data",
      subscriptionId,
      messages: new MessageBatch(
        this.bytes,
        this.view,
        first,
        this.at,
        count,
        true,
        this.topics,
        firstSeq,
        seqBefore,
        this.withProperties,
      ),
    };
  }

  private parseSubscribe(): Frame | null {
    const subscriptionId = this.id("subscription id", "subscription");
    const startNumber = this.u8("start kind");
    const options = this.u8("options");
    const durable = (options & SUBSCRIBE_OPTIONS.durable) !== 0;
    const shared = (options & SUBSCRIBE_OPTIONS.shared) !== 0;
    if (this.failure === null && (options & ~SUBSCRIBE_OPTIONS_KNOWN) !== 0)
      this.malformed(`options 0x${hex2(options)} has unknown bits`);
    if (this.failure === null && shared && !durable)
      this.malformed("option SHARED needs option DURABLE (a shared group is a durable consumer)");
    const entryCount = this.u16("filter entry count");
    const value = this.u64("start value");
    const start = this.failure === null ? this.start(startNumber, value) : null;
    if (this.failure === null && entryCount > this.limits.filterEntriesMax) {
      this.fail(
        "ARIA_ERR_INVALID_FILTER",
        `filter has ${entryCount} entries, more than the limit of ${this.limits.filterEntriesMax}`,
      );
    }
    // At least each entry's length field: an empty entry is read, and refused as an INVALID_FILTER.
    this.overrun("filter entry count", entryCount, FILTER_ENTRY_HEAD_BYTES);
    const texts: string[] = [];
    for (let index = 0; index < entryCount && this.failure === null; index++) {
      const entryBytes = this.u16(`filter entry ${index} length`);
      if (entryBytes > FILTER_ENTRY_BYTES_MAX && this.failure === null) {
        this.fail(
          "ARIA_ERR_INVALID_FILTER",
          `filter entry ${index} is ${entryBytes} bytes, more than the limit of ${FILTER_ENTRY_BYTES_MAX}`,
        );
      }
      texts.push(this.text(`filter entry ${index}`, entryBytes, "ARIA_ERR_INVALID_FILTER") ?? "");
    }
    const name = durable ? this.consumerName() : null;
    if (this.failure !== null || start === null) return null;
    if (this.at !== this.end) return null; // trailing bytes: reported by parse()
    const parsed = Filter.parse(texts);
    if (!parsed.ok) return (this.fail("ARIA_ERR_INVALID_FILTER", parsed.reason), null);
    const frame: SubscribeFrame = {
      kind: "subscribe",
      subscriptionId,
      start,
      filter: parsed.filter,
    };
    if (name !== null) {
      frame.durable = name;
      frame.shared = shared;
    }
    if ((options & SUBSCRIBE_OPTIONS.properties) !== 0) frame.properties = true;
    return frame;
  }

  /** A durable consumer's name: u8 bytes (1..CONSUMER_NAME_BYTES_MAX), `[A-Za-z0-9_.:/$-]`. */
  private consumerName(): string | null {
    const bytes = this.u8("consumer name length");
    if (this.failure !== null) return null;
    if (bytes === 0 || bytes > CONSUMER_NAME_BYTES_MAX)
      return this.malformed(`consumer name is ${bytes} bytes, not 1..${CONSUMER_NAME_BYTES_MAX}`);
    const name = this.text("consumer name", bytes);
    if (name === null) return null;
    const reason = consumerNameRefusal(name);
    return reason === null ? name : this.malformed(reason);
  }

  private parseError(): Frame | null {
    const wireCode = this.u16("code");
    const fatal = this.u8("fatal");
    const relatedNumber = this.u8("related kind");
    const relatedId = this.u32("related id");
    const reason = this.string16("reason", ERROR_REASON_BYTES_MAX);
    if (this.failure !== null) return null;
    if (fatal > 1) return this.malformed(`fatal flag is ${fatal}, not 0 or 1`);
    const relatedKind = RELATED_KIND_OF_NUMBER[relatedNumber];
    if (relatedKind === undefined)
      return this.malformed(`related kind ${relatedNumber} is unknown`);
    return {
      kind: "error",
      code: codeOfWire(wireCode),
      wireCode,
      fatal: fatal === 1,
      relatedKind,
      relatedId,
      reason,
    };
  }

  /**
   * One PUBLISH or DATA message after its seq and time: topic, payload. Runs once per message:
   * field names for error reasons are built only when a check fails (messageNeed).
   */
  private message(index: number, seq: number): void {
    if (!this.messageNeed(index, "topic length", 1)) return;
    const topicBytes = this.bytes[this.at++];
    if (!this.messageNeed(index, "topic", topicBytes)) return;
    const topic = this.topicCache.resolve(this.bytes, this.at, topicBytes);
    if (topic === null) {
      const what = seq < 0 ? `message ${index}` : `message ${index} (seq ${seq})`;
      this.fail("ARIA_ERR_INVALID_TOPIC", `${what}: ${this.topicCache.reason}`);
      return;
    }
    this.topics[index] = topic;
    this.at += topicBytes;
    if (this.withProperties) {
      if (!this.messageNeed(index, "properties length", PROPERTIES_HEAD_BYTES)) return;
      const propertiesBytes = this.view.getUint16(this.at, true);
      this.at += PROPERTIES_HEAD_BYTES;
      if (propertiesBytes > PROPERTIES_BYTES_MAX) {
        this.fail(
          "ARIA_ERR_PROPERTIES_TOO_LARGE",
          `message ${index} properties are ${propertiesBytes} bytes, more than the limit of ${PROPERTIES_BYTES_MAX}`,
        );
        return;
      }
      if (!this.messageNeed(index, "properties", propertiesBytes)) return;
      this.at += propertiesBytes;
    }
    if (!this.messageNeed(index, "payload length", 4)) return;
    const payloadBytes = this.view.getUint32(this.at, true);
    this.at += 4;
    if (payloadBytes > this.limits.payloadBytesMax) {
      this.fail(
        "ARIA_ERR_PAYLOAD_TOO_LARGE",
        `message ${index} payload is ${payloadBytes} bytes, more than the limit of ${this.limits.payloadBytesMax}`,
      );
      return;
    }
    if (this.messageNeed(index, "payload", payloadBytes)) this.at += payloadBytes;
  }

  /** need() for a field of message `index`, naming it (`message 3 topic`) only when it fails. */
  private messageNeed(index: number, field: string, bytes: number): boolean {
    if (this.failure === null && bytes <= this.end - this.at) return true;
    return this.need(`message ${index} ${field}`, bytes);
  }

  /** u64() for a field of message `index`, naming it only when it fails. */
  private messageU64(index: number, field: string): number {
    if (this.failure === null && this.end - this.at >= 8) {
      const value = readU64(this.view, this.at);
      if (value >= 0) {
        this.at += 8;
        return value;
      }
    }
    return this.u64(`message ${index} ${field}`);
  }

  private batchCount(messageBytesMin: number, countMax: number): number {
    const count = this.u32("message count");
    if (this.failure === null && count === 0) this.malformed("message count is 0");
    if (this.failure === null && count > countMax) {
      this.fail(
        "ARIA_ERR_BATCH_TOO_LARGE",
        `${this.kindName} has ${count} messages, more than the limit of ${countMax}`,
      );
    }
    this.overrun("message count", count, messageBytesMin);
    return count;
  }

  private start(number: number, value: number): StartPosition | null {
    const kind = START_KIND_OF_NUMBER[number];
    if (kind === undefined)
      return (this.fail("ARIA_ERR_INVALID_START", `start kind ${number} is unknown`), null);
    if ((kind === "live" || kind === "earliest") && value !== 0) {
      return (
        this.fail("ARIA_ERR_INVALID_START", `start kind ${kind} has value ${value}, not 0`), null
      );
    }
    if (kind === "seq" && value === 0)
      return (this.fail("ARIA_ERR_INVALID_START", "start seq is 0; seqs start at 1"), null);
    if (kind === "live") return { kind };
    if (kind === "earliest") return { kind };
    return kind === "seq" ? { kind, seq: value } : { kind, timeUs: value };
  }

  private version(): number {
    const version = this.u16("version");
    if (this.failure === null && version !== PROTOCOL_VERSION) {
      this.fail(
        "ARIA_ERR_UNSUPPORTED_VERSION",
        `${this.kindName} has protocol version ${version}; this peer speaks ${PROTOCOL_VERSION}`,
        true,
      );
    }
    return version;
  }

  private id(name: string, relatedKind: RelatedKind): number {
    const id = this.u32(name);
    if (this.failure === null) {
      this.relatedKind = relatedKind;
      this.relatedId = id;
    }
    return id;
  }

  private zero32(): void {
    if (this.u32("reserved") !== 0 && this.failure === null)
      this.malformed("reserved field is not zero");
  }

  private overrun(name: string, count: number, entryBytesMin: number): void {
    if (this.failure !== null) return;
    const left = this.end - this.at;
    if (count * entryBytesMin > left) {
      this.malformed(
        `${name} ${count} overruns the frame: needs at least ${count * entryBytesMin} bytes, ${left} remain`,
      );
    }
  }

  private string8(name: string, bytesMax: number): string {
    return this.boundedText(name, this.u8(`${name} length`), bytesMax);
  }

  private string16(name: string, bytesMax: number): string {
    return this.boundedText(name, this.u16(`${name} length`), bytesMax);
  }

  private boundedText(name: string, length: number, bytesMax: number): string {
    if (this.failure === null && length > bytesMax)
      this.malformed(`${name} is ${length} bytes, more than the limit of ${bytesMax}`);
    return this.text(name, length) ?? "";
  }

  private text(
    name: string,
    length: number,
    badUtf8Code: AriaErrorCode = "ARIA_ERR_MALFORMED_FRAME",
  ): string | null {
    if (this.failure !== null || !this.need(name, length)) return null;
    const start = this.at;
    this.at += length;
    try {
      return utf8.decode(this.bytes.subarray(start, start + length));
    } catch {
      this.fail(badUtf8Code, `${this.kindName} ${name} is not valid UTF-8`);
      return null;
    }
  }

  private need(name: string, bytes: number): boolean {
    if (this.failure !== null) return false;
    const left = this.end - this.at;
    if (bytes <= left) return true;
    this.malformed(
      `${name} at byte ${this.at - this.frameStart} needs ${bytes} bytes, ${left} remain`,
    );
    return false;
  }

  private u8(name: string): number {
    if (!this.need(name, 1)) return 0;
    return this.bytes[this.at++];
  }

  private u16(name: string): number {
    if (!this.need(name, 2)) return 0;
    const value = this.view.getUint16(this.at, true);
    this.at += 2;
    return value;
  }

  private u32(name: string): number {
    if (!this.need(name, 4)) return 0;
    const value = this.view.getUint32(this.at, true);
    this.at += 4;
    return value;
  }

  private u64(name: string): number {
    if (!this.need(name, 8)) return 0;
    const value = readU64(this.view, this.at);
    if (value < 0) this.malformed(`${name} at byte ${this.at - this.frameStart} exceeds 2^53 - 1`);
    this.at += 8;
    return Math.max(0, value);
  }

  private malformed(reason: string): null {
    return (this.fail("ARIA_ERR_MALFORMED_FRAME", `${this.kindName} ${reason}`), null);
  }

  private fail(code: AriaErrorCode, reason: string, fatal = false): DecodeError {
    if (this.failure === null) {
      this.failure = {
        kind: "decode_error",
        code,
        fatal,
        frameKind: this.kind,
        relatedKind: this.relatedKind,
        relatedId: this.relatedId,
        reason,
      };
    }
    return this.failure;
  }
}

/** The SUBSCRIBE option bits this parser knows; any other set bit is MALFORMED_FRAME. */
const SUBSCRIBE_OPTIONS_KNOWN =
  SUBSCRIBE_OPTIONS.properties | SUBSCRIBE_OPTIONS.durable | SUBSCRIBE_OPTIONS.shared;

const CONSUMER_NAME_PATTERN = /^[A-Za-z0-9_.:/$-]+$/;

/**
 * Why `name` is not a valid durable consumer name (1..CONSUMER_NAME_BYTES_MAX bytes of
 * `[A-Za-z0-9_.:-]`, plus `/` and `$` for the names the MQTT door makes; not `.` nor `..`), or
 * null.
 */
export function consumerNameRefusal(name: string): string | null {
  if (name.length === 0 || name.length > CONSUMER_NAME_BYTES_MAX)
    return `consumer name is ${name.length} bytes, not 1..${CONSUMER_NAME_BYTES_MAX}`;
  if (!CONSUMER_NAME_PATTERN.test(name))
    return `consumer name ${JSON.stringify(name)} holds a character outside [A-Za-z0-9_.:/$-]`;
  // A URL path segment of only dots is taken as . or .. (the admin API could not remove it).
  if (name === "." || name === "..")
    return `consumer name ${JSON.stringify(name)} cannot be named in a URL (the admin API)`;
  return null;
}

function hex2(value: number): string {
  return value.toString(16).padStart(2, "0");
}
