/**
 * MqttSession: one MQTT connection, bridged onto one broker session (native_link.ts). MQTT packets
 * in (bytes, any split) become native frames; native frames out (WELCOME, PUBLISH_ACK, SUBSCRIBED,
 * DATA, ERROR) become MQTT packets. Pure: bytes, and the time each event happens, come in as
 * arguments; the socket and the broker are ports.
 *
 *   client ─bytes─▶ MqttDecoder ─packet─▶ handle ─frame─▶ NativeLink ─▶ broker
 *   client ◀─packet── SessionOutput ◀─ OutboundFlights ◀─ DATA, PUBLISH_ACK … ◀─┘
 *
 * QoS: an inbound QoS 1 PUBLISH is PUBACKed, a QoS 2 one PUBRECed, once the broker acknowledged
 * it (durable under the fsync policy); a QoS 2 packet id is published once until its PUBREL. An
 * outbound message goes at the lower of its publish QoS (`aria-qos`, stored_properties.ts) and its
 * subscription's, inside the client's window (Receive Maximum); what waits for the window is held,
 * bounded, and past MQTT_HELD_BYTES_MAX the link takes no more DATA, so the broker stalls the
 * subscriptions.
 *
 * Positions: each subscription knows the first seq its client has not processed (acked, or
 * written at QoS 0): a session kept after the connection (session expiry) resubscribes from
 * there, so a client away misses nothing the log still holds.
 *
 * Persistence: a persistent session tells its door when its state changes (`changed`); the door
 * writes `persisted()` in the consumers file's next batch (session_state.ts). A session restored
 * after a restart sends its flights again, DUP with their packet ids, as their seqs come again.
 *
 * It owns the connection's life (CONNECT, sign-in, takeover, DISCONNECT, the will and keep
 * alive), the batches, and DATA (what each message of a subscription becomes for its client).
 * Beside it, each owning one part and called by it only (none imports mqtt_session.ts at run
 * time): its types (session_types.ts), pure helpers and reason codes (session_codes.ts), the
 * client's PUBLISHes and topic aliases in (inbound_publishes.ts), SUBSCRIBE/UNSUBSCRIBE, SUBACK
 * and the positions ACKed (session_subscriptions.ts), messages out held for the window and in
 * flight (outbound_flights.ts), retained messages being read (retained_reads.ts), the packets'
 * way to the socket (session_output.ts), and what it leaves behind, persisted or in memory
 * (session_snapshot.ts).
 *
 * Invariants: one CONNECT; nothing but CONNECT before it; nothing is sent once the socket is
 * gone; the parts' own invariants are in their headers.
 */
import type { Connection } from "../broker/ports.ts";
import { AUTH_TOKEN_BYTES_MAX, CLIENT_NAME_BYTES_MAX } from "../constants.ts";
import type { MessageBatch } from "../protocol/mod.ts";
import { MqttDecoder } from "./codec.ts";
import {
  MQTT_EARLY_BYTES_MAX,
  MQTT_EARLY_PACKETS_MAX,
  MQTT_HELD_BYTES_MAX,
  MQTT_KEEP_ALIVE_GRACE,
  MQTT_PACKET_BYTES_MAX,
  MQTT_RECEIVE_MAXIMUM,
  MQTT_SERVER_KEEP_ALIVE_MAX_S,
  MQTT_TOPIC_ALIASES_MAX,
  MQTT_WILL_ACK_TIMEOUT_US,
} from "./mqtt_limits.ts";
import { type NativeError, type NativeEvents, NativeLink } from "./native_link.ts";
import { type AckType, InboundPublishes } from "./inbound_publishes.ts";
import { OutboundFlights } from "./outbound_flights.ts";
import { RetainedReads, retainedOutgoing } from "./retained_reads.ts";
import { SessionSubscriptions } from "./session_subscriptions.ts";
import { SessionOutput } from "./session_output.ts";
import {
  persistedSession,
  persistedWill as persistedWillOf,
  type SessionView,
  storedSession,
} from "./session_snapshot.ts";
import type { PersistedSession, PersistedWill } from "./session_state.ts";
import { ClientOrigin, decodeStoredProperties } from "./stored_properties.ts";
import {
  type ConnectPacket,
  type Packet,
  type Properties,
  type ProtocolVersion,
  type QoS,
  REASON,
  type Will,
} from "./packets.ts";
import {
  connackOfError,
  cutUtf8,
  expiryLeft,
  NATIVE,
  nativeLimitProblem,
  PUBLISH_ACK_FAILURES,
  reasonOfError,
  UTF8,
} from "./session_codes.ts";
import {
  type Phase,
  type RetainedMessage,
  SESSION_EXPIRY_NEVER,
  type SessionDoor,
  type StoredSession,
  type SubscriptionState,
} from "./session_types.ts";

