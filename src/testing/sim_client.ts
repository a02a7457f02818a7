/**
 * SimClient: a simulated Aria client that speaks the wire protocol directly (FrameWriter to send,
 * FrameDecoder to read), as a publisher, a subscriber, or both. It only records and checks what
 * arrives; it never sends from inside a delivery (the simulator decides when clients act), so the
 * broker is never re-entered.
 *
 * Like the real client (src/client), after a dropped connection it reconnects and resubscribes
 * every subscription from the seq after the last message it received (or its original start if
 * SUBSCRIBED never came); unacknowledged publishes are forgotten (they may or may not have been
 * sequenced: the reference stream, not the client, knows).
 */
import { PROTOCOL_VERSION } from "../constants.ts";
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type DecodeError,
  type OutgoingFrame,
  type PublishMessage,
  type StartPosition,
} from "../protocol/mod.ts";
import { Filter } from "../topic/filter.ts";
import { type Checker, check, type SubscriptionState } from "./invariants.ts";
import type { NetworkTamper, ReceivedMessage, SimConnection } from "./sim_network.ts";

/** A subscription as its client tracks it. */
export interface ClientSubscription extends SubscriptionState {
  /** UNSUBSCRIBE sent: DATA may still come until UNSUBSCRIBED. */
  closing: boolean;
  /** The server dropped it (a disk read failed): subscribe again from nextExpected. */
  needsResubscribe: boolean;
}

/** How fast a client reads. */
export type ReadMode =
  | { kind: "normal" }
  | { kind: "slow"; bytesPerStep: number }
  | { kind: "stalled" };

/** What every client of a run shares. */
export interface ClientWorld {
  checker: Checker;
  tamper: NetworkTamper;
  step(): number;
}

/** Encodes one frame into fresh bytes. */
export function encodeToBytes(frame: OutgoingFrame): Uint8Array {
  const writer = new FrameWriter({ capacityBytes: 256 });
  encodeFrame(writer, frame);
  return writer.bytes().slice();
}

/** A simulated protocol client. */
export class SimClient {
  connection: SimConnection | null = null;
  /** Step at which a disconnected client dials again. */
  reconnectAtStep = 0;
  readMode: ReadMode = { kind: "normal" };
  readModeUntilStep = 0;
  readonly pending = new Map<number, PublishMessage[]>();
  readonly subscriptions = new Map<number, ClientSubscription>();
  private decoder = new FrameDecoder();
  private nextRequestId = 1;
  private nextSubscriptionId = 1;
  readonly counters = { published: 0, acked: 0, failedPublishes: 0, disconnects: 0, received: 0 };

  constructor(
    readonly name: string,
    readonly publishes: boolean,
    readonly subscribes: boolean,
    private readonly world: ClientWorld,
  ) {}

  get connected(): boolean {
    return this.connection !== null;
  }

  /** The frames a fresh connection opens with: HELLO, then every subscription again. */
  opening(): Uint8Array[] {
    const frames = [
      encodeToBytes({
        kind: "hello",
        version: PROTOCOL_VERSION,
        clientName: this.name,
        authToken: null,
      }),
    ];
    for (const sub of this.subscriptions.values()) frames.push(this.subscribeFrame(sub));
    return frames;
  }

  /** A PUBLISH of `messages`, remembered until acknowledged. */
  publish(messages: PublishMessage[]): Uint8Array {
    const requestId = this.nextRequestId++;
    this.pending.set(requestId, messages);
    this.counters.published += messages.length;
    return encodeToBytes({ kind: "publish", requestId, messages });
  }

  /** A new subscription. */
  subscribe(filterTexts: string[], start: StartPosition): Uint8Array {
    const sub: ClientSubscription = {
      id: this.nextSubscriptionId++,
      filterTexts,
      filter: Filter.of(...filterTexts),
      start,
      askedFrom: start,
      nextExpected: null,
      caughtUp: false,
      received: 0,
      closing: false,
      needsResubscribe: false,
    };
    this.subscriptions.set(sub.id, sub);
    return this.subscribeFrame(sub);
  }

  /** SUBSCRIBE again for a subscription the server dropped. */
  resubscribe(sub: ClientSubscription): Uint8Array {
    sub.needsResubscribe = false;
    return this.subscribeFrame(sub);
  }

  /** UNSUBSCRIBE of `sub`. */
  unsubscribe(sub: ClientSubscription): Uint8Array {
    sub.closing = true;
    return encodeToBytes({ kind: "unsubscribe", subscriptionId: sub.id });
  }

