/**
 * ClientSubscription: one subscription as the application sees it — an async iterator of
 * messages in seq order. Received messages wait in a bounded queue; above QUEUE_MESSAGES_HIGH the
 * connection stops reading (TCP back-pressure reaches the server, which stops this connection's
 * cursors), below QUEUE_MESSAGES_LOW it reads again.
 *
 * `position` is the seq after the last message received (or the server's caught-up point): a
 * reconnect resubscribes from there, so nothing is missed or repeated.
 */
import type { AriaError, StartPosition } from "../protocol/mod.ts";
import type { Filter } from "../topic/filter.ts";

/** Where to start: the live end, the oldest message, a seq, or a time. */
export type StartFrom = "live" | "earliest" | number | Date | { seq: number } | { timeUs: number };

/** Options of `subscribe`. */
export interface SubscribeOptions {
  from?: StartFrom;
  /** End the iteration when the subscription reaches the live end (after every older message). */
  untilCaughtUp?: boolean;
}

/** One delivered message. `payload` belongs to the application. */
export interface Message {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
}

/** Messages queued before the connection stops reading. */
export const QUEUE_MESSAGES_HIGH = 8192;
/** Messages queued when reading resumes. */
export const QUEUE_MESSAGES_LOW = 2048;

interface Controls {
  unsubscribe(): void;
  pause(): void;
  resume(): void;
}

type Entry = Message | { caughtUp: number };

/** Converts a StartFrom to the protocol's start position. */
export function startPositionOf(from: StartFrom | undefined): StartPosition {
  if (from === undefined || from === "live") return { kind: "live" };
  if (from === "earliest") return { kind: "earliest" };
  if (typeof from === "number") return { kind: "seq", seq: from };
  if (from instanceof Date) return { kind: "time", timeUs: from.getTime() * 1000 };
  return "seq" in from ? { kind: "seq", seq: from.seq } : { kind: "time", timeUs: from.timeUs };
}

/** An active subscription: iterate it with `for await`. */
export class ClientSubscription implements AsyncIterable<Message> {
  /** Seq after the last message received, or 0 before SUBSCRIBED. */
  position = 0;
  /** Seq the server started this subscription at (from SUBSCRIBED). */
  firstSeq = 0;
  private readonly queue: Entry[] = [];
  private queueHead = 0;
  private waiter: (() => void) | null = null;
  private ended = false;
  private error: AriaError | Error | null = null;
  private paused = false;
  private caughtUpResolve!: (nextSeq: number) => void;
  /** Resolves with the next seq when the subscription first reaches the live end. */
  readonly caughtUpAt: Promise<number>;

  constructor(
    readonly id: number,
    readonly filter: Filter,
    private readonly options: SubscribeOptions,
    private readonly controls: Controls,
  ) {
    this.caughtUpAt = new Promise((resolve) => {
      this.caughtUpResolve = resolve;
    });
  }

  /** Where a (re)subscribe starts: after what was received, else the requested start. */
  resumeStart(): StartPosition {
    return this.position > 0 ? { kind: "seq", seq: this.position } : startPositionOf(this.options.from);
  }

  /** SUBSCRIBED arrived. */
  subscribed(firstSeq: number): void {
    if (this.firstSeq === 0) this.firstSeq = firstSeq;
    this.position = Math.max(this.position, firstSeq);
  }

  /** A message arrived. */
  push(seq: number, timeUs: number, topic: string, payload: Uint8Array): void {
    if (this.ended || seq < this.position) return;
    this.position = seq + 1;
    this.enqueue({ seq, timeUs, topic, payload });
  }

  /** CAUGHT_UP arrived. */
  caughtUp(nextSeq: number): void {
    this.position = Math.max(this.position, nextSeq);
    this.caughtUpResolve(nextSeq);
    this.enqueue({ caughtUp: nextSeq });
  }

  /** The subscription failed: the iterator throws `error` after the queued messages. */
  fail(error: AriaError | Error): void {
    this.error ??= error;
    this.end();
  }

  /** No more messages: the iterator finishes after the queued ones. */
  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Stops the subscription. */
  close(): void {
    this.controls.unsubscribe();
    this.end();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Message> {
    try {
      for (;;) {
        while (this.queueHead < this.queue.length) {
          const entry = this.queue[this.queueHead];
          this.queue[this.queueHead++] = undefined as never;
          this.release();
          if ("caughtUp" in entry) {
            if (this.options.untilCaughtUp === true) return;
            continue;
          }
          yield entry;
        }
        this.queue.length = 0;
        this.queueHead = 0;
        if (this.ended) {
          if (this.error !== null) throw this.error;
          return;
        }
        await new Promise<void>((resolve) => {
          this.waiter = resolve;
        });
      }
    } finally {
      if (!this.ended) this.close();
    }
  }

  private enqueue(entry: Entry): void {
    this.queue.push(entry);
    if (!this.paused && this.queue.length - this.queueHead >= QUEUE_MESSAGES_HIGH) {
      this.paused = true;
      this.controls.pause();
    }
    this.wake();
  }

  private release(): void {
    if (this.paused && this.queue.length - this.queueHead <= QUEUE_MESSAGES_LOW) {
      this.paused = false;
      this.controls.resume();
    }
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.();
  }
}
