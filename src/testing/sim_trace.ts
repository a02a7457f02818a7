/**
 * TraceHash: a running 64-bit (two 32-bit FNV-1a lanes) hash of everything a simulated run
 * produced — every byte each client received and every disk write — so "the same seed gives the
 * same run, byte for byte" is one comparison. Not cryptographic; only has to change when bytes do.
 */

/** A running hash of a run's observable bytes. */
export class TraceHash {
  private a = 0x811c9dc5;
  private b = 0x01000193 ^ 0x5bd1e995;
  /** Bytes hashed. */
  bytes = 0;

  /** Mixes a number (a tag, a position, a length). */
  number(value: number): void {
    let v = value >>> 0;
    const high = Math.floor(value / 4294967296) >>> 0;
    for (let i = 0; i < 4; i++, v >>>= 8) this.byte(v & 0xff);
    this.byte(high & 0xff);
    this.byte((high >>> 8) & 0xff);
  }

  /** Mixes a string (ASCII tags and paths). */
  text(value: string): void {
    for (let i = 0; i < value.length; i++) this.byte(value.charCodeAt(i) & 0xff);
    this.byte(0);
  }

  /** Mixes bytes. */
  update(bytes: Uint8Array): void {
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < bytes.length; i++) {
      a = Math.imul(a ^ bytes[i], 0x01000193);
      b = Math.imul(b ^ bytes[i], 0x0100019d) ^ (b >>> 15);
    }
    this.a = a;
    this.b = b;
    this.bytes += bytes.length;
  }

  /** The hash so far as 16 hex digits. */
  hex(): string {
    return (
      (this.a >>> 0).toString(16).padStart(8, "0") + (this.b >>> 0).toString(16).padStart(8, "0")
    );
  }

  private byte(value: number): void {
    this.a = Math.imul(this.a ^ value, 0x01000193);
    this.b = Math.imul(this.b ^ value, 0x0100019d) ^ (this.b >>> 15);
  }
}