export {
  type RetainedEntry,
  type RetainedMessage,
  type RetainedSource,
  SESSION_EXPIRY_NEVER,
  type SavedFlight,
  type SavedSubscription,
  type SentMessage,
  type SessionDoor,
  type StoredSession,
} from "./session_types.ts";

/** One MQTT connection bridged onto the broker. */
export class MqttSession implements NativeEvents {
  phase: Phase = "awaiting_connect";
  clientId = "";
  protocolVersion: ProtocolVersion = 4;
  /** Last time (µs) bytes came from the client. */
  lastInputUs: number;
  /** Keep alive in force, seconds (0: none). */
  keepAliveS = 0;
  /** Session expiry in force, seconds. */
  sessionExpiryS = 0;
  /** The will still to publish, and when (µs); null: none. */
  will: Will | null = null;
  willDueUs = -1;
  /** Set once the socket is gone: the session lives on only to publish its will. */
  socketGone = false;
  /** When the session started closing its socket (µs), or -1. */
  closingSinceUs = -1;
  readonly link: NativeLink;
  private readonly decoder = new MqttDecoder({
    role: "server",
    packetBytesMax: MQTT_PACKET_BYTES_MAX,
  });
  private readonly early: Packet[] = [];
  private earlyBytes = 0;
  private earlyPaused = false;
  private connect: ConnectPacket | null = null;

  /** Who signed in: the CONNECT's user name and the TLS certificate's subject. */
  get signedInAs(): string {
    return JSON.stringify([this.connect?.username ?? "", this.socket.peerSubject ?? ""]);
  }
  private closing = false;
  private paused = false;
  // Output to the client.
  private readonly output: SessionOutput;
  /** Nesting of batchStart/receive: above 0, packets gather in the output's queue. */
  private corked = 0;
  private problemInformation = true;
  // Inbound publishes.
  private readonly inbound: InboundPublishes;
  /** The client id's origin (stored with each message it publishes): No Local compares it. */
  private origin = new ClientOrigin("");
  // Subscriptions and outbound messages.
  private readonly subs: SessionSubscriptions;
  /** Its messages to the client: held for the window, and in flight. */
  private readonly outbound: OutboundFlights;
  /** The retained messages its subscriptions are owed, being read. */
  private readonly retainedReads: RetainedReads;

  constructor(
    private readonly door: SessionDoor,
    private readonly socket: Connection,
    nowUs: number,
  ) {
    this.lastInputUs = nowUs;
    this.output = new SessionOutput(socket);
    this.retainedReads = new RetainedReads(door, {
      clientId: () => this.clientId,
      stopped: () => this.closing,
      isOpen: (state) => this.subs.byNativeId.get(state.nativeId) === state,
      hasRoom: () => this.accepting && this.outbound.heldCount < this.outbound.window,
      deliver: (state, beforeSeq, messages) => this.deliverRetained(state, beforeSeq, messages),
    });
    this.link = new NativeLink(
      door.broker,
      this,
      { remoteAddress: socket.remoteAddress, peerSubject: () => socket.peerSubject },
      door.scheduler,
    );
    this.outbound = new OutboundFlights(door, {
      version: () => this.protocolVersion,
      closing: () => this.closing,
      subscribed: (state) => this.subs.byNativeId.has(state.nativeId),
      send: (packet) => this.send(packet),
      ack: (type, packetId, reasonCode, reason) => this.ack(type, packetId, reasonCode, reason),
      disconnect: (reasonCode, reason) => this.disconnect(reasonCode, reason),
      changed: (lazy) => this.changed(lazy),
      progress: (state) => this.subs.progress(state),
      pumped: () => {
        for (const state of this.subs.byNativeId.values()) this.subs.progress(state);
        this.retainedReads.more();
      },
      accepting: () => this.accepting,
      drained: () => this.link.drained(),
    });
    this.subs = new SessionSubscriptions(door, this.link, this.retainedReads, this.outbound, {
      clientId: () => this.clientId,
      persistent: () => this.sessionExpiryS !== 0,
      corked: () => this.corked > 0,
      send: (packet) => this.send(packet),
      problem: (reason) => this.problem(reason),
      changed: () => this.changed(),
    });
    this.inbound = new InboundPublishes(door, this.link, {
      version: () => this.protocolVersion,
      origin: () => this.origin,
      persistent: () => this.sessionExpiryS !== 0,
      clientId: () => this.clientId,
      ack: (type, packetId, reasonCode, reason) => this.ack(type, packetId, reasonCode, reason),
      disconnect: (reasonCode, reason) => this.disconnect(reasonCode, reason),
      changed: () => this.changed(),
      willDone: () => this.willDone(),
    });
    this.link.open();
  }

