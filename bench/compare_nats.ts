/**
 * compare_nats: the NATS JetStream side of bench/nats_compare.ts, through nats.js (the `nats`
 * package): creates the stream (`bench.>`, file storage), publishes the compared stream with
 * acknowledged JetStream publishes (a window of them in flight), and replays with an ordered
 * consumer, its messages checked as they arrive, through a callback (no async iterator step per
 * message): the whole stream with the ordered pull consumer's `consume()` and a large batch; a
 * filtered subject with the ordered push consumer (see natsReplay for why).
 *
 * Not here: starting nats-server (compare_processes.ts). Every replay opens its own connection.
 */
import { connect, consumerOpts, type JsMsg, StorageType } from "nats";
import { type CompareStream, ReplayCheck, topicNames } from "./compare_stream.ts";

/** The JetStream stream both sides' subjects go to. */
export const NATS_STREAM = "BENCH";
/** Publishes in flight while filling. */
const PUBLISH_WINDOW = 4096;
/** Messages an ordered consumer asks for per pull (the client pulls again at 75% of it). */
export const NATS_PULL_BATCH = 10_000;

/** A replay that has not delivered everything by then fails the run. */
const REPLAY_TIMEOUT_MS = 600_000;
/**
 * How long a JetStream API request (creating the consumer) may take. nats.js's default of 5 s
 * failed the herd: 100 ordered consumers created at once on a 1M-message stream timed out.
 */
const JS_API_TIMEOUT_MS = 120_000;

/** Creates the stream and publishes `stream` into it; the publish rate (msg/s, acknowledged). */
export async function natsPublish(
  url: string,
  stream: CompareStream,
  progress: (text: string) => void,
): Promise<{ perSecond: number; firstSeq: number }> {
  const connection = await connect({ servers: url, noEcho: true });
  try {
    const manager = await connection.jetstreamManager();
    await manager.streams.add({
      name: NATS_STREAM,
      subjects: ["bench.>"],
      storage: StorageType.File,
      num_replicas: 1,
    });
    const js = connection.jetstream();
    const names = topicNames(stream, ".");
    const { topicsPerPartition, payloadBytes, messages } = stream.spec;
    const payload = new Uint8Array(payloadBytes).fill(0x62);
    // Acknowledgements come back in order: a ring of the last PUBLISH_WINDOW publishes, the
    // oldest awaited before its slot is reused (a Promise.race over the window costs O(window)).
    const window = new Array<Promise<unknown>>(PUBLISH_WINDOW);
    const started = performance.now();
    for (let i = 0; i < messages; i++) {
      const slot = i % PUBLISH_WINDOW;
      if (i >= PUBLISH_WINDOW) await window[slot];
      const subject = names[stream.partitionOf[i] * topicsPerPartition + stream.topicOf[i]];
      const acknowledged = js.publish(subject, payload).then((result) => {
        if (result.seq !== i + 1)
          throw new Error(`NATS acknowledged message ${i} as seq ${result.seq}`);
      });
      // Awaited when its slot comes round (or at the end): no unhandled rejection meanwhile.
      acknowledged.catch(() => {});
      window[slot] = acknowledged;
      if ((i & 0xffff) === 0) progress(`NATS: published ${i} / ${messages}`);
    }
    await Promise.all(window.slice(0, Math.min(messages, PUBLISH_WINDOW)));
    return { perSecond: (messages / (performance.now() - started)) * 1000, firstSeq: 1 };
  } finally {
    await connection.close();
  }
}

/** One replay's timings. */
export interface ReplayTiming {
  delivered: number;
  /** Subscribe (consumer requested) → the last expected message, ms. */
  wallMs: number;
  /** Subscribe → the first message, ms. */
  firstMessageMs: number;
  /** Connecting (before the subscribe), ms. */
  connectMs: number;
  /** performance.now() at the first and the last expected message (a herd times from its start). */
  firstAt: number;
  endAt: number;
}

/**
 * Replays `partition` (or the whole stream, -1) from the oldest message with an ordered
 * consumer on a fresh connection; throws unless exactly the expected messages arrived in order.
 */
export async function natsReplay(
  url: string,
  stream: CompareStream,
  partition: number,
): Promise<ReplayTiming> {
  const connectStart = performance.now();
  const connection = await connect({ servers: url, noEcho: true });
  const connectMs = performance.now() - connectStart;
  try {
    const check = new ReplayCheck(stream, 1, partition);
    const expected = check.expected;
    const subject = partition < 0 ? "bench.>" : `bench.p${partition}.>`;
    let firstMessageAt = Number.NaN;
    let pendingAtEnd = -1;
    let failure: Error | null = null;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const onMessage = (message: JsMsg) => {
      if (check.delivered === 0) firstMessageAt = performance.now();
      check.see(message.seq);
      if (check.delivered === expected) {
        pendingAtEnd = message.info.pending;
        finish();
      }
    };
    const start = performance.now();
    let stop: () => Promise<void>;
    if (partition < 0) {
      // The whole stream: the ordered pull consumer, consume() with a callback and a large batch.
      // No options: an ordered consumer from seq 1. (DeliverPolicy.All would be sent beside
      // opt_start_seq 1, which nats-server 2.9 refuses; the client then retries for ever.)
      const consumer = await connection
        .jetstream({ timeout: JS_API_TIMEOUT_MS })
        .consumers.get(NATS_STREAM);
      const messages = await consumer.consume({
        max_messages: NATS_PULL_BATCH,
        callback: onMessage,
      });
      stop = () => messages.close().then(() => {});
    } else {
      // A filtered subject: nats.js 2.29 asks for an ordered pull consumer on the subject
      // $JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>, which Debian's nats-server 2.9.10 did
      // not answer for the wildcard filter bench.pK.> (consume() waited, retrying, for minutes);
      // the client's ordered push consumer (flow control and heartbeats, the same ordered
      // semantics) works with it.
      const options = consumerOpts()
        .orderedConsumer()
        .deliverAll()
        .callback((error, message) => {
          if (error !== null) {
            failure ??= error;
            finish();
          } else if (message !== null) onMessage(message);
        });
      const subscription = await connection
        .jetstream({ timeout: JS_API_TIMEOUT_MS })
        .subscribe(subject, options);
      stop = async () => subscription.unsubscribe();
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      finished,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`NATS ${subject}: ${check.delivered} of ${expected} in time`)),
          REPLAY_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    const end = performance.now();
    await stop();
    if (failure !== null) throw failure;
    check.verify(`NATS ${subject}`);
    if (pendingAtEnd !== 0)
      throw new Error(`NATS ${subject}: ${pendingAtEnd} messages still pending after the last`);
    return {
      delivered: check.delivered,
      wallMs: end - start,
      firstMessageMs: firstMessageAt - start,
      connectMs,
      firstAt: firstMessageAt,
      endAt: end,
    };
  } finally {
    await connection.close();
  }
}
