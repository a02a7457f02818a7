/**
 * The MQTT data representations (section 1.5 of both specs) read and written: bytes, two- and
 * four-byte integers, variable byte integers, UTF-8 strings, binary data. The reader bounds every
 * read by its end and throws PacketError (caught by the decoder, never escaping it) with the reason
 * code the spec gives; the writer grows its buffer and leaves room for the fixed header in front.
 * Invariants: reader.offset <= reader.end; a valid string holds neither U+0000 nor bad UTF-8.
 */
import { assert } from "../stdx/assert.ts";
import { REASON } from "./packets.ts";

/** A malformed or forbidden packet: thrown inside the codec only, turned into a decode error. */
export class PacketError {
  constructor(
    readonly reasonCode: number,
    readonly reason: string,
  ) {}
}

/** Throws the PacketError that ends decoding. */
export function fail(reasonCode: number, reason: string): never {
  throw new PacketError(reasonCode, reason);
}

// `ignoreBOM` keeps a leading U+FEFF: the spec forbids stripping it [MQTT-1.5.4-3].
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const UTF8_ENCODER = new TextEncoder();

/** Reads MQTT data representations from `bytes[offset, end)`. */
export class Reader {
  constructor(
    readonly bytes: Uint8Array,
    public offset: number,
    readonly end: number,
  ) {}

  /** Bytes left before the end. */
  remaining(): number {
    return this.end - this.offset;
  }

  private need(count: number, what: string): void {
    if (this.end - this.offset < count) {
      fail(REASON.MALFORMED_PACKET, `${what} runs past the end of the packet`);
    }
  }

  /** One byte. */
  u8(what: string): number {
    this.need(1, what);
    return this.bytes[this.offset++];
  }

  /** A big-endian two-byte integer. */
  u16(what: string): number {
    this.need(2, what);
    const value = (this.bytes[this.offset] << 8) | this.bytes[this.offset + 1];
    this.offset += 2;
    return value;
  }

  /** A big-endian four-byte integer. */
  u32(what: string): number {
    this.need(4, what);
    const b = this.bytes;
    const o = this.offset;
    this.offset += 4;
    return b[o] * 0x1000000 + ((b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]);
  }

  /** A variable byte integer: at most 4 bytes, in the fewest bytes [MQTT-1.5.5-1]. */
  vbi(what: string): number {
    const parsed = readVariableByteInteger(this.bytes, this.offset, this.end);
    if (parsed === null) fail(REASON.MALFORMED_PACKET, `${what} runs past the end of the packet`);
    if (parsed < 0) fail(REASON.MALFORMED_PACKET, `${what} is not a valid variable byte integer`);
    this.offset += vbiBytes(parsed);
    return parsed;
  }

  /** Binary data: a two-byte length and that many bytes (copied). */
  binary(what: string): Uint8Array {
    const length = this.u16(`${what}'s length`);
    this.need(length, what);
    const value = this.bytes.slice(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  /** A UTF-8 encoded string: well-formed, without U+0000 [MQTT-1.5.4-1, MQTT-1.5.4-2]. */
  utf8(what: string): string {
    const length = this.u16(`${what}'s length`);
    this.need(length, what);
    const value = decodeUtf8(this.bytes.subarray(this.offset, this.offset + length), what);
    this.offset += length;
    return value;
  }

  /** The rest of the packet (copied). */
  rest(): Uint8Array {
    const value = this.bytes.slice(this.offset, this.end);
    this.offset = this.end;
    return value;
  }
}

/** Decodes MQTT UTF-8 (no U+0000, no ill-formed sequences), or fails with 0x81 malformed. */
export function decodeUtf8(bytes: Uint8Array, what: string): string {
  if (bytes.indexOf(0) >= 0) fail(REASON.MALFORMED_PACKET, `${what} contains U+0000`);
  try {
    return UTF8.decode(bytes);
  } catch {
    return fail(REASON.MALFORMED_PACKET, `${what} is not well-formed UTF-8`);
  }
}

/**
 * A variable byte integer at `bytes[offset]`: its value; null when it may continue past `end`;
 * -1 when malformed (a fifth byte, or more bytes than the value needs).
 */
export function readVariableByteInteger(
  bytes: Uint8Array,
  offset: number,
  end: number,
): number | null {
  let value = 0;
  let multiplier = 1;
  for (let index = 0; index < 4; index++) {
    if (offset + index >= end) return null;
    const byte = bytes[offset + index];
    value += (byte & 0x7f) * multiplier;
    if ((byte & 0x80) === 0) {
      // A last byte of 0 after others is a longer-than-needed encoding.
      if (index > 0 && byte === 0) return -1;
      return value;
    }
    multiplier *= 128;
  }
  return -1;
}

/** Bytes a variable byte integer of `value` takes (1..4). */
export function vbiBytes(value: number): number {
  if (value < 128) return 1;
  if (value < 16_384) return 2;
  if (value < 2_097_152) return 3;
  return 4;
}

/** Bytes of `text` in UTF-8. */
export function utf8Bytes(text: string): Uint8Array {
  return UTF8_ENCODER.encode(text);
}

/** Strings up to this many characters try the ASCII path first. */
const ASCII_FAST_CHARS_MAX = 64;

/** Room kept in front of a body for the fixed header (1 type byte + up to 4 length bytes). */
export const HEADER_ROOM = 5;

/** Writes MQTT data representations into a growing buffer, after HEADER_ROOM bytes. */
export class Writer {
  private buffer: Uint8Array;
  offset = HEADER_ROOM;

  constructor(bytesExpected: number) {
    this.buffer = new Uint8Array(HEADER_ROOM + Math.max(16, bytesExpected));
  }

  private ensure(count: number): void {
    if (this.offset + count <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.offset + count));
    grown.set(this.buffer.subarray(0, this.offset));
    this.buffer = grown;
  }

  u8(value: number): void {
    this.ensure(1);
    this.buffer[this.offset++] = value;
  }

  u16(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 0xffff, "Writer: u16 in range");
    this.ensure(2);
    this.buffer[this.offset++] = value >>> 8;
    this.buffer[this.offset++] = value & 0xff;
  }