  // ---- Client side: bytes in ---------------------------------------------------------------

  /** Bytes arrived from the client at `nowUs`. */
  receive(bytes: Uint8Array, nowUs: number): void {
    if (this.closing || this.phase === "closed") return;
    this.lastInputUs = nowUs;
    this.decoder.push(bytes);
    this.batchStart();
    try {
      this.receivePackets(nowUs);
    } finally {
      this.batchEnd();
    }
  }

  private receivePackets(nowUs: number): void {
    for (let result = this.decoder.next(); result !== null; result = this.decoder.next()) {
      if (!result.ok) {
        const error = result.error;
        if (error.protocolVersion !== null) this.protocolVersion = error.protocolVersion;
        if (this.phase === "awaiting_connect") {
          // 3.1.1 answers a bad CONNECT with a CONNACK only for its version or client id
          // (3.1.1 3.2.2.3); otherwise, as before any known version, the connection closes.
          const silent =
            error.protocolVersion === null ||
            (error.protocolVersion === 4 &&
              error.reasonCode !== REASON.UNSUPPORTED_PROTOCOL_VERSION &&
              error.reasonCode !== REASON.CLIENT_IDENTIFIER_NOT_VALID);
          this.refuseConnect(error.reasonCode, error.reason, silent);
        } else this.disconnect(error.reasonCode, error.reason);
        return;
      }
      if (this.phase === "signing_in") {
        if (this.early.length >= MQTT_EARLY_PACKETS_MAX)
          return this.disconnect(
            REASON.RECEIVE_MAXIMUM_EXCEEDED,
            "too many packets before CONNACK",
          );
        this.early.push(result.packet);
        this.earlyBytes +=
          result.packet.type === "publish"
            ? result.packet.payload.length + result.packet.topic.length
            : 64;
        // Held past the bound: the client is not read until CONNACK (what was read is held).
        if (this.earlyBytes > MQTT_EARLY_BYTES_MAX && !this.earlyPaused) {
          this.earlyPaused = true;
          this.socket.pause?.();
        }
      } else this.handle(result.packet, nowUs);
      if (this.closing) return;
    }
  }

  private handle(packet: Packet, nowUs: number): void {
    switch (packet.type) {
      case "connect":
        return this.onConnect(packet, nowUs);
      case "publish":
        return this.inbound.publish(packet);
      case "puback":
      case "pubrec":
      case "pubcomp":
        return this.outbound.deliveryAck(packet.type, packet.packetId, packet.reasonCode);
      case "pubrel":
        return this.inbound.released(packet.packetId);
      case "subscribe":
        return this.subs.subscribe(packet, nowUs);
      case "unsubscribe":
        return this.subs.unsubscribe(packet);
      case "pingreq":
        this.send({ type: "pingresp" });
        return;
      case "disconnect":
        return this.onDisconnect(packet.reasonCode, packet.properties);
      case "auth":
        return this.disconnect(REASON.PROTOCOL_ERROR, "AUTH without an authentication method");
      default:
        return this.disconnect(REASON.PROTOCOL_ERROR, `${packet.type} is not sent by clients`);
    }
  }

  // ---- CONNECT -----------------------------------------------------------------------------

