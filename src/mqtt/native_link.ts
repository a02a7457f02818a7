/**
 * NativeLink: one MQTT connection's session inside the broker, spoken to in native frames. The
 * MQTT door opens it with `broker.open(connection)` like any TCP client, feeds it the frames it
 * encodes (HELLO, PUBLISH, SUBSCRIBE, UNSUBSCRIBE) and reads back what the broker writes (WELCOME,
 * PUBLISH_ACK, SUBSCRIBED, DATA, CAUGHT_UP, UNSUBSCRIBED, ERROR), decoded into calls of
 * `NativeEvents`. So an MQTT client meets the same permissions, catch-up, stalls and limits as a
 * native one, and the broker does not know MQTT exists.
 *
 * Back-pressure: the broker's `Connection.write` takes bytes only while `events.accepting` (the
 * MQTT socket and the in-flight window have room); otherwise it returns 0, the broker queues and
 * stalls the subscriptions as for a slow socket, and `drained()` lets it go on.
 *
 * Batches: between `cork()` and `uncork()` (the session's handling of one read of its socket, or
 * of one broker write) PUBLISH and ACK frames gather and go to the broker in one `receive`:
 * consecutive publishes of one topic share one native PUBLISH frame (each message keeps its own
 * request id: the frame's PUBLISH_ACK or ERROR is told for each), and consecutive ACKs of one
 * subscription become the last one. Any other frame goes at once, behind what gathered (the
 * broker answers HELLO and SUBSCRIBE before the next packet is handled, as uncorked). Frames
 * keep their order.
 *
 * Not here: MQTT packets (mqtt_session.ts). Never calls the broker from inside a broker write
 * (the broker is mid-flush there): a frame sent while the broker writes waits for `soon`, in
 * order with the frames sent after it.
 */
import type { Connection } from "../broker/ports.ts";
import type { Scheduler } from "../broker/ports.ts";
import {
  encodeAck,
  encodeHello,
  encodeSubscribe,
  encodeUnsubscribe,
  FrameDecoder,
  FrameWriter,
  type MessageBatch,
  type StartPosition,
} from "../protocol/mod.ts";
import type { ConnectionEvents } from "../broker/ports.ts";
import { assert } from "../stdx/assert.ts";

/** What the broker tells an MQTT session, frame by frame. */
export interface NativeEvents {
  /** True while the session takes more DATA (its socket and window have room). */
  readonly accepting: boolean;
  welcome(nextSeq: number): void;
  publishAck(requestId: number, firstSeq: number): void;
  subscribed(subscriptionId: number, firstSeq: number): void;
  /** Messages of a subscription: the batch and its payload views are valid during the call. */
  data(subscriptionId: number, messages: MessageBatch): void;
  caughtUp(subscriptionId: number, nextSeq: number): void;
  unsubscribed(subscriptionId: number): void;
  /** An ERROR frame (or bytes of the broker that did not decode: a bug, reported as fatal). */
  error(error: NativeError): void;
  /** The broker closed the session (after a fatal error, or at shutdown). */
  closed(): void;
  /** The broker stops reading this session (storage behind), and reads on. */
  pause(): void;
  resume(): void;
  /** A broker write begins (its events follow) and ends: the session may gather its output. */
  batchStart(): void;
  batchEnd(): void;
}

/** An ERROR frame, as an MQTT session needs it. */
export interface NativeError {
  code: string;
  fatal: boolean;
  relatedKind: "none" | "request" | "subscription";
  relatedId: number;
  reason: string;
}

/** Most messages one batched native PUBLISH frame carries (more start a new frame). */
const PUBLISH_BATCH_MAX = 1024;

/** One broker session driven in native frames. */
export class NativeLink {
  /** The broker's session id, once opened. */
  sessionId = -1;
  /** True once the broker closed its side or `end()` was called. */
  ended = false;
  private readonly writer = new FrameWriter({ capacityBytes: 1024 });
  private readonly decoder = new FrameDecoder();
  private readonly connection: Connection;
  /** True while the broker writes to this link (its events run inside the broker's flush). */
  private inBrokerWrite = false;
  /** Frames sent while the broker wrote, for `soon`. */
  private readonly deferred: Uint8Array[] = [];
  /** Nesting of `cork()`: above 0, frames gather in the writer. */
  private corked = 0;
  /** The open batched PUBLISH frame while corked: its topic, flag and request ids. */
  private openPublish: { topic: string; withProperties: boolean; requestIds: number[] } | null =
    null;
  /** An ACK not yet written while corked (a later one of its subscription replaces it). */
  private pendingAck: { subscriptionId: number; seq: number } | null = null;
  /** Request ids of a batched PUBLISH frame by the frame's request id (its first message's). */
  private readonly publishBatches = new Map<number, number[]>();

