/**
 * The MQTT streaming decoder: bytes in (any split, one byte at a time included), packets out, or
 * one fatal error (MQTT closes the connection on any malformed packet or protocol violation). The
 * fixed header is checked as soon as it is whole, before the body is buffered: packet type and
 * direction, reserved flag bits, QoS 3, CONNECT first and only once (server role), and the
 * remaining length against the maximum packet size, so an oversize packet costs nothing. The body
 * is parsed by codec_parse.ts; the encoder is codec_encode.ts. Pure: no I/O, no clock.
 *
 *   chunk:  [ ...packets parsed in place... | head of a packet ] → carry: [ head | rest ]
 *
 * Invariants: carryBytes > 0 ⇒ the chunk is drained; after the error, next() returns null forever
 * and input is ignored. Decoded packets own their bytes (payloads are copied): the caller may
 * reuse a chunk once next() has returned null.
 */
import { INPUT_CARRY_BYTES_UNCOUNTED } from "../constants.ts";
import type { InputBudget } from "../protocol/mod.ts";
import { assert } from "../stdx/assert.ts";
import { PacketError, readVariableByteInteger } from "./codec_bytes.ts";
import { parseBody, parseConnect } from "./codec_parse.ts";
import {
  type MqttDecodeError,
  type MqttDecodeResult,
  type ProtocolVersion,
  REASON,
  VARIABLE_BYTE_INTEGER_MAX,
} from "./packets.ts";

export { encodePacket } from "./codec_encode.ts";

/** Which side decodes: a server accepts client-to-server packets only, a client the reverse. */
export type MqttRole = "server" | "client" | "any";

/** Options of an MqttDecoder. */
export interface MqttDecoderOptions {
  /** The side that decodes (default "any": every packet type, for tests and tools). */
  role?: MqttRole;
  /** The version when known up front (a client); a server learns it from CONNECT. */
  protocolVersion?: ProtocolVersion;
  /** The largest whole packet accepted, fixed header included (MQTT's Maximum Packet Size). */
  packetBytesMax?: number;
  /**
   * The server-wide budget of incomplete packets (the native door's, shared): a carry past
   * INPUT_CARRY_BYTES_UNCOUNTED is taken from it, and a packet that would pass it is a fatal
   * 0x97 quota exceeded instead of a buffer. Call release() when the connection closes.
   */
  inputBudget?: InputBudget;
}

/** The part of a carry of `capacity` bytes that counts against the input budget. */
function countedBytes(capacity: number): number {
  return Math.max(0, capacity - INPUT_CARRY_BYTES_UNCOUNTED);
}

const EMPTY = new Uint8Array(0);
const CARRY_BYTES_INITIAL = 1024;
/** The most bytes a fixed header takes: one type byte, four length bytes. */
const FIXED_HEADER_BYTES_MAX = 5;

/** Packet types a server receives (client to server) and a client receives. */
const SERVER_RECEIVES = new Set([1, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15]);
const CLIENT_RECEIVES = new Set([2, 3, 4, 5, 6, 7, 9, 11, 13, 14, 15]);
const PACKET_NAMES = [
  "reserved",
  "CONNECT",
  "CONNACK",
  "PUBLISH",
  "PUBACK",
  "PUBREC",
  "PUBREL",
  "PUBCOMP",
  "SUBSCRIBE",
  "SUBACK",
  "UNSUBSCRIBE",
  "UNSUBACK",
  "PINGREQ",
  "PINGRESP",
  "DISCONNECT",
  "AUTH",
];

/** A fixed header: type, flags, where the body starts (relative) and the packet's total bytes. */
interface FixedHeader {
  type: number;
  flags: number;
  headerBytes: number;
  totalBytes: number;
}

/** Splits a byte stream into MQTT packets; the first error is fatal (MQTT closes on it). */
export class MqttDecoder {
  private readonly role: MqttRole;
  private readonly packetBytesMax: number;
  private readonly inputBudget: InputBudget | null;
  private version: ProtocolVersion | null;
  /** The CONNECT was MQTT 3.1 (read as 3.1.1, whose fixed header flags are stricter). */
  private mqtt31 = false;
  private connected = false;
  private chunk: Uint8Array = EMPTY;
  private chunkOffset = 0;
  private carry: Uint8Array = EMPTY;
  private carryBytes = 0;
  private error: MqttDecodeError | null = null;
  private errorReported = false;
  /** The packet being decoded and the version to answer in, for the error if it fails. */
  private contextType = 0;
  private contextVersion: ProtocolVersion | null = null;

  constructor(options: MqttDecoderOptions = {}) {
    this.role = options.role ?? "any";
    this.version = options.protocolVersion ?? null;
    this.packetBytesMax = options.packetBytesMax ?? VARIABLE_BYTE_INTEGER_MAX + 5;
    this.inputBudget = options.inputBudget ?? null;
    assert(this.packetBytesMax >= 2, "MqttDecoder: a packet limit holds a fixed header");
  }