  private onConnect(packet: ConnectPacket, nowUs: number): void {
    this.protocolVersion = packet.protocolVersion;
    const v5 = packet.protocolVersion === 5;
    const props = packet.properties;
    if (props.authenticationMethod !== undefined)
      return this.refuseConnect(REASON.BAD_AUTHENTICATION_METHOD, "no extended authentication");
    let clientId = packet.clientId;
    let assigned = false;
    if (clientId === "") {
      if (!v5 && !packet.cleanStart)
        return this.refuseConnect(
          REASON.CLIENT_IDENTIFIER_NOT_VALID,
          "an empty client id needs clean session",
        );
      clientId = this.door.assignClientId();
      assigned = true;
    }
    this.connect = packet;
    this.clientId = clientId;
    this.origin = new ClientOrigin(clientId);
    this.keepAliveS = packet.keepAlive;
    this.sessionExpiryS = v5
      ? (props.sessionExpiryInterval ?? 0)
      : packet.cleanStart
        ? 0
        : SESSION_EXPIRY_NEVER;
    if (v5) {
      this.outbound.window = props.receiveMaximum ?? 65_535;
      this.output.packetBytesMax = Math.min(
        props.maximumPacketSize ?? MQTT_PACKET_BYTES_MAX,
        MQTT_PACKET_BYTES_MAX,
      );
      this.problemInformation = props.requestProblemInformation !== false;
    }
    this.will = packet.will ?? null;
    if (this.will !== null) {
      // A will the server could not publish is refused now, not dropped later.
      const mapped = this.door.mapping.topicToAria(this.will.topic);
      if (!mapped.ok) return this.refuseConnect(REASON.TOPIC_NAME_INVALID, mapped.reason);
      const will = this.will;
      const properties = this.origin.encode(will.properties, will.qos, will.retain);
      const tooLarge = nativeLimitProblem(this.will.payload, properties);
      if (tooLarge !== null) return this.refuseConnect(REASON.PACKET_TOO_LARGE, tooLarge);
    }
    this.phase = "signing_in";
    this.lastInputUs = nowUs;
    const password = packet.password === undefined ? "" : new TextDecoder().decode(packet.password);
    const username = packet.username ?? "";
    // A user's credential is NAME:SECRET; a server's one --auth-token comes alone, as the
    // password (MQTT 5) or as the user name (3.1.1 allows no password without a user name).
    const token =
      username === ""
        ? password === ""
          ? null
          : password
        : password === ""
          ? username
          : `${username}:${password}`;
    if (token !== null && UTF8.encode(token).length > AUTH_TOKEN_BYTES_MAX)
      return this.refuseConnect(
        REASON.BAD_USER_NAME_OR_PASSWORD,
        `the credential is longer than ${AUTH_TOKEN_BYTES_MAX} bytes`,
      );
    this.assignedClientId = assigned;
    this.credentialSent = token !== null;
    // The client id names the broker session in logs: its first CLIENT_NAME_BYTES_MAX bytes.
    this.link.hello(cutUtf8(clientId, CLIENT_NAME_BYTES_MAX), token);
  }

  private assignedClientId = false;
  /** Whether CONNECT carried a user name or password (a refusal without one: not authorized). */
  private credentialSent = false;

