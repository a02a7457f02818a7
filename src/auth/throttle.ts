/**
 * FailureThrottle: failed sign-ins per source address, and the delay before the next one's ERROR
 * (100 ms, doubling per failure, at most 5 s), so guessing tokens over one address gets slower
 * with each guess. The same delay is the address's penalty: its next token is not verified
 * before it has passed (waitUs), so parallel guesses are verified one per penalty step. An
 * address is forgotten 10 minutes after its last failure, and the table holds at most
 * `entriesMax` addresses (the least recently failed goes first), so memory is bounded whatever
 * the number of addresses that fail.
 *
 * Not here: the timer that waits (the broker's port), counting for /metrics (dispatch.ts).
 * Invariants: entries.size <= entriesMax; a Map's order is the order of last failure. Pure.
 */

/** Delay before the ERROR of the first failure from an address (µs). */
export const AUTH_FAILURE_DELAY_US_MIN = 100_000;
/** The longest delay before an ERROR (µs): a slow guesser, not a locked-out user. */
export const AUTH_FAILURE_DELAY_US_MAX = 5_000_000;
/** An address is forgotten this long after its last failure (µs). */
export const AUTH_FAILURE_FORGET_US = 600_000_000;
/** Addresses remembered at once. */
export const AUTH_FAILURE_ADDRESSES_MAX = 4096;

interface Entry {
  failures: number;
  lastUs: number;
}

/** Failed sign-ins by address, with a growing delay. */
export class FailureThrottle {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly entriesMax = AUTH_FAILURE_ADDRESSES_MAX) {}

  /** Addresses remembered now. */
  get size(): number {
    return this.entries.size;
  }

  /** Records a failure from `address` at `nowUs`; returns how long to wait before the ERROR. */
  failed(address: string, nowUs: number): number {
    let entry = this.entries.get(address);
    if (entry !== undefined && nowUs - entry.lastUs >= AUTH_FAILURE_FORGET_US) entry = undefined;
    this.entries.delete(address);
    const failures = (entry?.failures ?? 0) + 1;
    this.entries.set(address, { failures, lastUs: nowUs });
    while (this.entries.size > this.entriesMax) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return delayUsOf(failures);
  }

  /**
   * How long `address` waits at `nowUs` before its next token is verified: until its last
   * failure's delay has passed (0 for an address without failures remembered).
   */
  waitUs(address: string, nowUs: number): number {
    const entry = this.entries.get(address);
    if (entry === undefined || nowUs - entry.lastUs >= AUTH_FAILURE_FORGET_US) return 0;
    return Math.max(0, entry.lastUs + delayUsOf(entry.failures) - nowUs);
  }
}

/** The delay after an address's `failures`-th failure (µs). */
function delayUsOf(failures: number): number {
  return Math.min(
    AUTH_FAILURE_DELAY_US_MIN * 2 ** Math.min(failures - 1, 30),
    AUTH_FAILURE_DELAY_US_MAX,
  );
}
