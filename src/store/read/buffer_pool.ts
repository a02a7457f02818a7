/**
 * buffer_pool: the read buffers of a borrowing reader (ReadOptions.borrow), where a batch's
 * payloads are views into them.
 *
 *   take(bytes) ──▶ lane fills it ──▶ lend(buffer) ──▶ next batch: release() ──▶ free[size]
 *
 * A buffer that payloads of the current batch point into is never refilled: its lane takes
 * another, and the lent ones come back when the next batch starts. Buffers come in power-of-two
 * sizes, one free stack per size, so taking one scans nothing (a single free list was scanned for
 * a large-enough buffer: thousands of entries when thousands of lanes read files of different
 * sizes). Does no I/O. Invariant: at most `keepBytes` are kept free.
 */

/** Power-of-two read buffers, lent for one batch and then reused. */
export class BufferPool {
  private readonly free = new Map<number, Uint8Array[]>();
  private lent: Uint8Array[] = [];
  private freeBytes = 0;
  /** Bytes of the buffers it had to allocate (none free of the size): what the collector reclaims. */
  allocatedBytes = 0;

  constructor(private readonly keepBytes: number) {}

  /** A buffer of at least `bytes` (the next power of two). */
  take(bytes: number): Uint8Array {
    const size = bytes <= 1 ? 1 : 2 ** Math.ceil(Math.log2(bytes));
    const buffer = this.free.get(size)?.pop();
    if (buffer === undefined) {
      this.allocatedBytes += size;
      return new Uint8Array(size);
    }
    this.freeBytes -= size;
    return buffer;
  }

  /**
   * `buffer` (one the pool gave) holds payloads handed out in this batch: reusable from the next
   * batch on.
   */
  lend(buffer: Uint8Array): void {
    this.lent.push(buffer);
  }

  /** A new batch starts: the previous batch's views are dead, their buffers free again. */
  release(): void {
    for (const buffer of this.lent) {
      if (this.freeBytes + buffer.length > this.keepBytes) continue;
      let stack = this.free.get(buffer.length);
      if (stack === undefined) this.free.set(buffer.length, (stack = []));
      stack.push(buffer);
      this.freeBytes += buffer.length;
    }
    this.lent = [];
  }
}