  /** WELCOME: the broker signed the client in. */
  welcome(_nextSeq: number): void {
    if (this.phase !== "signing_in" || this.connect === null) return;
    const packet = this.connect;
    const claimed = this.door.claim(this, this.clientId, packet.cleanStart);
    if (claimed === "full")
      return this.refuseConnect(REASON.QUOTA_EXCEEDED, "the server holds the most sessions");
    this.phase = "connected";
    const properties: Properties = {};
    if (this.protocolVersion === 5) {
      properties.receiveMaximum = MQTT_RECEIVE_MAXIMUM;
      properties.maximumPacketSize = MQTT_PACKET_BYTES_MAX;
      properties.topicAliasMaximum = MQTT_TOPIC_ALIASES_MAX;
      // Retain, wildcard subscriptions and subscription identifiers are available, which their
      // absence says: a client with a small Maximum Packet Size still gets the limits above.
      if (!this.door.durableSessions) properties.sharedSubscriptionAvailable = false;
      if (this.assignedClientId) properties.assignedClientIdentifier = this.clientId;
      if (this.keepAliveS === 0 || this.keepAliveS > MQTT_SERVER_KEEP_ALIVE_MAX_S) {
        this.keepAliveS = MQTT_SERVER_KEEP_ALIVE_MAX_S;
        properties.serverKeepAlive = MQTT_SERVER_KEEP_ALIVE_MAX_S;
      }
    }
    this.send({
      type: "connack",
      // MQTT 3.1's CONNACK has no session present flag (its first byte is reserved).
      sessionPresent: claimed !== null && packet.mqtt31 !== true,
      reasonCode: REASON.SUCCESS,
      properties,
    });
    if (claimed !== null) for (const saved of claimed.subscriptions) this.subs.resubscribe(saved);
    if (claimed?.inflight !== undefined)
      this.outbound.resend(claimed.inflight, (filter) => this.subs.byFilter.get(filter));
    this.outbound.resendPubrels(claimed?.pubrelIds ?? []);
    // The QoS 2 ids the last connection received: a resent PUBLISH gets PUBREC, not a publish.
    // (One still being stored then is stored by the old link, which ends after it.)
    this.inbound.restore(claimed?.qos2Received ?? []);
    // The state record: written (persistent), or removed (clean start, no expiry).
    this.door.sessionChanged(this);
    // Packets sent behind CONNECT waited for its answer.
    while (this.early.length > 0 && !this.closing)
      this.handle(this.early.shift() as Packet, this.lastInputUs);
    this.earlyBytes = 0;
    if (this.earlyPaused) {
      this.earlyPaused = false;
      if (!this.paused) this.socket.resume?.();
    }
  }

  /** CONNACK with a failure (or a plain close before the version is known), then close. */
  private refuseConnect(reasonCode: number, reason: string, silent = false): void {
    // `silent`: no CONNACK, but for a protocol version the server does not speak.
    if (!silent || reasonCode === REASON.UNSUPPORTED_PROTOCOL_VERSION) {
      const properties: Properties = this.protocolVersion === 5 ? { reasonString: reason } : {};
      this.send({ type: "connack", sessionPresent: false, reasonCode, properties });
    }
    this.door.log?.info("mqtt connection refused", { reason, reasonCode });
    this.will = null;
    this.closeSocket();
  }

  // ---- Inbound PUBLISH ---------------------------------------------------------------------

  /** PUBLISH_ACK: the message is durable; QoS 1 gets PUBACK, QoS 2 PUBREC. */
  publishAck(requestId: number, _firstSeq: number): void {
    this.inbound.acked(requestId);
  }

  /** PUBACK, PUBREC, PUBREL or PUBCOMP; a failure PUBACK/PUBREC cannot carry becomes 0x80. */
  private ack(type: AckType, packetId: number, reasonCode: number, reason?: string): void {
    // PUBREL and PUBCOMP fail only with 0x92 (packet identifier not found).
    const failures =
      type === "puback" || type === "pubrec"
        ? PUBLISH_ACK_FAILURES
        : new Set<number>([REASON.PACKET_IDENTIFIER_NOT_FOUND]);
    const allowed = reasonCode < 0x80 || failures.has(reasonCode);
    const code = allowed ? reasonCode : REASON.UNSPECIFIED_ERROR;
    this.send({ type, packetId, reasonCode: code, properties: this.problem(reason) });
  }

  // ---- SUBSCRIBE / UNSUBSCRIBE (session_subscriptions.ts) -----------------------------------

  /** SUBSCRIBED: a filter of a SUBSCRIBE is granted. */
  subscribed(subscriptionId: number, firstSeq: number): void {
    this.subs.subscribed(subscriptionId, firstSeq);
  }

  /** A batch of retained messages read: held, then sent as the window allows. */
  private deliverRetained(
    state: SubscriptionState,
    beforeSeq: number,
    messages: readonly RetainedMessage[],
  ): void {
    if (this.closing || this.subs.byNativeId.get(state.nativeId) !== state) return;
    const mapping = this.door.mapping;
    const origin = this.origin;
    const nowUs = this.door.nowUs();
    for (const message of retainedOutgoing(state, beforeSeq, messages, mapping, origin, nowUs))
      this.outbound.hold(message);
    const wasAccepting = this.accepting;
    this.outbound.pump();
    if (!wasAccepting && this.accepting) this.link.drained();
  }

