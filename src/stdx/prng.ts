/**
 * Prng: a small seeded pseudo-random generator (xoshiro128**), deterministic across runtimes.
 * The core never draws randomness itself: it is handed a Prng. Tests, the simulator and
 * benchmark generators seed one explicitly so a run can be replayed.
 */

/** A seeded source of pseudo-random numbers. */
export class Prng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    // splitmix32 expands one seed into four non-zero state words.
    let z = seed >>> 0;
    const next = () => {
      z = (z + 0x9e3779b9) >>> 0;
      let t = z;
      t = Math.imul(t ^ (t >>> 16), 0x85ebca6b) >>> 0;
      t = Math.imul(t ^ (t >>> 13), 0xc2b2ae35) >>> 0;
      return (t ^ (t >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next() | 1;
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A uniform float in [0, 1). */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }

  /** A uniform integer in [0, bound), bound ≤ 2^32. */
  nextInt(bound: number): number {
    return Math.floor(this.nextFloat() * bound);
  }

  /** A uniform integer in [min, max] (both inclusive). */
  nextRange(min: number, max: number): number {
    return min + this.nextInt(max - min + 1);
  }

  /** Fills `bytes` with pseudo-random bytes. */
  fill(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) bytes[i] = this.nextU32() & 0xff;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
