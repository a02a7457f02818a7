/**
 * garbage_hint: what the server's once-a-second garbage hint asks of the engine. Usually the
 * non-blocking hint (Bun.gc(false)); a full collection once the resident set has grown by
 * GC_FULL_GROWTH_BYTES since the lowest it was after the last full one, or once
 * GC_FULL_CLOSED_CONNECTIONS connections closed since then (what they held is garbage now, and an
 * idle server allocates nothing that would start a collection). The hint alone left garbage for
 * good: after 1,000 subscribers that never read left, ~600 MB of freed buffers stayed resident
 * for more than 10 s (docs/benchmarks.md, stalled readers). Each full collection the rules start
 * is followed by two more, FOLLOW_UP_CALLS after it, unless the rules start another first: what
 * a burst freed goes back to the OS only at a later collection, seconds after (1,000 stalled
 * subscribers left: full collections 0.5, 1, 1.5 and 2 s after left 440–468 MiB resident, one at
 * 3 s brought it to 174–185 MiB, as low as before they came; another time one at 1 s did).
 *
 * Does not: collect by itself (the server's maintenance timer calls it), or look at the heap (a
 * heap walk per second would cost more than the collections it saves). Invariants: at most one
 * full collection per call; follow-ups are never followed up.
 */
import { GC_FULL_CLOSED_CONNECTIONS, GC_FULL_GROWTH_BYTES } from "../constants.ts";

/** Calls after a full collection the rules started at which one more runs (see above). */
export const FOLLOW_UP_CALLS: readonly number[] = [1, 4];

/** What a garbage hint reads and does. */
export interface GarbageHintPorts {
  /** The process's resident set now. */
  rssBytes(): number;
  /** Connections closed since the process started. */
  connectionsClosed(): number;
  /** Asks for a collection: full (blocking) or a hint. */
  collect(full: boolean): void;
}

/** A garbage hint over `ports`: call it once a second. */
export function garbageHint(
  ports: GarbageHintPorts,
  limits = { growthBytes: GC_FULL_GROWTH_BYTES, closedConnections: GC_FULL_CLOSED_CONNECTIONS },
): () => void {
  let lowBytes = Number.POSITIVE_INFINITY;
  let closedAtFull = ports.connectionsClosed();
  /** Calls since the rules last started a full collection (-1: never). */
  let callsSinceRules = -1;
  return () => {
    if (callsSinceRules >= 0) callsSinceRules++;
    const rss = ports.rssBytes();
    lowBytes = Math.min(lowBytes, rss);
    const closed = ports.connectionsClosed();
    const due =
      rss - lowBytes >= limits.growthBytes || closed - closedAtFull >= limits.closedConnections;
    if (!due && !FOLLOW_UP_CALLS.includes(callsSinceRules)) {
      ports.collect(false);
      return;
    }
    ports.collect(true);
    if (due) callsSinceRules = 0;
    lowBytes = ports.rssBytes();
    closedAtFull = closed;
  };
}