  // ---- Outbound messages -------------------------------------------------------------------

  /**
   * True while the session takes more from the broker: room on the socket and for held messages.
   * A closing session takes everything (it delivers nothing more, but waits for its will's ack).
   */
  get accepting(): boolean {
    return (
      this.closing ||
      (this.output.queuedBytes < MQTT_HELD_BYTES_MAX &&
        this.outbound.heldBytes < MQTT_HELD_BYTES_MAX)
    );
  }

  /**
   * DATA: each message goes to the client at the lower of its publish QoS and its subscription's
   * [MQTT-3.8.4-8], with its retain flag if the subscription has Retain As Published.
   */
  data(subscriptionId: number, messages: MessageBatch): void {
    const state = this.subs.byNativeId.get(subscriptionId);
    if (state === undefined) return;
    const mapping = this.door.mapping;
    const nowUs = this.door.nowUs();
    while (messages.next()) {
      const seq = messages.seq;
      // A shared member may get a lower seq again (a leaver's messages): positions only grow.
      if (seq + 1 > state.positionSeq) state.positionSeq = seq + 1;
      if (seq > state.lastDataSeq) state.lastDataSeq = seq;
      if (state.shared) state.delivered.push(seq);
      // A resumed session: what its client processed, or has in flight again, does not come again.
      if (seq < state.skipBelow && !state.again.delete(seq)) continue;
      const topic = mapping.topicFromAria(messages.topic);
      if (state.dollarExcluded && mapping.isDollarTopic(topic)) continue;
      // No Local: not the messages this client id published, on any connection [MQTT-3.8.3-3].
      if (
        state.options.noLocal &&
        messages.hasProperties &&
        this.origin.published(messages.properties)
      )
        continue;
      const stored = messages.hasProperties ? decodeStoredProperties(messages.properties) : NATIVE;
      const properties = stored === NATIVE ? {} : stored.properties;
      // Expired messages are skipped; others carry what is left of their interval.
      if (!expiryLeft(properties, messages.timeUs, nowUs)) continue;
      const qos = Math.min(stored.qos, state.options.qos) as QoS;
      const retainFlag = stored.retain && state.options.retainAsPublished;
      const restored = state.restored?.get(seq);
      if (restored !== undefined) {
        const payload = messages.payload.slice();
        const message = { seq, topic, payload, properties, qos: restored.qos, retainFlag };
        this.outbound.resendRestored(state, restored, { ...message, retain: false });
        continue;
      }
      if (qos === 0 && this.outbound.heldCount === 0) {
        const payload = messages.payload;
        const message = { seq, topic, payload, properties, qos, retain: false, retainFlag };
        this.outbound.sendMessage(state, message, 0);
        continue;
      }
      state.unprocessed.add(seq);
      const payload = messages.payload.slice();
      const bytes = payload.length + topic.length + messages.propertiesBytes;
      this.outbound.hold({
        subscription: state,
        seq,
        topic,
        payload,
        properties,
        qos,
        bytes,
        retain: false,
        retainFlag,
      });
    }
    if (state.restored !== undefined) this.outbound.sweepRestored(state, state.positionSeq);
    this.outbound.pump();
    this.subs.progress(state);
  }

  caughtUp(subscriptionId: number, nextSeq: number): void {
    const state = this.subs.byNativeId.get(subscriptionId);
    if (state !== undefined && nextSeq > state.positionSeq) state.positionSeq = nextSeq;
    if (state?.restored !== undefined) this.outbound.sweepRestored(state, state.positionSeq);
  }

  unsubscribed(_subscriptionId: number): void {}

  // ---- Errors and the end ------------------------------------------------------------------

  /** ERROR from the broker. */
  error(error: NativeError): void {
    if (this.phase === "signing_in" && error.fatal) {
      return this.refuseConnect(connackOfError(error.code, this.credentialSent), error.reason);
    }
    if (error.relatedKind === "request") {
      this.inbound.refused(error.relatedId, error);
    } else if (error.relatedKind === "subscription") this.subs.failed(error.relatedId, error);
    if (error.fatal)
      this.disconnect(
        error.code === "ARIA_ERR_SHUTTING_DOWN"
          ? REASON.SERVER_SHUTTING_DOWN
          : reasonOfError(error.code),
        error.reason,
      );
  }

