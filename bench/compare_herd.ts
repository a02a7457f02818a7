/**
 * compare_herd: the herd of bench/nats_compare.ts (issue 32, "the seed: clients tend to reboot
 * all around the same time"): N clients connect at once, client k replaying partition k's subtree
 * of the compared stream from the oldest message until it has all of it, through one side's
 * checked replay (ariaReplay or natsReplay: exact messages in seq order, or the run fails). Every
 * time is counted from the herd's common start, before the first client connected.
 *
 * Not here: servers, restarts, page caches (nats_compare.ts), the per-side clients
 * (compare_aria.ts, compare_nats.ts). summarizeHerd is pure: timings in, figures out.
 */
import { median } from "../src/bench/stats.ts";
import type { ReplayTiming } from "./compare_nats.ts";

/** What a herd measured: messages, aggregate rate, the clients' completion and first-message times. */
export interface HerdFigures {
  clients: number;
  delivered: number;
  /** From the common start to the last client's last message. */
  wallMs: number;
  /** Messages delivered to all clients per second of wallMs. */
  perSecond: number;
  medianMs: number;
  slowestMs: number;
  fastestMs: number;
  /** The median client's time to its first message, from the common start. */
  firstMessageMedianMs: number;
}

/** The partition client k of a herd of `clients` replays: k mod partitions. */
export function herdPartition(client: number, partitions: number): number {
  return client % partitions;
}

/** Runs `clients` replays at once (client k: herdPartition(k)) and summarizes them. */
export async function runHerd(
  clients: number,
  partitions: number,
  replay: (partition: number) => Promise<ReplayTiming>,
): Promise<HerdFigures> {
  const startAt = performance.now();
  const timings = await Promise.all(
    Array.from({ length: clients }, (_, k) => replay(herdPartition(k, partitions))),
  );
  return summarizeHerd(startAt, timings);
}

/** The figures of a herd whose clients all started at `startAt` (performance.now()). */
export function summarizeHerd(startAt: number, timings: readonly ReplayTiming[]): HerdFigures {
  if (timings.length === 0) throw new Error("a herd needs at least one client");
  const done = timings.map((timing) => timing.endAt - startAt);
  const first = timings.map((timing) => timing.firstAt - startAt);
  const delivered = timings.reduce((sum, timing) => sum + timing.delivered, 0);
  const wallMs = Math.max(...done);
  return {
    clients: timings.length,
    delivered,
    wallMs,
    perSecond: wallMs > 0 ? (delivered * 1000) / wallMs : 0,
    medianMs: median(done),
    slowestMs: wallMs,
    fastestMs: Math.min(...done),
    firstMessageMedianMs: median(first),
  };
}
