/**
 * AriaClient: the TypeScript client. One TCP connection carries the handshake, publishes
 * (auto-batched: every publish() of one tick shares a PUBLISH frame) and any number of
 * subscriptions, each an async iterator with back-pressure: when its queue of received messages
 * is full the socket stops reading, the server's send queue fills, and the server stops that
 * connection's subscriptions until the application reads again.
 *
 * Reconnects: when the connection drops, the client dials again with back-off, repeats the
 * handshake, and resubscribes every subscription from the seq after the last one it delivered,
 * so the application sees no gap and no duplicate. Publishes not yet acknowledged when the
 * connection dropped are rejected with ARIA_ERR_CONNECTION_LOST: they may or may not have been
 * sequenced, and only the application knows whether sending again is safe. The application may
 * watch this happen through `onConnectionEvent` (disconnected, reconnected, reconnect_failed).
 *
 * The socket comes from a Dialer (dialer.ts, implemented by the runtime); this file does no I/O.
 */
import {
  AUTH_TOKEN_BYTES_MAX,
  CLIENT_NAME_BYTES_MAX,
  PAYLOAD_BYTES_MAX,
  PROPERTIES_BYTES_MAX,
  PROTOCOL_VERSION,
  PUBLISH_BATCH_MESSAGES_MAX,
} from "../constants.ts";
import {
  AriaError,
  consumerNameRefusal,
  encodeAck,
  encodeHello,
  encodeSubscribe,
  encodeUnsubscribe,
  type ErrorFrame,
  type Frame,
  FrameDecoder,
  FrameWriter,
  type ServerLimits,
  type StartPosition,
} from "../protocol/mod.ts";
import type { ClientSocket, DialTls, Dialer } from "./dialer.ts";
import { Filter } from "../topic/filter.ts";
import { validateTopic } from "../topic/topic.ts";
import {
  ClientSubscription,
  type SubscribeOptions,
  startPositionOf,
} from "./client_subscription.ts";

/** Options of `connect`. */
export interface ClientOptions {
  clientName?: string;
  authToken?: string;
  /**
   * TLS material for a `tls://` URL: `ca` (PEM) to trust a private CA, `cert` and `key` (PEM) for
   * mutual TLS. Refused with a `tcp://` URL, which would otherwise ignore it in silence.
   */
  tls?: DialTls;
  /** Reconnect and resume after a dropped connection (default true). */
  reconnect?: boolean;
  /** First back-off delay; doubles up to 2 s. */
  reconnectDelayMs?: number;
  /** Reconnect attempts before giving up (default 20). */
  reconnectAttemptsMax?: number;
  /**
   * Called when the connection drops, comes back, or is given up (never for the first connect,
   * whose failure rejects `connect`, nor after `close()`). After "reconnected", each
   * subscription's `resumeSeq` is the seq it was resubscribed from. A throw here is ignored.
   */
  onConnectionEvent?: (event: ConnectionEvent) => void;
}

/** A change of an established connection, as `onConnectionEvent` reports it. */
export type ConnectionEvent =
  /** The connection dropped (`reason` says why); `reconnecting`: the client dials again, else it ended. */
  | { kind: "disconnected"; reason: string; reconnecting: boolean }
  /** A new connection completed its handshake and every subscription was sent again. */
  | { kind: "reconnected"; attempts: number }
  /** Every reconnect attempt failed: subscriptions fail and publishes reject with `reason`. */
  | { kind: "reconnect_failed"; reason: string; attempts: number };

/** The seqs a publish was given. */
export interface PublishResult {
  firstSeq: number;
  count: number;
}

interface PendingPublish {
  resolve(result: PublishResult): void;
  reject(error: Error): void;
}

/** Options of `publish`. */
export interface PublishOptions {
  /** Opaque bytes kept with the message and given to subscribers that ask for them. */
  properties?: Uint8Array;
}

interface QueuedPublish {
  topic: string;
  payload: Uint8Array;
  properties?: Uint8Array;
  resolve(seq: number): void;
  reject(error: Error): void;
}

const ENCODER = new TextEncoder();

/** Parses `tcp://host:port` (plain TCP) or `tls://host:port` (TLS over TCP). */
export function parseTcpUrl(url: string): { host: string; port: number; tls: boolean } {
  const match = /^(tcp|tls):\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(url);
  if (match === null)
    throw new AriaError(
      "ARIA_ERR_INVALID_URL",
      `"${url}" is not a tcp://HOST:PORT or tls://HOST:PORT URL`,
    );
  const port = Number(match[3]);
  if (port < 1 || port > 65535)
    throw new AriaError("ARIA_ERR_INVALID_URL", `port ${port} of "${url}" is out of range`);
  return { host: match[2].replace(/^\[|\]$/g, ""), port, tls: match[1] === "tls" };
}

