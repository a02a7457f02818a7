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

/**
 * One delivered message. `payload` belongs to the application; it is a view into one buffer
 * shared by the messages of its DATA frame (`payload.slice()` keeps a message without keeping
 * the rest of that buffer alive).
 */
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

/** What the queue holds: the messages of one DATA frame, or the caught-up point. */
type Entry = Message[] | { caughtUp: number };

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** Converts a StartFrom to the protocol's start position. */
export function startPositionOf(from: StartFrom | undefined): StartPosition {
  if (from === undefined || from === "live") return { kind: "live" };
  if (from === "earliest") return { kind: "earliest" };
  if (typeof from === "number") return { kind: "seq", seq: from };
  if (from instanceof Date) return { kind: "time", timeUs: from.getTime() * 1000 };
  return "seq" in from ? { kind: "seq", seq: from.seq } : { kind: "time", timeUs: from.timeUs };
}

/**
 * An active subscription: iterate it with `for await` (one message at a time), or iterate
 * `batches()` (the messages of each DATA frame as one array: one promise per frame, not per
 * message). Use one of the two per subscription.
 */
export class ClientSubscription implements AsyncIterable<Message> {
  /** Seq after the last message received, or 0 before SUBSCRIBED. */
  position = 0;
  /** Seq the server started this subscription at (from SUBSCRIBED). */
  firstSeq = 0;
  /** Received entries not yet handed out; `queued` counts their messages. */
  private readonly queue: Entry[] = [];
  private queueHead = 0;
  private queued = 0;
  /** Next message of the batch at the queue head (the per-message iterator). */
  private batchIndex = 0;
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

  /**
   * The messages of one DATA frame arrived, in seq order. Messages before `position` (already
   * received before a reconnect) are dropped.
   */
  pushBatch(messages: Message[]): void {
    if (this.ended || messages.length === 0) return;
    let skip = 0;
    while (skip < messages.length && messages[skip].seq < this.position) skip++;
    if (skip === messages.length) return;
    const fresh = skip === 0 ? messages : messages.slice(skip);
    this.position = fresh[fresh.length - 1].seq + 1;
    this.queued += fresh.length;
    this.enqueue(fresh);
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

  /** One message at a time. Messages already queued are handed out without waiting. */
  [Symbol.asyncIterator](): AsyncIterator<Message> {
    return {
      next: () => this.nextMessage(),
      return: () => this.stopIterating(),
    };
  }

  /**
   * The messages of each DATA frame as one array, in seq order (the arrays are the
   * application's). Cheaper than `for await` per message for high rates.
   */
  batches(): AsyncIterable<Message[]> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => this.nextBatch(),
        return: () => this.stopIterating(),
      }),
    };
  }

  private async nextMessage(): Promise<IteratorResult<Message>> {
    for (;;) {
      const entry = this.head();
      if (entry === null) {
        if (!(await this.waitOrEnd())) return DONE;
        continue;
      }
      if (!Array.isArray(entry)) {
        this.shift();
        if (this.options.untilCaughtUp === true) return this.finish();
        continue;
      }
      const message = entry[this.batchIndex++];
      this.queued--;
      if (this.batchIndex === entry.length) this.shift();
      else this.release();
      return { done: false, value: message };
    }
  }

  private async nextBatch(): Promise<IteratorResult<Message[]>> {
    for (;;) {
      const entry = this.head();
      if (entry === null) {
        if (!(await this.waitOrEnd())) return DONE;
        continue;
      }
      this.shift();
      if (!Array.isArray(entry)) {
        if (this.options.untilCaughtUp === true) return this.finish();
        continue;
      }
      return { done: false, value: entry };
    }
  }

  /** The queue's first entry, or null when empty (the rest of a batch half handed out counts). */
  private head(): Entry | null {
    if (this.queueHead < this.queue.length) return this.queue[this.queueHead];
    this.queue.length = 0;
    this.queueHead = 0;
    return null;
  }

  /** Drops the head entry (and the rest of its messages from the count). */
  private shift(): void {
    const entry = this.queue[this.queueHead];
    this.queue[this.queueHead++] = undefined as never;
    if (Array.isArray(entry)) this.queued -= entry.length - this.batchIndex;
    this.batchIndex = 0;
    this.release();
  }

  /** Waits for more; false when the subscription ended (throws its error if it failed). */
  private async waitOrEnd(): Promise<boolean> {
    if (this.ended) {
      if (this.error !== null) throw this.error;
      return false;
    }
    await new Promise<void>((resolve) => {
      this.waiter = resolve;
    });
    return true;
  }

  private finish(): IteratorReturnResult<undefined> {
    this.stopIterating();
    return DONE;
  }

  /** The application stopped iterating (break, return, untilCaughtUp): unsubscribe. */
  private stopIterating(): Promise<IteratorReturnResult<undefined>> {
    if (!this.ended) this.close();
    return Promise.resolve(DONE);
  }

  private enqueue(entry: Entry): void {
    this.queue.push(entry);
    if (!this.paused && this.queued >= QUEUE_MESSAGES_HIGH) {
      this.paused = true;
      this.controls.pause();
    }
    this.wake();
  }

  private release(): void {
    if (this.paused && this.queued <= QUEUE_MESSAGES_LOW) {
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