  /** The broker closed its session: the MQTT connection ends too. */
  closed(): void {
    if (this.socketGone) {
      this.phase = "closed";
      return;
    }
    if (!this.closing) this.disconnect(REASON.SERVER_UNAVAILABLE, "the server ended the session");
  }

  pause(): void {
    this.paused = true;
    this.socket.pause?.();
  }

  resume(): void {
    this.paused = false;
    if (!this.earlyPaused) this.socket.resume?.();
  }

  private onDisconnect(reasonCode: number, properties: Properties): void {
    const expiry = properties.sessionExpiryInterval;
    if (expiry !== undefined) {
      if (this.sessionExpiryS === 0 && expiry !== 0) {
        return this.disconnect(REASON.PROTOCOL_ERROR, "session expiry set at DISCONNECT after 0");
      }
      this.sessionExpiryS = expiry;
    }
    // A normal disconnection discards the will; 0x04 asks for it.
    if (reasonCode !== REASON.DISCONNECT_WITH_WILL_MESSAGE) this.will = null;
    this.closeSocket();
  }

  /** DISCONNECT with a reason (MQTT 5; a 3.1.1 connection is closed), then close. */
  disconnect(reasonCode: number, reason: string): void {
    if (this.closing) return;
    if (this.phase === "connected" && this.protocolVersion === 5)
      this.send({ type: "disconnect", reasonCode, properties: this.problem(reason, true) });
    this.door.log?.info("mqtt connection ended", { client: this.clientId, reason, reasonCode });
    this.closeSocket();
  }

  /** Taken over by a newer connection of the same client id. */
  takenOver(): void {
    this.disconnect(REASON.SESSION_TAKEN_OVER, "another connection took the session over");
  }

  /** Starts closing: what is written goes out, then the socket closes. */
  private closeSocket(): void {
    if (this.closing) return;
    this.closing = true;
    this.finish();
    if (this.output.queuedBytes === 0) this.socket.close();
  }

  /** A batch begins: packets gather (one socket write) and frames to the broker too. */
  batchStart(): void {
    if (this.corked++ === 0) this.link.cork();
  }

  /** A batch ends: what gathered goes out in one write (unless the socket is full). */
  batchEnd(): void {
    if (this.corked > 1) {
      this.corked--;
      return;
    }
    this.subs.settle();
    this.corked = 0;
    if (this.lazyChange) {
      this.lazyChange = false;
      this.changed(true);
    }
    this.link.uncork();
    const output = this.output;
    if (output.blocked || this.socketGone || output.queue.length === 0) return;
    output.flush();
    if (output.queue.length === 0 && this.closing) this.socket.close();
  }

  /** The socket can take more: queued packets go out; the link takes DATA again. */
  writable(): void {
    this.output.blocked = false;
    this.output.flush();
    if (this.output.queue.length > 0) return;
    if (this.closing) {
      this.socket.close();
      return;
    }
    if (this.accepting) this.link.drained();
    this.retainedReads.more();
  }

  /** The socket closed (either side). */
  socketClosed(nowUs: number): void {
    this.socketGone = true;
    this.closing = true;
    this.finish();
    if (this.will !== null && this.willDueUs < 0) {
      const delayS = this.will.properties.willDelayInterval ?? 0;
      this.willDueUs = nowUs + Math.min(delayS, this.sessionExpiryS) * 1e6;
      if (this.willDueUs > nowUs) this.door.sessionChanged(this);
    }
    if (this.will === null) this.endLink();
  }

  /** Publishes the will once due (door's timer); true while the session still waits for it. */
  tick(nowUs: number): void {
    if (this.will !== null && this.willDueUs >= 0 && nowUs >= this.willDueUs) {
      this.willSentUs = nowUs;
      this.publishWill();
    } else if (this.willSentUs >= 0 && nowUs - this.willSentUs > MQTT_WILL_ACK_TIMEOUT_US) {
      // A will whose publish is not acknowledged in time does not hold the slot for ever.
      this.endLink();
    }
  }

  /** When the will was handed to the broker (µs), or -1. */
  private willSentUs = -1;

  /** The will must not be sent (the session was resumed in time): the link ends. */
  cancelWill(): void {
    this.will = null;
    if (this.socketGone) this.door.sessionChanged(this);
    if (this.socketGone) this.endLink();
  }