/**
 * True when `bytes` open a TLS record (alert 0x15 or handshake 0x16, version 3.1–3.4): read as an
 * Aria frame header, that length would be over 64 KiB, which no first frame of a server is.
 */
function isTlsRecord(bytes: Uint8Array): boolean {
  return (
    bytes.length >= 3 &&
    (bytes[0] === 0x15 || bytes[0] === 0x16) &&
    bytes[1] === 0x03 &&
    bytes[2] >= 1 &&
    bytes[2] <= 4
  );
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** A connection to an Aria server. */
export class AriaClient {
  private socket: ClientSocket | null = null;
  private decoder = new FrameDecoder();
  private readonly writer = new FrameWriter();
  private readonly outQueue: Uint8Array[] = [];
  private nextRequestId = 1;
  private nextSubscriptionId = 1;
  private readonly pending = new Map<number, PendingPublish>();
  private readonly subscriptions = new Map<number, ClientSubscription>();
  private queued: QueuedPublish[] = [];
  private flushScheduled = false;
  private welcomed: { resolve(): void; reject(error: Error): void } | null = null;
  /**
   * The connection the client is on or dialling. Each dial's handlers check it, so a connection
   * that is no longer the client's (lost, or replaced while it dialled) is never read or mended.
   */
  private link: { closed: boolean } | null = null;
  /** An open() (the first connect's, or a reconnect's) is under way: it retries or fails itself. */
  private opening = false;
  private reconnecting = false;
  /** A handshake completed once: only then does a lost connection lead to reconnects. */
  private welcomedOnce = false;
  private closedByUser = false;
  /** The fatal ERROR the server ended this client with, which later calls report too. */
  private fatalError: AriaError | null = null;
  /** Why the server said it would close (SHUTTING_DOWN): the reason of the loss that follows. */
  private closingReason: string | null = null;
  private pausedBy = new Set<number>();
  /** The server's limits, from WELCOME. */
  limits: ServerLimits | null = null;

  private constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly dial: Dialer,
    private readonly options: ClientOptions,
    private readonly dialTls: DialTls | undefined,
  ) {}

  /** Connects and completes the handshake. */
  static async connect(
    url: string,
    dial: Dialer,
    options: ClientOptions = {},
  ): Promise<AriaClient> {
    const { host, port, tls } = parseTcpUrl(url);
    if (!tls && options.tls !== undefined)
      throw new AriaError(
        "ARIA_ERR_INVALID_ARGUMENT",
        `TLS options were given for "${url}", a plain TCP URL: use tls://HOST:PORT`,
      );
    const name = options.clientName ?? "aria-client";
    if (ENCODER.encode(name).length > CLIENT_NAME_BYTES_MAX)
      throw new AriaError(
        "ARIA_ERR_INVALID_ARGUMENT",
        `client name is longer than ${CLIENT_NAME_BYTES_MAX} bytes`,
      );
    if (
      options.authToken !== undefined &&
      ENCODER.encode(options.authToken).length > AUTH_TOKEN_BYTES_MAX
    ) {
      throw new AriaError(
        "ARIA_ERR_INVALID_ARGUMENT",
        `auth token is longer than ${AUTH_TOKEN_BYTES_MAX} bytes`,
      );
    }
    // A tls:// URL always dials TLS, with the system's CAs when no `ca` is given.
    const dialTls = tls ? (options.tls ?? {}) : undefined;
    const client = new AriaClient(host, port, dial, options, dialTls);
    try {
      await client.open();
    } catch (error) {
      // A failed first connect leaves nothing behind: no background reconnect, no socket.
      client.endConnection(error as Error);
      throw error;
    }
    return client;
  }

  /**
   * Publishes one message (with `properties`: opaque bytes kept with it, up to
   * PROPERTIES_BYTES_MAX); resolves to its seq once the server acknowledged it.
   */
  publish(
    topic: string,
    payload: Uint8Array | string,
    options: PublishOptions = {},
  ): Promise<number> {
    const bytes = typeof payload === "string" ? ENCODER.encode(payload) : payload;
    const properties = options.properties;
    const problem = this.checkMessage(topic, bytes, properties);
    if (problem !== null) return Promise.reject(problem);
    return new Promise((resolve, reject) => {
      this.queued.push({ topic, payload: bytes, properties, resolve, reject });
      if (this.queued.length >= PUBLISH_BATCH_MESSAGES_MAX) this.flushPublishes();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => this.flushPublishes());
      }
    });
  }

  /**
   * Publishes a batch in one frame (or as few as the limits allow); resolves to the seq of the
   * first message and the count once all are acknowledged. An invalid message rejects the whole
   * batch before anything is sent. One promise per frame, not per message.
   */
  async publishBatch(
    messages: readonly { topic: string; payload: Uint8Array | string; properties?: Uint8Array }[],
  ): Promise<PublishResult> {
    const payloads: Uint8Array[] = new Array(messages.length);
    for (let i = 0; i < messages.length; i++) {
      const payload = messages[i].payload;
      payloads[i] = typeof payload === "string" ? ENCODER.encode(payload) : payload;
      const problem = this.checkMessage(messages[i].topic, payloads[i], messages[i].properties);
      if (problem !== null) throw problem;
    }
    if (messages.length === 0) return { firstSeq: 0, count: 0 };
    if (this.socket === null || this.welcomed !== null) {
      // Not connected (or reconnecting): queue like single publishes, which wait for the connection.
      const seqs = await Promise.all(
        messages.map((m, i) => this.publish(m.topic, payloads[i], { properties: m.properties })),
      );
      return { firstSeq: seqs[0], count: seqs.length };
    }
    this.flushPublishes(); // earlier publish() calls go first
    const acks: Promise<PublishResult>[] = [];
    this.sendPublishFrames(
      messages,
      (i) => payloads[i],
      (requestId) =>
        acks.push(
          new Promise((resolve, reject) => this.pending.set(requestId, { resolve, reject })),
        ),
    );
    const results = await Promise.all(acks);
    return { firstSeq: results[0].firstSeq, count: messages.length };
  }

  /** Subscribes to `filter` (a topic, `a/b/**`, `**`, or a list of them). */
  subscribe(
    filter: string | readonly string[],
    options: SubscribeOptions = {},
  ): ClientSubscription {
    const parsed = Filter.parse(typeof filter === "string" ? [filter] : filter);
    if (!parsed.ok) throw new AriaError("ARIA_ERR_INVALID_FILTER", parsed.reason);
    // Checked before anything is encoded: a bad start must not leave a frame half written.
    startPositionOf(options.from);
    const id = this.nextSubscriptionId++;
    if (options.durable !== undefined) {
      const refusal = consumerNameRefusal(options.durable);
      if (refusal !== null) throw new AriaError("ARIA_ERR_INVALID_ARGUMENT", refusal);
    } else if (options.shared === true) {
      throw new AriaError("ARIA_ERR_INVALID_ARGUMENT", "shared needs durable (the group's name)");
    }
    const subscription = new ClientSubscription(id, parsed.filter, options, {
      ack: (seq) => this.sendAck(id, seq),
      unsubscribe: () => this.unsubscribe(id),
      pause: () => this.pauseFor(id),
      resume: () => this.resumeFor(id),
    });
    this.subscriptions.set(id, subscription);
    // While a handshake is under way, its end subscribes every subscription (this one too).
    if (this.socket !== null && this.welcomed === null) this.sendSubscribe(subscription);
    return subscription;
  }

  /** Closes the connection; pending publishes are rejected, subscriptions end. */
  async close(): Promise<void> {
    this.closedByUser = true;
    this.flushPublishes();
    const closed = new AriaError("ARIA_ERR_CONNECTION_LOST", "client closed");
    this.endConnection(closed);
    this.failAll(closed, true);
  }

  // ---- Connection --------------------------------------------------------------------------

  private async open(): Promise<void> {
    const link = { closed: false };
    this.link = link;
    this.opening = true;
    this.closingReason = null;
    try {
      this.decoder = new FrameDecoder();
      this.outQueue.length = 0;
      const welcomed = new Promise<void>((resolve, reject) => {
        this.welcomed = { resolve, reject };
      });
      welcomed.catch(() => {});
      let firstBytes = true;
      const handlers = {
        data: (bytes: Uint8Array) => {
          if (this.link !== link) return;
          if (firstBytes && this.dialTls === undefined && isTlsRecord(bytes)) {
            // A TLS server read our plain HELLO as a broken handshake and answered with an alert.
            this.protocolError(
              new AriaError(
                "ARIA_ERR_CONNECTION_LOST",
                `${this.host}:${this.port} answered with TLS: connect with tls://${hostForUrl(this.host)}:${this.port}`,
              ),
            );
            return;
          }
          firstBytes = false;
          this.received(bytes);
        },
        drain: () => {
          if (this.link === link) this.drain();
        },
        close: (error?: Error) => {
          link.closed = true;
          if (this.link === link) this.lost(error);
        },
      };
      const socket = await this.dial(this.host, this.port, handlers, { tls: this.dialTls });
      if (this.link !== link || link.closed) {
        // Closed while dialling (by the client or the peer): not this client's connection.
        socket.end();
        throw new AriaError(
          "ARIA_ERR_CONNECTION_LOST",
          `connection to ${this.host}:${this.port} closed while it opened`,
        );
      }
      this.socket = socket;
      encodeHello(this.writer, {
        version: PROTOCOL_VERSION,
        clientName: this.options.clientName ?? "aria-client",
        authToken: this.options.authToken ?? null,
      });
      this.send();
      await welcomed;
      if (this.link !== link)
        throw new AriaError(
          "ARIA_ERR_CONNECTION_LOST",
          `connection to ${this.host}:${this.port} lost`,
        );
      this.welcomedOnce = true;
      // Subscriptions whose queues are full keep the new connection from reading too.
      if (this.pausedBy.size > 0) socket.pause();
      for (const subscription of this.subscriptions.values()) this.sendSubscribe(subscription);
    } finally {
      this.opening = false;
    }
  }

  private lost(error?: Error): void {
    if (this.socket === null && this.closedByUser) return;
    this.socket = null;
    this.link = null;
    this.outQueue.length = 0;
    const why = error?.message ?? this.closingReason;
    this.closingReason = null;
    const reason = new AriaError(
      "ARIA_ERR_CONNECTION_LOST",
      `connection to ${this.host}:${this.port} lost${why ? `: ${why}` : ""}`,
    );
    this.welcomed?.reject(reason);
    this.welcomed = null;
    for (const pending of this.pending.values()) pending.reject(reason);
    this.pending.clear();
    /** An established connection dropped (not a handshake under way, not the user's close). */
    const wasUp = this.welcomedOnce && !this.opening && !this.closedByUser;
    if (this.closedByUser || this.options.reconnect === false) {
      if (wasUp) this.report({ kind: "disconnected", reason: reason.message, reconnecting: false });
      this.failAll(reason, false);
      return;
    }
    // A handshake under way (the first connect, or an attempt of the reconnect loop) fails
    // with this and is retried by its own caller: no second loop beside it.
    if (!wasUp) return;
    this.report({ kind: "disconnected", reason: reason.message, reconnecting: true });
    void this.reconnect(reason);
  }

  /** Hands `event` to the application's onConnectionEvent; its throw must not break the client. */
  private report(event: ConnectionEvent): void {
    try {
      this.options.onConnectionEvent?.(event);
    } catch {
      // the application's callback failed: the connection goes on regardless
    }
  }

  private async reconnect(reason: Error): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    let attempts = 0;
    try {
      let delay = this.options.reconnectDelayMs ?? 50;
      const attemptsMax = this.options.reconnectAttemptsMax ?? 20;
      while (attempts < attemptsMax && !this.closedByUser) {
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 2000);
        if (this.closedByUser) break;
        attempts++;
        try {
          await this.open();
          this.report({ kind: "reconnected", attempts });
          return;
        } catch {
          // try again
        }
      }
    } finally {
      this.reconnecting = false;
    }
    const closed = this.closedByUser;
    this.endConnection(reason);
    this.failAll(reason, false);
    if (!closed) this.report({ kind: "reconnect_failed", reason: reason.message, attempts });
  }

  /**
   * Ends the client's connection for good: no reconnect, its connection's events ignored from
   * now on, a handshake under way (a reconnect's) failed with `reason`.
   */
  private endConnection(reason: Error): void {
    this.closedByUser = true;
    this.link = null;
    const socket = this.socket;
    this.socket = null;
    socket?.end();
    this.welcomed?.reject(reason);
    this.welcomed = null;
  }

  private failAll(reason: Error, endQuietly: boolean): void {
    for (const queued of this.queued) queued.reject(reason);
    this.queued = [];
    for (const pending of this.pending.values()) pending.reject(reason);
    this.pending.clear();
    for (const subscription of this.subscriptions.values()) {
      if (endQuietly) subscription.end();
      else subscription.fail(reason);
    }
    this.subscriptions.clear();
  }

  private send(): void {
    const bytes = this.writer.bytes();
    if (bytes.length === 0) return;
    if (this.socket === null) {
      this.writer.reset();
      return;
    }
    const written = this.outQueue.length === 0 ? this.socket.write(bytes) : 0;
    if (written < bytes.length) this.outQueue.push(bytes.slice(written));
    this.writer.reset();
  }

  private drain(): void {
    while (this.outQueue.length > 0 && this.socket !== null) {
      const chunk = this.outQueue[0];
      const written = this.socket.write(chunk);
      if (written < chunk.length) {
        this.outQueue[0] = chunk.subarray(written);
        return;
      }
      this.outQueue.shift();
    }
  }

  // ---- Frames ------------------------------------------------------------------------------

  private received(bytes: Uint8Array): void {
    this.decoder.push(bytes);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next()) {
      if (frame.kind === "decode_error") {
        this.protocolError(new AriaError(frame.code, `server sent bad bytes: ${frame.reason}`));
        return;
      }
      this.handle(frame);
    }
  }

  private handle(frame: Frame): void {
    switch (frame.kind) {
      case "welcome": {
        // Limits below one would leave nothing to send (a publish batch of 0 messages looped for ever).
        const limits = frame.limits;
        if (Object.values(limits).some((limit) => !(limit >= 1))) {
          this.protocolError(
            new AriaError(
              "ARIA_ERR_MALFORMED_FRAME",
              `server announced a limit below 1: ${JSON.stringify(limits)}`,
            ),
          );
          return;
        }
        this.limits = limits;
        this.welcomed?.resolve();
        this.welcomed = null;
        return;
      }
      case "publish_ack": {
        const pending = this.pending.get(frame.requestId);
        this.pending.delete(frame.requestId);
        pending?.resolve({ firstSeq: frame.firstSeq, count: frame.count });
        return;
      }
      case "subscribed":
        this.subscriptions.get(frame.subscriptionId)?.subscribed(frame.firstSeq);
        return;
      case "data": {
        const subscription = this.subscriptions.get(frame.subscriptionId);
        if (subscription === undefined) return;
        subscription.pushFrame(frame.messages);
        return;
      }
      case "caught_up":
        this.subscriptions.get(frame.subscriptionId)?.caughtUp(frame.nextSeq);
        return;
      case "unsubscribed":
        return;
      case "ping":
        return;
      case "pong":
        return;
      case "error":
        return this.serverError(frame);
      default:
        this.protocolError(
          new AriaError("ARIA_ERR_UNEXPECTED_FRAME", `server sent a ${frame.kind} frame`),
        );
    }
  }

  private serverError(frame: ErrorFrame): void {
    // A code newer than this client: reported as INTERNAL, its number kept in the message.
    const error =
      frame.code === "ARIA_ERR_UNKNOWN"
        ? new AriaError("ARIA_ERR_INTERNAL", `server error code ${frame.wireCode}: ${frame.reason}`)
        : new AriaError(frame.code, frame.reason);
    if (frame.relatedKind === "request") {
      const pending = this.pending.get(frame.relatedId);
      this.pending.delete(frame.relatedId);
      pending?.reject(error);
    } else if (frame.relatedKind === "subscription") {
      const subscription = this.subscriptions.get(frame.relatedId);
      this.subscriptions.delete(frame.relatedId);
      subscription?.fail(error);
    }
    if (frame.fatal && frame.code === "ARIA_ERR_SHUTTING_DOWN") {
      // The server closes and may come back (a restart): its close leads to the reconnects,
      // and a handshake under way fails with this (its caller retries or reports it).
      this.closingReason = error.message;
      this.welcomed?.reject(error);
      this.welcomed = null;
    } else if (frame.fatal) {
      // The server will close; don't reconnect into the same refusal.
      this.closedByUser = true;
      this.fatalError = error;
      this.welcomed?.reject(error);
      this.failAll(error, false);
    }
  }

  private protocolError(error: AriaError): void {
    this.endConnection(error);
    this.failAll(error, false);
  }

  // ---- Publishing and subscribing ------------------------------------------------------------

  private checkMessage(
    topic: string,
    payload: Uint8Array,
    properties?: Uint8Array,
  ): AriaError | null {
    const reason = validateTopic(topic);
    if (reason !== null) return new AriaError("ARIA_ERR_INVALID_TOPIC", reason);
    if (properties !== undefined && properties.length > PROPERTIES_BYTES_MAX)
      return new AriaError(
        "ARIA_ERR_PROPERTIES_TOO_LARGE",
        `properties are ${properties.length} bytes, more than the limit of ${PROPERTIES_BYTES_MAX}`,
      );
    const max = this.limits?.payloadBytesMax ?? PAYLOAD_BYTES_MAX;
    if (payload.length > max)
      return new AriaError(
        "ARIA_ERR_PAYLOAD_TOO_LARGE",
        `payload is ${payload.length} bytes, more than the limit of ${max}`,
      );
    if (this.closedByUser)
      return this.fatalError ?? new AriaError("ARIA_ERR_CONNECTION_LOST", "client closed");
    return null;
  }

  /** Sends every queued publish, as few PUBLISH frames as the limits allow. */
  private flushPublishes(): void {
    this.flushScheduled = false;
    if (this.queued.length === 0) return;
    if (this.socket === null || this.welcomed !== null) {
      // Not connected yet (or reconnecting): try again shortly.
      if (!this.closedByUser) setTimeout(() => this.flushPublishes(), 10);
      return;
    }
    const queued = this.queued;
    this.queued = [];
    this.sendPublishFrames(
      queued,
      (i) => queued[i].payload,
      (requestId, start, end) => {
        const batch = queued.slice(start, end);
        this.pending.set(requestId, {
          resolve: (result) => {
            for (const [i, m] of batch.entries()) m.resolve(result.firstSeq + i);
          },
          reject: (error) => {
            for (const m of batch) m.reject(error);
          },
        });
      },
    );
  }

  /**
   * Encodes `messages` (payload i is `payloadOf(i)`) into as few PUBLISH frames as the limits
   * allow, calls `framed` with each frame's request id and message range, then sends them.
   */
  private sendPublishFrames(
    messages: readonly { topic: string; properties?: Uint8Array }[],
    payloadOf: (i: number) => Uint8Array,
    framed: (requestId: number, start: number, end: number) => void,
  ): void {
    const batchMax = this.limits?.publishBatchMessagesMax ?? PUBLISH_BATCH_MESSAGES_MAX;
    // The flag PROPERTIES only when a message has some: without, the frames are v1's.
    let withProperties = false;
    for (let i = 0; i < messages.length && !withProperties; i++)
      withProperties = (messages[i].properties?.length ?? 0) > 0;
    let start = 0;
    while (start < messages.length) {
      const requestId = this.nextRequestId++;
      this.writer.beginPublish(requestId, withProperties);
      let end = start;
      while (end < messages.length && end - start < batchMax) {
        const topic = messages[end].topic;
        const payload = payloadOf(end);
        const properties = messages[end].properties;
        const propertiesBytes = properties?.length ?? 0;
        if (
          end > start &&
          !this.writer.publishMessageFits(topic.length, payload.length, propertiesBytes)
        )
          break;
        this.writer.addPublishMessageText(topic, payload, properties);
        end++;
      }
      this.writer.endPublish();
      framed(requestId, start, end);
      start = end;
    }
    this.send();
  }

  private sendSubscribe(subscription: ClientSubscription): void {
    const start: StartPosition = subscription.resumeStart();
    subscription.startSent = start;
    encodeSubscribe(this.writer, {
      subscriptionId: subscription.id,
      start,
      filter: subscription.filter,
      properties: subscription.wantsProperties,
      durable: subscription.durable,
      shared: subscription.shared,
    });
    this.send();
  }

  private sendAck(id: number, seq: number): void {
    if (this.socket === null || this.welcomed !== null || !this.subscriptions.has(id)) return;
    encodeAck(this.writer, { subscriptionId: id, seq });
    this.send();
  }

  private unsubscribe(id: number): void {
    if (!this.subscriptions.delete(id)) return;
    this.resumeFor(id);
    if (this.socket === null) return;
    encodeUnsubscribe(this.writer, { subscriptionId: id });
    this.send();
  }

  private pauseFor(id: number): void {
    if (this.pausedBy.size === 0) this.socket?.pause();
    this.pausedBy.add(id);
  }

  private resumeFor(id: number): void {
    if (!this.pausedBy.delete(id)) return;
    if (this.pausedBy.size === 0) this.socket?.resume();
  }
}