  u32(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 0xffffffff, "Writer: u32 in range");
    this.ensure(4);
    const b = this.buffer;
    b[this.offset++] = value >>> 24;
    b[this.offset++] = (value >>> 16) & 0xff;
    b[this.offset++] = (value >>> 8) & 0xff;
    b[this.offset++] = value & 0xff;
  }

  vbi(value: number): void {
    assert(Number.isInteger(value) && value >= 0 && value <= 268_435_455, "Writer: vbi in range");
    this.ensure(4);
    let rest = value;
    do {
      let byte = rest % 128;
      rest = Math.floor(rest / 128);
      if (rest > 0) byte |= 0x80;
      this.buffer[this.offset++] = byte;
    } while (rest > 0);
  }

  bytes(value: Uint8Array): void {
    this.ensure(value.length);
    this.buffer.set(value, this.offset);
    this.offset += value.length;
  }

  /** Binary data: a two-byte length then the bytes. */
  binary(value: Uint8Array): void {
    this.u16(value.length);
    this.bytes(value);
  }

  /** A UTF-8 string: a two-byte length then its bytes, encoded in place. */
  utf8(value: string): void {
    this.ensure(2 + value.length * 3);
    const start = this.offset + 2;
    // Short ASCII strings (most topics) byte by byte: cheaper than a view and encodeInto.
    if (value.length <= ASCII_FAST_CHARS_MAX) {
      const buffer = this.buffer;
      let index = 0;
      while (index < value.length) {
        const code = value.charCodeAt(index);
        if (code >= 0x80) break;
        buffer[start + index] = code;
        index++;
      }
      if (index === value.length) {
        this.u16(index);
        this.offset = start + index;
        return;
      }
    }
    const { written } = UTF8_ENCODER.encodeInto(value, this.buffer.subarray(start));
    assert(written <= 0xffff, "Writer: a string of at most 65,535 bytes");
    this.u16(written);
    this.offset = start + written;
  }

  /** Moves the bytes written since `from` forward by `shift` bytes (to insert a length). */
  insertGap(from: number, shift: number): void {
    this.ensure(shift);
    this.buffer.copyWithin(from + shift, from, this.offset);
    this.offset += shift;
  }

  /** Writes `value` as a variable byte integer at `at` (room made by insertGap). */
  vbiAt(at: number, value: number): void {
    const saved = this.offset;
    this.offset = at;
    this.vbi(value);
    this.offset = saved;
  }

  /** The finished packet: the fixed header written in front of the body. */
  finish(firstByte: number): Uint8Array {
    const bodyBytes = this.offset - HEADER_ROOM;
    const start = HEADER_ROOM - 1 - vbiBytes(bodyBytes);
    this.buffer[start] = firstByte;
    this.vbiAt(start + 1, bodyBytes);
    return this.buffer.subarray(start, this.offset);
  }
}
