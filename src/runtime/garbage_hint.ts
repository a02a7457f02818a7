/**
 * garbage_hint: what the server's once-a-second garbage hint asks of the engine. Usually the
 * non-blocking hint (Bun.gc(false)); a full collection once the resident set has grown by
 * GC_FULL_GROWTH_BYTES since the lowest it was after the last full one, or once
 * GC_FULL_CLOSED_CONNECTIONS connections closed since then (what they held is garbage now, and an
 * idle server allocates nothing that would start a collection). The hint alone left garbage for
 * good: after 1,000 subscribers that never read left, ~600 MB of freed buffers stayed resident
 * for more than 10 s (docs/benchmarks.md, stalled readers).
 *
 * Does not: collect by itself (the server's maintenance timer calls it), or look at the heap (a
 * heap walk per second would cost more than the collections it saves). Invariant: at most one
 * full collection per call.
 */
import { GC_FULL_CLOSED_CONNECTIONS, GC_FULL_GROWTH_BYTES } from "../constants.ts";

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
  return () => {
    const rss = ports.rssBytes();
    lowBytes = Math.min(lowBytes, rss);
    const closed = ports.connectionsClosed();
    if (rss - lowBytes < limits.growthBytes && closed - closedAtFull < limits.closedConnections) {
      ports.collect(false);
      return;
    }
    ports.collect(true);
    lowBytes = ports.rssBytes();
    closedAtFull = closed;
  };
}