  constructor(
    private readonly broker: ConnectionEvents,
    private readonly events: NativeEvents,
    peer: {
      remoteAddress?: string;
      peerSubject?: () => string | undefined;
      signedInBefore?: string;
    },
    private readonly scheduler: Scheduler,
  ) {
    this.connection = {
      write: (bytes) => this.fromBroker(bytes),
      close: () => this.brokerClosed(),
      pause: () => this.events.pause(),
      resume: () => this.events.resume(),
      remoteAddress: peer.remoteAddress,
      signedInBefore: peer.signedInBefore,
      // The broker lets only the door's sessions use the consumer names it makes.
      door: "mqtt",
      get peerSubject() {
        return peer.peerSubject?.();
      },
    };
  }

  /** Opens the broker session (it may refuse at once: over the connection limits). */
  open(): void {
    assert(this.sessionId < 0, "NativeLink opened once");
    this.sessionId = this.broker.open(this.connection);
  }

  /** Frames from here to the matching `uncork()` go to the broker together. */
  cork(): void {
    this.corked++;
  }

  /** Ends a `cork()`; the outermost one sends what gathered. */
  uncork(): void {
    assert(this.corked > 0, "uncork() after cork()");
    if (--this.corked === 0) this.send();
  }

  /** HELLO with the credential as the token (null: none). */
  hello(clientName: string, authToken: string | null): void {
    this.closeBatched();
    encodeHello(this.writer, { version: 1, clientName, authToken });
    this.deliver();
  }

  /**
   * PUBLISH of one message under `requestId`, with its properties bytes (empty: none). Corked,
   * it joins the open PUBLISH frame when that frame has its topic and properties flag and room.
   */
  publish(requestId: number, topic: string, payload: Uint8Array, properties: Uint8Array): void {
    const withProperties = properties.length > 0;
    const open = this.openPublish;
    if (
      open !== null &&
      (open.topic !== topic ||
        open.withProperties !== withProperties ||
        open.requestIds.length >= PUBLISH_BATCH_MAX ||
        !this.writer.publishMessageFits(topic.length * 3, payload.length, properties.length))
    )
      this.closeBatched();
    if (this.openPublish === null) {
      this.closeBatched();
      this.writer.beginPublish(requestId, withProperties);
      if (this.corked > 0) this.openPublish = { topic, withProperties, requestIds: [requestId] };
    } else this.openPublish.requestIds.push(requestId);
    this.writer.addPublishMessageText(topic, payload, withProperties ? properties : undefined);
    if (this.openPublish === null) {
      this.writer.endPublish();
      this.send();
    }
  }

  /**
   * SUBSCRIBE of `filter` entries from `start`, with each message's properties (PROPERTIES); with
   * `durable`, as that durable consumer (it goes on from its position when it exists); with
   * `shared` too, as a member of that shared group.
   */
  subscribe(
    subscriptionId: number,
    start: StartPosition,
    filter: readonly string[],
    durable?: string,
    shared = false,
  ): void {
    const frame = { subscriptionId, start, filter, properties: true, durable, shared };
    this.closeBatched();
    encodeSubscribe(this.writer, frame);
    this.deliver();
  }

  /** ACK: every message of durable subscription `subscriptionId` up to `seq` is processed. */
  ack(subscriptionId: number, seq: number): void {
    if (this.corked > 0) {
      if (this.pendingAck?.subscriptionId === subscriptionId) {
        this.pendingAck.seq = seq; // the latest: a shared member ACKs in delivery order
        return;
      }
      this.closeBatched();
      this.pendingAck = { subscriptionId, seq };
      return;
    }
    this.closeBatched();
    encodeAck(this.writer, { subscriptionId, seq });
    this.send();
  }

  /** UNSUBSCRIBE of `subscriptionId`. */
  unsubscribe(subscriptionId: number): void {
    this.closeBatched();
    encodeUnsubscribe(this.writer, { subscriptionId });
    this.deliver();
  }