  /** Sends the will now (a takeover), if there is one. */
  publishWill(): void {
    const will = this.will;
    if (will === null) return;
    this.will = null;
    this.willDueUs = -1;
    if (this.socketGone) this.door.sessionChanged(this);
    const mapped = this.door.mapping.topicToAria(will.topic);
    if (!mapped.ok || this.phase !== "connected" || this.link.ended) return this.willDone();
    this.inbound.publishWill(will, mapped.topic);
  }

  private willDone(): void {
    if (this.socketGone) this.endLink();
  }

  private endLink(): void {
    this.phase = "closed";
    if (!this.link.ended) this.link.end();
  }

  /** True once nothing is left of this session (its link ended). */
  get done(): boolean {
    return this.phase === "closed" && this.link.ended;
  }

  /**
   * A persistent session's state changed: the door writes it in the next batch (`lazy`: a flight
   * sent or acknowledged, within the store's interval; a crash may lose the last interval's).
   */
  private changed(lazy = false): void {
    if (this.sessionExpiryS === 0 || this.phase !== "connected") return;
    // In a batch, lazy changes are told once, at its end (one call per batch, not per message).
    if (lazy && this.corked > 0) this.lazyChange = true;
    else this.door.sessionChanged(this, lazy);
  }

  /** A lazy change of the current batch, told at its end. */
  private lazyChange = false;

  /** The durable state of this connected session (session_state.ts), as of now. */
  persisted(nowUs: number): PersistedSession {
    return persistedSession(this.view(), nowUs);
  }

  /** The will still to publish, as the state keeps it (null: none). */
  persistedWill(): PersistedWill | null {
    return persistedWillOf(this.will, this.willDueUs, this.origin);
  }

  /** The state its snapshots read (session_snapshot.ts). */
  private view(): SessionView {
    return {
      clientId: this.clientId,
      signedInAs: this.signedInAs,
      sessionExpiryS: this.sessionExpiryS,
      lastInputUs: this.lastInputUs,
      socketGone: this.socketGone,
      will: this.will,
      willDueUs: this.willDueUs,
      origin: this.origin,
      inflight: this.outbound.inflight,
      subscriptions: this.subs.byFilter,
      byNativeId: this.subs.byNativeId,
      qos2Received: this.inbound.qos2Received,
    };
  }

  /** Once, at the connection's end: native subscriptions end; the session is kept or not. */
  private finished = false;
  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.subs.settle();
    let stored: StoredSession | null = null;
    if (this.phase === "connected" && this.sessionExpiryS > 0) stored = storedSession(this.view());
    this.subs.endAll(stored !== null);
    this.retainedReads.clear();
    this.outbound.clearHeld();
    if (this.phase === "connected") this.door.released(this, stored);
    if (this.phase !== "connected") this.will = null;
  }

  // ---- Output ------------------------------------------------------------------------------

  /** Encodes and writes a packet; false when it was larger than the client accepts (skipped). */
  private send(packet: Packet): boolean {
    if (this.socketGone) return false;
    return this.output.send(packet, this.protocolVersion, this.corked > 0);
  }

  /** A reason string, when the client did not refuse problem information (MQTT 5 only). */
  private problem(reason: string | undefined, always = false): Properties {
    if (reason === undefined || this.protocolVersion !== 5) return {};
    if (!always && !this.problemInformation) return {};
    return { reasonString: reason.slice(0, 512) };
  }

  /** Keep alive: true when the client has been silent for 1.5 times its keep alive. */
  keepAliveExpired(nowUs: number): boolean {
    return (
      this.phase === "connected" &&
      !this.closing &&
      this.keepAliveS > 0 &&
      nowUs - this.lastInputUs > this.keepAliveS * MQTT_KEEP_ALIVE_GRACE * 1e6
    );
  }

  /** True while the session closes its socket and waits for the queue to drain. */
  get closingSocket(): boolean {
    return this.closing && !this.socketGone;
  }

  /** Ends the socket now (a client that does not read its last packet). */
  forceClose(): void {
    this.output.discard();
    this.socket.close();
  }

  /** True while the broker asked not to read this client (storage behind). */
  get readPaused(): boolean {
    return this.paused;
  }
}
