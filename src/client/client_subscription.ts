/**
 * ClientSubscription: one subscription as the application sees it — an async iterator of
 * messages in seq order. Received messages wait in a bounded queue; above QUEUE_MESSAGES_HIGH the
 * connection stops reading (TCP back-pressure reaches the server, which stops this connection's
 * subscriptions), below QUEUE_MESSAGES_LOW it reads again.
 *
 * `position` is the seq after the last message received (or the server's caught-up point): a
 * reconnect resubscribes from there, so nothing is missed or repeated.
 */
import { AriaError, type MessageBatch, type StartPosition } from "../protocol/mod.ts";
import type { Filter } from "../topic/filter.ts";

/** Where to start: the live end, the oldest message, a seq, or a time. */
export type StartFrom = "live" | "earliest" | number | Date | { seq: number } | { timeUs: number };

/** Options of `subscribe`. */
export interface SubscribeOptions {
  from?: StartFrom;
  /** End the iteration when the subscription reaches the live end (after every older message). */
  untilCaughtUp?: boolean;
  /** Receive each message's properties (`Message.properties`; SUBSCRIBE option PROPERTIES). */
  properties?: boolean;
  /**
   * A durable consumer's name (SUBSCRIBE option DURABLE): the server keeps its position (the seq
   * after the last acknowledged message) and a later subscription of that name, from any
   * process, starts there; `from` applies only when the consumer is new.
   */
  durable?: string;
  /**
   * With `durable`: how messages are acknowledged. "auto" (the default): a message counts as
   * processed once the application asks for the next one (the loop body returned; for
   * `batches()` and `frames()`, the next batch), and the client sends one ACK per DATA frame,
   * when the last message of the frame is processed. "manual": `message.ack()` acknowledges that
   * message and every earlier one of the subscription.
   */
  ack?: "auto" | "manual";
  /**
   * With `durable`: the name is a shared group's (SUBSCRIBE option SHARED). Every subscription of
   * the group, from any process, is a member; each message goes to one member, all of a topic's
   * to the same one while it stays. A member may get, after another left, older messages than it
   * got before (the leaver's unacknowledged ones): they are handed out, not dropped, and an ACK
   * acknowledges what this member was given up to that message, in the order given.
   */
  shared?: boolean;
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
  /**
   * The properties published with it (a view like `payload`), when subscribed with
   * `{ properties: true }`; empty when it has none or the subscription did not ask.
   */
  properties: Uint8Array;
  /**
   * Acknowledges this message and every earlier one of its subscription (a durable subscription
   * with `ack: "manual"`; does nothing otherwise).
   */
  ack(): void;
}

const NO_PROPERTIES = new Uint8Array(0);
const NO_ACK = () => {};

/** Messages queued before the connection stops reading. */
export const QUEUE_MESSAGES_HIGH = 8192;
/** Messages queued when reading resumes. */
export const QUEUE_MESSAGES_LOW = 2048;

interface Controls {
  /** Sends ACK `seq` for this subscription on the current connection. */
  ack?(seq: number): void;
  unsubscribe(): void;
  pause(): void;
  resume(): void;
}

/**
 * What the queue holds: the messages of one DATA frame (a batch over its own copy of their bytes,
 * messages made from it only when the application asks), or the caught-up point.
 */
type Entry = MessageBatch | { caughtUp: number };

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** Converts a StartFrom to the protocol's start position; throws ARIA_ERR_INVALID_START for one out of range. */
export function startPositionOf(from: StartFrom | undefined): StartPosition {
  if (from === undefined || from === "live") return { kind: "live" };
  if (from === "earliest") return { kind: "earliest" };
  if (typeof from === "number") return { kind: "seq", seq: checked(from, 1, "seq") };
  if (from instanceof Date)
    return { kind: "time", timeUs: checked(from.getTime() * 1000, 0, "time") };
  if (typeof from === "object" && from !== null && "seq" in from)
    return { kind: "seq", seq: checked(from.seq, 1, "seq") };
  if (typeof from === "object" && from !== null && "timeUs" in from)
    return { kind: "time", timeUs: checked(from.timeUs, 0, "time") };
  throw new AriaError(
    "ARIA_ERR_INVALID_START",
    `${String(from)} is not a start ("live", "earliest", a seq, a Date, { seq } or { timeUs })`,
  );
}

/** `value` when it is a safe integer of at least `min`, else ARIA_ERR_INVALID_START. */
function checked(value: number, min: number, what: string): number {
  if (Number.isSafeInteger(value) && value >= min) return value;
  throw new AriaError(
    "ARIA_ERR_INVALID_START",
    `a start ${what} must be a whole number of at least ${min}${what === "time" ? " µs (1970 or later)" : ""}, not ${value}`,
  );
}