  /** Closes what a cork holds open (the batched PUBLISH frame, the pending ACK) into the writer. */
  private closeBatched(): void {
    const open = this.openPublish;
    if (open !== null) {
      this.openPublish = null;
      this.writer.endPublish();
      if (open.requestIds.length > 1)
        this.publishBatches.set(open.requestIds[0] as number, open.requestIds);
    }
    const ack = this.pendingAck;
    if (ack !== null) {
      this.pendingAck = null;
      encodeAck(this.writer, ack);
    }
  }

  /** The session takes DATA again: the broker writes what it queued, and resumes stalls. */
  drained(): void {
    if (!this.ended && this.sessionId >= 0) this.broker.writable(this.sessionId);
  }

  /**
   * The MQTT connection is gone: the broker session ends (subscriptions closed), after the frames
   * a cork holds (the packets read before the end are handled as they would have been).
   */
  end(): void {
    if (this.sessionId < 0) return;
    this.deliver();
    const id = this.sessionId;
    this.ended = true;
    this.broker.closed(id);
  }

  /**
   * Hands the frames built in the writer to the broker (a copy: the broker may hold it); corked,
   * they wait for the last `uncork()`.
   */
  private send(): void {
    if (this.corked === 0) this.deliver();
  }

  private deliver(): void {
    this.closeBatched();
    if (this.writer.bytesUsed === 0) return;
    const bytes = this.writer.bytes().slice();
    this.writer.reset();
    if (this.ended || this.sessionId < 0) return;
    if (this.inBrokerWrite || this.deferred.length > 0) {
      if (this.deferred.push(bytes) === 1) this.scheduler.soon(() => this.sendDeferred());
      return;
    }
    this.broker.receive(this.sessionId, bytes);
  }

  private sendDeferred(): void {
    while (this.deferred.length > 0 && !this.ended)
      this.broker.receive(this.sessionId, this.deferred.shift() as Uint8Array);
    this.deferred.length = 0;
  }

  private brokerClosed(): void {
    if (this.ended) return;
    this.ended = true;
    this.decoder.release();
    this.events.closed();
  }

  /** Bytes the broker writes: all of them while the session accepts, else none. */
  private fromBroker(bytes: Uint8Array): number {
    if (this.ended) return bytes.length;
    if (!this.events.accepting) return 0;
    this.inBrokerWrite = true;
    this.cork();
    this.events.batchStart();
    try {
      this.decodeFrames(bytes);
    } finally {
      this.events.batchEnd();
      this.uncork();
      this.inBrokerWrite = false;
    }
    return bytes.length;
  }

  private decodeFrames(bytes: Uint8Array): void {
    this.decoder.push(bytes);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next()) {
      if (this.ended) break;
      switch (frame.kind) {
        case "welcome":
          this.events.welcome(frame.nextSeq);
          break;
        case "publish_ack":
          this.publishAcked(frame.requestId, frame.firstSeq);
          break;
        case "subscribed":
          this.events.subscribed(frame.subscriptionId, frame.firstSeq);
          break;
        case "data":
          this.events.data(frame.subscriptionId, frame.messages);
          break;
        case "caught_up":
          this.events.caughtUp(frame.subscriptionId, frame.nextSeq);
          break;
        case "unsubscribed":
          this.events.unsubscribed(frame.subscriptionId);
          break;
        case "error":
          this.failed(frame);
          break;
        case "decode_error":
          this.events.error({ ...frame, fatal: true });
          break;
        default:
          // PING from the broker is not sent today; anything else is not for a client.
          break;
      }
    }
  }

  /** PUBLISH_ACK of a frame: each of its messages' requests is acknowledged, in order. */
  private publishAcked(requestId: number, firstSeq: number): void {
    const batch = this.publishBatches.get(requestId);
    if (batch === undefined) return this.events.publishAck(requestId, firstSeq);
    this.publishBatches.delete(requestId);
    for (let index = 0; index < batch.length && !this.ended; index++)
      this.events.publishAck(batch[index] as number, firstSeq + index);
  }

  /** ERROR: one about a batched PUBLISH frame is told for each of its messages' requests. */
  private failed(error: NativeError): void {
    const batch =
      error.relatedKind === "request" ? this.publishBatches.get(error.relatedId) : undefined;
    if (batch === undefined) return this.events.error(error);
    this.publishBatches.delete(error.relatedId);
    for (const requestId of batch) {
      if (this.ended) break;
      this.events.error({ ...error, relatedId: requestId });
    }
  }
}
