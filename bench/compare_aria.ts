/**
 * compare_aria: the Aria side of bench/nats_compare.ts, through Aria's client: publishes the
 * compared stream with acknowledged batches (a few in flight, as `aria bench` fills its streams),
 * and replays a partition subtree (or the whole stream) from a seq until caught up, reading each
 * DATA frame with the client's cursor (`frames()`: nothing allocated per message), the messages
 * checked as they arrive.
 *
 * Not here: starting the server (compare_processes.ts). Every replay opens its own connection.
 */
import { connect } from "../src/server/connect.ts";
import type { ReplayTiming } from "./compare_nats.ts";
import { type CompareStream, ReplayCheck, topicNames } from "./compare_stream.ts";

/** Messages per publishBatch call. */
const PUBLISH_BATCH = 4096;
/** publishBatch calls in flight. */
const PUBLISH_BATCHES_IN_FLIGHT = 8;

/** Publishes `stream`; the publish rate (msg/s, acknowledged) and the seq of its first message. */
export async function ariaPublish(
  url: string,
  stream: CompareStream,
  progress: (text: string) => void,
): Promise<{ perSecond: number; firstSeq: number }> {
  const client = await connect(url, { clientName: "nats-compare", reconnect: false });
  try {
    const names = topicNames(stream, "/");
    const { topicsPerPartition, payloadBytes, messages } = stream.spec;
    const payload = new Uint8Array(payloadBytes).fill(0x62);
    const inFlight = new Set<Promise<void>>();
    let firstSeq = -1;
    let failure: Error | null = null;
    const started = performance.now();
    for (let sent = 0; sent < messages; ) {
      const size = Math.min(PUBLISH_BATCH, messages - sent);
      const batch = new Array<{ topic: string; payload: Uint8Array }>(size);
      for (let k = 0; k < size; k++) {
        const i = sent + k;
        batch[k] = {
          topic: names[stream.partitionOf[i] * topicsPerPartition + stream.topicOf[i]],
          payload,
        };
      }
      const offset = sent;
      sent += size;
      const ack: Promise<void> = client.publishBatch(batch).then(
        (result) => {
          inFlight.delete(ack);
          if (offset === 0) firstSeq = result.firstSeq;
          else if (firstSeq >= 0 && result.firstSeq !== firstSeq + offset && failure === null)
            failure = new Error(`Aria stored message ${offset} at seq ${result.firstSeq}`);
        },
        (error: Error) => {
          inFlight.delete(ack);
          failure ??= error;
        },
      );
      inFlight.add(ack);
      if (inFlight.size >= PUBLISH_BATCHES_IN_FLIGHT) await Promise.race(inFlight);
      if (failure !== null) throw failure;
      if (sent % (PUBLISH_BATCH * 16) === 0) progress(`Aria: published ${sent} / ${messages}`);
    }
    await Promise.all(inFlight);
    if (failure !== null) throw failure;
    return { perSecond: (messages / (performance.now() - started)) * 1000, firstSeq };
  } finally {
    await client.close();
  }
}

/**
 * Replays `partition` (or the whole stream, -1) from `firstSeq` until caught up on a fresh
 * connection; throws unless exactly the expected messages arrived in order.
 */
export async function ariaReplay(
  url: string,
  stream: CompareStream,
  partition: number,
  firstSeq: number,
): Promise<ReplayTiming> {
  const connectStart = performance.now();
  const client = await connect(url, { clientName: "nats-compare", reconnect: false });
  const connectMs = performance.now() - connectStart;
  try {
    const check = new ReplayCheck(stream, firstSeq, partition);
    const filter = partition < 0 ? "bench/**" : `bench/p${partition}/**`;
    let firstMessageAt = Number.NaN;
    const start = performance.now();
    const subscription = client.subscribe(filter, { from: firstSeq, untilCaughtUp: true });
    for await (const frame of subscription.frames()) {
      if (check.delivered === 0) firstMessageAt = performance.now();
      while (frame.next()) check.see(frame.seq);
    }
    const end = performance.now();
    check.verify(`Aria ${filter}`);
    return {
      delivered: check.delivered,
      wallMs: end - start,
      firstMessageMs: firstMessageAt - start,
      connectMs,
      firstAt: firstMessageAt,
      endAt: end,
    };
  } finally {
    await client.close();
  }
}