  /** The connection's protocol version: given, or learnt from CONNECT; null before. */
  get protocolVersion(): ProtocolVersion | null {
    return this.version;
  }

  /** Bytes held for an incomplete packet (what a slow or hostile peer costs). */
  get bytesHeld(): number {
    return this.carryBytes;
  }

  /** Gives the carry (and its part of the input budget) back: the connection is closed. */
  release(): void {
    this.inputBudget?.give(countedBytes(this.carry.length));
    this.carry = EMPTY;
    this.carryBytes = 0;
  }

  /** Appends received bytes (any split); call next() until it returns null before the next push. */
  push(chunk: Uint8Array): void {
    if (this.error !== null) return;
    assert(this.chunkOffset >= this.chunk.length, "MqttDecoder: push after the chunk is drained");
    this.chunk = chunk;
    this.chunkOffset = 0;
  }

  /** The next packet or error, or null when more bytes are needed (or after the error). */
  next(): MqttDecodeResult | null {
    if (this.error !== null) return this.reportError();
    try {
      return this.carryBytes > 0 ? this.nextFromCarry() : this.nextFromChunk();
    } catch (thrown) {
      if (!(thrown instanceof PacketError)) throw thrown;
      this.error = {
        reasonCode: thrown.reasonCode,
        reason: thrown.reason,
        packetType: this.contextType,
        protocolVersion: this.contextVersion,
      };
      return this.reportError();
    }
  }

  private reportError(): MqttDecodeResult | null {
    if (this.errorReported || this.error === null) return null;
    this.errorReported = true;
    this.chunk = EMPTY;
    this.chunkOffset = 0;
    this.release();
    return { ok: false, error: this.error };
  }

  private nextFromChunk(): MqttDecodeResult | null {
    const chunk = this.chunk;
    const start = this.chunkOffset;
    if (start >= chunk.length) return null;
    const header = this.readHeader(chunk, start, chunk.length);
    if (header !== null && start + header.totalBytes <= chunk.length) {
      this.chunkOffset = start + header.totalBytes;
      return this.decode(header, chunk, start);
    }
    // An incomplete packet: keep what arrived (bounded by its checked length), wait for more.
    this.takeIntoCarry(chunk.length - start, header);
    return null;
  }

  private nextFromCarry(): MqttDecodeResult | null {
    let header = this.readHeader(this.carry, 0, this.carryBytes);
    // Complete the fixed header one byte at a time (it is at most five bytes).
    while (header === null && this.chunkOffset < this.chunk.length) {
      this.takeIntoCarry(1, null);
      header = this.readHeader(this.carry, 0, this.carryBytes);
    }
    if (header === null) return null;
    const missing = header.totalBytes - this.carryBytes;
    const available = this.chunk.length - this.chunkOffset;
    this.takeIntoCarry(Math.min(missing, available), header);
    if (this.carryBytes < header.totalBytes) return null;
    const packet = this.decode(header, this.carry, 0);
    this.carryBytes = 0;
    if (this.carry.length > CARRY_BYTES_INITIAL) this.release();
    return packet;
  }

  /** Moves `count` chunk bytes into the carry, growing it with the bytes actually received. */
  private takeIntoCarry(count: number, header: FixedHeader | null): void {
    const needed = this.carryBytes + count;
    if (needed > this.carry.length) {
      const cap = header === null ? FIXED_HEADER_BYTES_MAX : header.totalBytes;
      const capacity = Math.min(cap, Math.max(needed, CARRY_BYTES_INITIAL, this.carry.length * 2));
      const more = countedBytes(capacity) - countedBytes(this.carry.length);
      if (more > 0 && this.inputBudget !== null && !this.inputBudget.take(more)) {
        const budget = this.inputBudget;
        throw new PacketError(
          REASON.QUOTA_EXCEEDED,
          `a packet of ${header?.totalBytes} bytes does not fit the server's input budget now ` +
            `(${budget.bytesHeld} of ${budget.bytesMax} bytes of incomplete packets held)`,
        );
      }
      const grown = new Uint8Array(capacity);
      assert(grown.length >= needed, "MqttDecoder: the carry holds what arrived");
      grown.set(this.carry.subarray(0, this.carryBytes));
      this.carry = grown;
    }
    this.carry.set(
      this.chunk.subarray(this.chunkOffset, this.chunkOffset + count),
      this.carryBytes,
    );
    this.carryBytes += count;
    this.chunkOffset += count;
  }

