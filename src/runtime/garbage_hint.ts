/**
 * garbage_hint: what the server's once-a-second garbage hint asks of the engine. Usually the
 * non-blocking hint (Bun.gc(false)); a full collection once the resident set has grown by
 * GC_FULL_GROWTH_BYTES since the lowest it was after the last full one. The hint alone left
 * garbage for good on a server that went idle: after 1,000 subscribers that never read left, ~600
 * MB of freed buffers stayed resident for more than 10 s (docs/benchmarks.md, stalled readers).
 *
 * Does not: collect by itself (the server's maintenance timer calls it), or look at the heap (a
 * heap walk per second would cost more than the collections it saves). Invariant: at most one
 * full collection per call, and none while the resident set stays within the growth of its low.
 */
import { GC_FULL_GROWTH_BYTES } from "../constants.ts";

/** A garbage hint over `rssBytes` and `collect(full)`: call it once a second. */
export function garbageHint(
  rssBytes: () => number,
  collect: (full: boolean) => void,
  growthBytes: number = GC_FULL_GROWTH_BYTES,
): () => void {
  let lowBytes = Number.POSITIVE_INFINITY;
  return () => {
    const rss = rssBytes();
    lowBytes = Math.min(lowBytes, rss);
    if (rss - lowBytes < growthBytes) {
      collect(false);
      return;
    }
    collect(true);
    lowBytes = rssBytes();
  };
}