  private subscribeFrame(sub: ClientSubscription): Uint8Array {
    return encodeToBytes({
      kind: "subscribe",
      subscriptionId: sub.id,
      start: sub.askedFrom,
      filter: sub.filterTexts,
    });
  }

  /** The connection is gone: forget its state, resume subscriptions from where they got. */
  disconnected(): void {
    this.connection = null;
    this.decoder = new FrameDecoder();
    this.counters.disconnects++;
    this.pending.clear();
    for (const sub of [...this.subscriptions.values()]) {
      if (sub.closing) {
        this.subscriptions.delete(sub.id);
        continue;
      }
      if (sub.nextExpected !== null) sub.askedFrom = { kind: "seq", seq: sub.nextExpected };
      sub.nextExpected = null;
      sub.caughtUp = false;
      sub.needsResubscribe = false;
    }
  }

  /** Bytes from the server (in order; any split). */
  receive(chunk: Uint8Array): void {
    this.decoder.push(chunk);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next())
      this.handle(frame);
  }

  private handle(frame: Frame | DecodeError): void {
    const checker = this.world.checker;
    switch (frame.kind) {
      case "welcome":
      case "pong":
        return;
      case "publish_ack": {
        const sent = this.pending.get(frame.requestId);
        check(
          sent !== undefined,
          "ack-for-request",
          () => `${this.name}: PUBLISH_ACK for unknown request ${frame.requestId}`,
        );
        this.pending.delete(frame.requestId);
        checker.onAck(this.name, frame.requestId, sent, frame.firstSeq, frame.count);
        this.counters.acked += frame.count;
        return;
      }
      case "subscribed":
        return checker.onSubscribed(
          this.name,
          this.subscription(frame.subscriptionId, "SUBSCRIBED"),
          frame.firstSeq,
        );
      case "caught_up":
        return checker.onCaughtUp(
          this.name,
          this.subscription(frame.subscriptionId, "CAUGHT_UP"),
          frame.nextSeq,
        );
      case "unsubscribed": {
        const sub = this.subscription(frame.subscriptionId, "UNSUBSCRIBED");
        check(
          sub.closing,
          "unsubscribed-when-asked",
          () => `${this.name}: UNSUBSCRIBED for sub ${sub.id}, never asked`,
        );
        this.subscriptions.delete(sub.id);
        return;
      }
      case "data": {
        const sub = this.subscription(frame.subscriptionId, "DATA");
        const batch = frame.messages;
        const messages: ReceivedMessage[] = [];
        while (batch.next())
          messages.push({
            seq: batch.seq,
            timeUs: batch.timeUs,
            topic: batch.topic,
            payload: batch.payload.slice(),
          });
        for (const message of this.world.tamper.apply(this.world.step(), messages)) {
          this.counters.received++;
          checker.onData(this.name, sub, message.seq, message.topic, message.payload);
        }
        return;
      }
      case "error":
        return this.error(frame);
      case "decode_error":
        check(
          false,
          "server-frames-valid",
          () => `${this.name}: cannot decode a server frame: ${frame.reason}`,
        );
        return;
      default:
        check(
          false,
          "server-frames-valid",
          () => `${this.name}: the server sent a ${frame.kind} frame`,
        );
    }
  }

  private error(frame: Extract<Frame, { kind: "error" }>): void {
    // Storage failures are the only errors a well-behaved client may get (and SHUTTING_DOWN).
    check(
      frame.code === "ARIA_ERR_STORAGE_FAILED" || frame.code === "ARIA_ERR_SHUTTING_DOWN",
      "expected-errors-only",
      () => `${this.name}: ${frame.code}: ${frame.reason}`,
    );
    if (frame.relatedKind === "request") {
      this.pending.delete(frame.relatedId);
      this.counters.failedPublishes++;
    } else if (frame.relatedKind === "subscription") {
      const sub = this.subscriptions.get(frame.relatedId);
      if (sub === undefined) return;
      if (sub.closing) {
        this.subscriptions.delete(sub.id);
        return;
      }
      if (sub.nextExpected !== null) sub.askedFrom = { kind: "seq", seq: sub.nextExpected };
      sub.nextExpected = null;
      sub.caughtUp = false;
      sub.needsResubscribe = true;
    }
  }

  private subscription(id: number, what: string): ClientSubscription {
    const sub = this.subscriptions.get(id);
    check(
      sub !== undefined,
      "frames-for-known-subscriptions",
      () => `${this.name}: ${what} for unknown subscription ${id}`,
    );
    return sub;
  }
}