  /** The fixed header at `bytes[start]` once whole, checked; null while incomplete. */
  private readHeader(bytes: Uint8Array, start: number, end: number): FixedHeader | null {
    if (start >= end) return null;
    const first = bytes[start];
    const type = first >> 4;
    const flags = first & 0x0f;
    this.contextType = type;
    this.contextVersion = this.version;
    this.checkType(type, flags);
    const remaining = readVariableByteInteger(bytes, start + 1, end);
    if (remaining === null) return null;
    if (remaining < 0) {
      throw new PacketError(
        REASON.MALFORMED_PACKET,
        "remaining length is not a valid variable byte integer",
      );
    }
    const headerBytes = 1 + lengthBytes(remaining);
    const totalBytes = headerBytes + remaining;
    if (totalBytes > this.packetBytesMax) {
      throw new PacketError(
        REASON.PACKET_TOO_LARGE,
        `${PACKET_NAMES[type]} of ${totalBytes} bytes is larger than the maximum ` +
          `of ${this.packetBytesMax}`,
      );
    }
    return { type, flags, headerBytes, totalBytes };
  }

  private checkType(type: number, flags: number): void {
    const name = PACKET_NAMES[type];
    if (type === 0 || (type === 15 && this.version === 4)) {
      throw new PacketError(REASON.MALFORMED_PACKET, `packet type ${type} is reserved`);
    }
    const receives = this.role === "server" ? SERVER_RECEIVES : CLIENT_RECEIVES;
    if (this.role !== "any" && !receives.has(type)) {
      throw new PacketError(REASON.PROTOCOL_ERROR, `a ${this.role} does not receive ${name}`);
    }
    if (this.role === "client" && type === 14 && this.version === 4) {
      throw new PacketError(REASON.PROTOCOL_ERROR, "an MQTT 3.1.1 server does not send DISCONNECT");
    }
    if (this.role === "server" && !this.connected && type !== 1) {
      throw new PacketError(REASON.PROTOCOL_ERROR, `${name} before CONNECT`);
    }
    if (this.role === "server" && this.connected && type === 1) {
      throw new PacketError(REASON.PROTOCOL_ERROR, "a second CONNECT");
    }
    if (type === 3) {
      const qos = (flags >> 1) & 0x03;
      if (qos === 3) throw new PacketError(REASON.MALFORMED_PACKET, "PUBLISH with QoS 3");
      if (qos === 0 && (flags & 0x08) !== 0) {
        throw new PacketError(REASON.MALFORMED_PACKET, "PUBLISH with DUP set at QoS 0");
      }
      return;
    }
    const expected = type === 6 || type === 8 || type === 10 ? 0x02 : 0x00;
    // MQTT 3.1 sends PUBREL, SUBSCRIBE and UNSUBSCRIBE at QoS 1 with DUP set on a resend.
    const dupAllowed = this.mqtt31 && expected === 0x02 && flags === (expected | 0x08);
    if (flags !== expected && !dupAllowed) {
      throw new PacketError(REASON.MALFORMED_PACKET, `${name}: reserved flag bits are ${flags}`);
    }
  }

  /** Parses a whole packet at `bytes[start]` whose header has been checked. */
  private decode(header: FixedHeader, bytes: Uint8Array, start: number): MqttDecodeResult {
    const range = { start: start + header.headerBytes, end: start + header.totalBytes };
    this.contextType = header.type;
    this.contextVersion = this.version;
    if (header.type === 1) {
      this.contextVersion = connectLevel(bytes, range.start, range.end);
      const packet = parseConnect(bytes, range.start, range.end);
      this.version = packet.protocolVersion;
      this.mqtt31 = packet.mqtt31 === true;
      this.connected = true;
      return { ok: true, packet };
    }
    if (this.version === null) {
      throw new PacketError(REASON.PROTOCOL_ERROR, "no protocol version yet (CONNECT comes first)");
    }
    const packet = parseBody(header.type, header.flags, bytes, range, this.version);
    if (this.role === "server" && packet.type === "publish") {
      if (packet.properties.subscriptionIdentifiers !== undefined) {
        // [MQTT-3.3.4-6]: a client's PUBLISH carries no subscription identifier.
        throw new PacketError(
          REASON.PROTOCOL_ERROR,
          "PUBLISH from a client has a subscription identifier",
        );
      }
    }
    return { ok: true, packet };
  }
}

function lengthBytes(remaining: number): number {
  return remaining < 128 ? 1 : remaining < 16_384 ? 2 : remaining < 2_097_152 ? 3 : 4;
}

/** The version a CONNECT asks for, to answer in: 5 when its level byte says 5, else 4. */
function connectLevel(bytes: Uint8Array, start: number, end: number): ProtocolVersion {
  if (end - start < 2) return 4;
  const level = start + 2 + ((bytes[start] << 8) | bytes[start + 1]);
  return level < end && bytes[level] === 5 ? 5 : 4;
}