/**
 * An active subscription. Three ways to read it (use one per subscription):
 * - `for await (const message of subscription)`: one Message at a time;
 * - `subscription.batches()`: the Messages of each DATA frame as one array (one promise per frame);
 * - `subscription.frames()`: each DATA frame as a MessageBatch cursor (`next()`, then `seq`,
 *   `timeUs`, `topic`, `payload` or `frame`/`payloadStart`/`payloadBytes`): no object per message.
 */
export class ClientSubscription implements AsyncIterable<Message> {
  /** Seq after the last message received, or 0 before SUBSCRIBED. */
  position = 0;
  /** Seq the server started this subscription at (from SUBSCRIBED). */
  firstSeq = 0;
  /**
   * Where the latest SUBSCRIBE of this subscription started: its `from` at first; after a
   * reconnect, `{ kind: "seq", seq }` with the seq after the last message received (what an
   * `onConnectionEvent` "reconnected" callback reads to say where it resumed). Null before any.
   */
  startSent: StartPosition | null = null;
  /** Received entries not yet handed out; `queued` counts their messages. */
  private readonly queue: Entry[] = [];
  private queueHead = 0;
  private queued = 0;
  private waiter: (() => void) | null = null;
  private ended = false;
  private error: AriaError | Error | null = null;
  private paused = false;
  private caughtUpResolve!: (nextSeq: number) => void;
  /** Durable: the highest seq acknowledged (sent, or waiting in `ackWanted`). */
  private ackedSeq = 0;
  /** Durable: the seq the application acknowledged, sent once this connection delivered it. */
  private ackWanted = 0;
  /** Durable: the highest seq the server delivered on the current connection (an ACK's bound). */
  private deliveredSeq = 0;
  /** Auto ack: the seq that ends the DATA frame last handed out, acknowledged at the next ask. */
  private processedAtNext = 0;
  /** `message.ack` of this subscription's messages (manual), or a no-op. */
  private readonly ackOf: ((seq: number) => () => void) | null;
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
    this.ackOf =
      options.durable !== undefined && options.ack === "manual"
        ? (seq) => () => this.acknowledge(seq)
        : null;
  }

  /** True for a durable subscription that acknowledges by itself (`ack: "auto"`). */
  private get autoAck(): boolean {
    return this.options.durable !== undefined && this.options.ack !== "manual";
  }

  /**
   * Everything up to `seq` is processed: an ACK is sent, once the current connection has
   * delivered `seq` (after a reconnect the server delivers again from its stored position, and
   * an ACK past what it delivered would be refused).
   */
  acknowledge(seq: number): void {
    if (this.options.durable === undefined) return;
    if (this.options.shared === true) {
      // In delivery order, not seq order: a message given back by a leaving member may be older.
      if (this.deliveredSeq > 0) this.controls.ack?.(seq);
      return;
    }
    if (seq <= this.ackedSeq) return;
    this.ackedSeq = seq;
    this.ackWanted = seq;
    this.sendWantedAck();
  }

  private sendWantedAck(): void {
    if (this.ackWanted === 0 || this.deliveredSeq === 0) return;
    const seq = Math.min(this.ackWanted, this.deliveredSeq);
    if (seq === this.ackWanted) this.ackWanted = 0;
    this.controls.ack?.(seq);
  }

  /** The durable consumer's name, or undefined. */
  get durable(): string | undefined {
    return this.options.durable;
  }

  /** True for a shared group's member (option `shared`). */
  get shared(): boolean {
    return this.options.shared === true;
  }

  /**
   * The seq a resubscribe would start from now (the one after the last message received, or the
   * server's start or caught-up point), or null before SUBSCRIBED (it would start at `from`).
   */
  get resumeSeq(): number | null {
    return this.position > 0 ? this.position : null;
  }

  /** True when it asked for each message's properties (SUBSCRIBE option PROPERTIES). */
  get wantsProperties(): boolean {
    return this.options.properties === true;
  }

  /** Where a (re)subscribe starts: after what was received, else the requested start. */
  resumeStart(): StartPosition {
    return this.position > 0
      ? { kind: "seq", seq: this.position }
      : startPositionOf(this.options.from);
  }

  /** SUBSCRIBED arrived (a new SUBSCRIBE on this connection: nothing delivered on it yet). */
  subscribed(firstSeq: number): void {
    this.deliveredSeq = 0;
    // A shared member's unacknowledged messages went to other members when its connection ended.
    if (this.options.shared === true) this.ackedSeq = 0;
    // What was acknowledged before a reconnect is sent again once delivered again.
    if (this.ackedSeq >= firstSeq) this.ackWanted = this.ackedSeq;
    if (this.firstSeq === 0) this.firstSeq = firstSeq;
    this.position = Math.max(this.position, firstSeq);
  }

  /**
   * A DATA frame arrived (its messages in seq order, valid until the decoder moves on). Messages
   * before `position` (received before a reconnect) are dropped; the rest are kept as one copy.
   */
  pushFrame(messages: MessageBatch): void {
    if (this.ended) return;
    if (this.options.durable !== undefined) {
      this.deliveredSeq = Math.max(this.deliveredSeq, messages.lastSeq);
      this.sendWantedAck();
    }
    // A shared member may be given older seqs than before (see SubscribeOptions.shared).
    const fresh = messages.copy(this.options.shared === true ? 0 : this.position);
    if (fresh === null) return;
    this.position = Math.max(this.position, fresh.lastSeq + 1);
    this.queued += fresh.count;
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

  /**
   * No more messages: the iterator finishes after the queued ones. Nothing more comes for this
   * subscription, so its pause of the connection ends now, not when the application reads.
   */
  end(): void {
    this.ended = true;
    if (this.paused) {
      this.paused = false;
      this.controls.resume();
    }
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
    return this.iterable(async () => {
      this.ackProcessed();
      const frame = await this.nextFrame();
      if (frame === null) return DONE;
      const messages: Message[] = new Array(frame.remaining);
      for (let i = 0; frame.next(); i++) messages[i] = this.messageAt(frame);
      if (this.autoAck) this.processedAtNext = frame.lastSeq;
      return { done: false, value: messages };
    });
  }

  /**
   * Each DATA frame as a cursor over its messages: call `next()` until it returns false and read
   * the current message's fields; nothing is allocated per message (`payload` makes a view on
   * demand; `frame.subarray(payloadStart, payloadStart + payloadBytes)` is the same bytes). A
   * frame's bytes are its own copy: the cursor and its payloads stay valid after later frames.
   */
  frames(): AsyncIterable<MessageBatch> {
    return this.iterable(async () => {
      this.ackProcessed();
      const frame = await this.nextFrame();
      if (frame !== null && this.autoAck) this.processedAtNext = frame.lastSeq;
      return frame === null ? DONE : { done: false, value: frame };
    });
  }

  private iterable<T>(next: () => Promise<IteratorResult<T>>): AsyncIterable<T> {
    return { [Symbol.asyncIterator]: () => ({ next, return: () => this.stopIterating() }) };
  }

  private async nextMessage(): Promise<IteratorResult<Message>> {
    this.ackProcessed();
    for (;;) {
      const frame = await this.headFrame();
      if (frame === null) return DONE;
      if (!frame.next()) {
        this.shift();
        continue;
      }
      this.queued--;
      this.release();
      // The last message of its frame: once the application asks for the next, ACK the frame.
      if (frame.remaining === 0 && this.autoAck) this.processedAtNext = frame.seq;
      return { done: false, value: this.messageAt(frame) };
    }
  }

  /** Auto ack: the application asked for more, so what it was handed is processed. */
  private ackProcessed(): void {
    if (this.processedAtNext === 0) return;
    const seq = this.processedAtNext;
    this.processedAtNext = 0;
    this.acknowledge(seq);
  }

  /** The current message of `frame` as a Message, with `ack` for a manual durable subscription. */
  private messageAt(frame: MessageBatch): Message {
    const message = messageAt(frame);
    if (this.ackOf !== null) message.ack = this.ackOf(frame.seq);
    return message;
  }

  /** The next DATA frame, taken off the queue; null when the iteration ends. */
  private async nextFrame(): Promise<MessageBatch | null> {
    const frame = await this.headFrame();
    if (frame !== null) this.shift();
    return frame;
  }

  /**
   * The DATA frame at the head of the queue (left there), waiting for one; caught-up points on
   * the way are dropped (or end the iteration with untilCaughtUp). Null when the iteration ends.
   */
  private async headFrame(): Promise<MessageBatch | null> {
    for (;;) {
      const entry = this.head();
      if (entry === null) {
        if (!(await this.waitOrEnd())) return null;
        continue;
      }
      if ("count" in entry) return entry;
      this.shift();
      if (this.options.untilCaughtUp === true) {
        void this.stopIterating();
        return null;
      }
    }
  }

  /** The queue's first entry, or null when empty. */
  private head(): Entry | null {
    if (this.queueHead < this.queue.length) return this.queue[this.queueHead];
    this.queue.length = 0;
    this.queueHead = 0;
    return null;
  }

  /** Drops the head entry (and the messages of it not yet handed out from the count). */
  private shift(): void {
    const entry = this.queue[this.queueHead];
    this.queue[this.queueHead++] = undefined as never;
    if ("count" in entry) this.queued -= entry.remaining;
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

/** The current message of `frame` as a Message (its payload a view into the frame's own copy). */
function messageAt(frame: MessageBatch): Message {
  return {
    seq: frame.seq,
    timeUs: frame.timeUs,
    topic: frame.topic,
    payload: frame.payload,
    properties: frame.propertiesBytes === 0 ? NO_PROPERTIES : frame.properties,
    ack: NO_ACK,
  };
}
