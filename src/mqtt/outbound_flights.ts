/**
 * OutboundFlights: the messages an MQTT session sends its client. Holds what waits for the
 * client's window (Receive Maximum), sends it as the window opens (QoS 1/2 with a packet id, kept
 * in flight), follows each flight's PUBACK or PUBREC → PUBREL → PUBCOMP, and sends again, DUP
 * with their packet ids, the flights a resumed or restored session had [MQTT-4.4.0-1].
 *
 * Does not decide what a subscription delivers, nor its position or ACKs to the broker: the
 * session (mqtt_session.ts) does (DATA, No Local, expiry) and hears back through OutboundHost
 * (progress, changes of its state). Does not encode nor write bytes (the host's `send`).
 *
 * Invariants: packet ids in `inflight` are unique and their count ≤ `window` (but for flights
 * sent again on resume); `heldBytes` is the sum of the held messages' bytes; `keptFlightBytes`
 * the sum of the payloads kept in flight, ≤ MQTT_FLIGHT_KEPT_BYTES_MAX; a restored flight's
 * packet id is reserved (not taken by a new PUBLISH) until it is sent again or forgotten.
 */
import { MQTT_FLIGHT_KEPT_BYTES_MAX, MQTT_INFLIGHT_V4 } from "./mqtt_limits.ts";
import type { AckType } from "./inbound_publishes.ts";
import {
  type Packet,
  type Properties,
  type ProtocolVersion,
  type PublishPacket,
  REASON,
} from "./packets.ts";
import { EMPTY_PAYLOAD, EMPTY_SENT } from "./session_codes.ts";
import type { PersistedFlight } from "./session_state.ts";
import type {
  InFlight,
  Outgoing,
  SavedFlight,
  SentMessage,
  SessionDoor,
  SubscriptionState,
} from "./session_types.ts";

/** What OutboundFlights asks of its session. */
export interface OutboundHost {
  /** The connection's protocol version. */
  version(): ProtocolVersion;
  /** True once the session closes: nothing more is sent. */
  closing(): boolean;
  /** True while `state` is one of the session's open subscriptions (by its native id). */
  subscribed(state: SubscriptionState): boolean;
  /** Encodes and writes a packet; false when larger than the client takes (skipped). */
  send(packet: Packet): boolean;
  /** Sends PUBACK, PUBREC, PUBREL or PUBCOMP. */
  ack(type: AckType, packetId: number, reasonCode: number, reason?: string): void;
  /** DISCONNECT with a reason, then close. */
  disconnect(reasonCode: number, reason: string): void;
  /** The session's durable state changed (`lazy`: a flight sent or acknowledged). */
  changed(lazy: boolean): void;
  /** A subscription's client processed a message: its position may move. */
  progress(state: SubscriptionState): void;
  /** The held messages were sent as far as the window allows. */
  pumped(): void;
  /** True while the session takes more from the broker (MqttSession.accepting). */
  accepting(): boolean;
  /** The session takes DATA again (it did not before). */
  drained(): void;
}

/** One MQTT session's messages to its client: held, and in flight. */
export class OutboundFlights {
  /** QoS 1/2 PUBLISHes (and PUBRELs) sent and not acknowledged, by packet id. */
  readonly inflight = new Map<number, InFlight>();
  /** The client's Receive Maximum. */
  window = MQTT_INFLIGHT_V4;
  /** Bytes of the held messages (topic, payload, properties). */
  heldBytes = 0;
  private nextPacketId = 1;
  private readonly held: Outgoing[] = [];
  private heldHead = 0;
  /** Payload bytes of the `inflight` messages kept for a resume. */
  private keptFlightBytes = 0;
  /** Packet ids of restored flights not yet sent again (takePacketId skips them). */
  private readonly reservedIds = new Set<number>();

  constructor(
    private readonly door: SessionDoor,
    private readonly host: OutboundHost,
  ) {}

  /** How many messages wait for the window. */
  get heldCount(): number {
    return this.held.length - this.heldHead;
  }

  /** A message waits for the window (pump() sends it). */
  hold(message: Outgoing): void {
    this.held.push(message);
    this.heldBytes += message.bytes;
  }

  /** Forgets the held messages (the connection ended). */
  clearHeld(): void {
    this.held.length = 0;
    this.heldHead = 0;
    this.heldBytes = 0;
  }

  /** Sends held messages while the window has room. */
  pump(): void {
    const host = this.host;
    while (this.heldHead < this.held.length && !host.closing()) {
      const next = this.held[this.heldHead];
      if (next.qos > 0 && this.inflight.size >= this.window) break;
      this.heldHead++;
      this.heldBytes -= next.bytes;
      const state = next.subscription;
      // A message of a subscription that ended, or at QoS 0, is processed once it leaves here.
      // (A retained message is not part of the position: it comes from before it.)
      if ((next.qos === 0 || !host.subscribed(state)) && !next.retain)
        state.unprocessed.delete(next.seq);
      if (!host.subscribed(state)) continue;
      const packetId = next.qos === 0 ? 0 : this.takePacketId();
      const sent = this.sendMessage(state, next, packetId);
      if (next.qos === 0) continue;
      if (sent) {
        this.inflight.set(packetId, {
          subscription: state,
          seq: next.seq,
          qos: next.qos,
          released: false,
          retain: next.retain,
          message: this.keepFlight(next),
        });
        host.changed(true);
      } else if (!next.retain) state.unprocessed.delete(next.seq); // too large for the client: skipped
    }
    if (this.heldHead === this.held.length) {
      this.held.length = 0;
      this.heldHead = 0;
    }
    host.pumped();
  }

  /** A message in flight kept for a resume, within MQTT_FLIGHT_KEPT_BYTES_MAX; else undefined. */
  private keepFlight(message: SentMessage): SentMessage | undefined {
    const bytes = message.payload.length;
    if (this.keptFlightBytes + bytes > MQTT_FLIGHT_KEPT_BYTES_MAX) return undefined;
    this.keptFlightBytes += bytes;
    return message;
  }

  /** A message in flight needs its payload no more (acknowledged, or PUBREC: PUBREL goes again). */
  private releaseFlight(flight: InFlight, acknowledged: boolean): void {
    const message = flight.message;
    if (message !== undefined) this.keptFlightBytes -= message.payload.length;
    if (acknowledged) flight.message = undefined;
    else {
      const meta = message ?? EMPTY_SENT;
      flight.message = { ...meta, seq: flight.seq, qos: flight.qos, payload: EMPTY_PAYLOAD };
    }
  }

  private takePacketId(): number {
    for (;;) {
      const id = this.nextPacketId;
      this.nextPacketId = id === 65_535 ? 1 : id + 1;
      if (!this.inflight.has(id) && !this.reservedIds.has(id)) return id;
    }
  }

  /**
   * One PUBLISH to the client with its kept properties, its subscription's identifier and
   * `aria-seq` (MQTT 5); false when it is larger than the client takes (skipped).
   */
  sendMessage(
    state: SubscriptionState,
    message: Pick<Outgoing, "seq" | "topic" | "payload" | "properties" | "qos" | "retainFlag">,
    packetId: number,
    dup = false,
  ): boolean {
    const host = this.host;
    const v5 = host.version() === 5;
    let properties: Properties = {};
    if (v5) {
      properties = { ...message.properties };
      if (state.identifier !== undefined) properties.subscriptionIdentifiers = [state.identifier];
      if (this.door.ariaSeq)
        properties.userProperties = [
          ...(message.properties.userProperties ?? []),
          ["aria-seq", String(message.seq)],
        ];
    }
    const packet: PublishPacket = {
      type: "publish",
      topic: message.topic,
      payload: message.payload,
      qos: message.qos,
      retain: message.retainFlag,
      dup,
      properties,
    };
    if (message.qos > 0) packet.packetId = packetId;
    if (host.send(packet)) return true;
    // Too large for the client: without Aria's own `aria-seq` it may fit (MQTT 5 3.1.2.11.4).
    if (!v5 || !this.door.ariaSeq) return false;
    properties.userProperties = message.properties.userProperties;
    if (properties.userProperties === undefined) delete properties.userProperties;
    return host.send(packet);
  }

  /** PUBACK, PUBREC or PUBCOMP of a message sent to the client. */
  deliveryAck(type: "puback" | "pubrec" | "pubcomp", packetId: number, reasonCode: number): void {
    const host = this.host;
    const flight = this.inflight.get(packetId);
    const expected =
      flight === undefined
        ? null
        : flight.qos === 1
          ? "puback"
          : flight.released
            ? "pubcomp"
            : "pubrec";
    if (flight !== undefined && type !== expected)
      return host.disconnect(
        REASON.PROTOCOL_ERROR,
        `${type.toUpperCase()} for packet id ${packetId}, which awaits ${expected?.toUpperCase()}`,
      );
    if (flight === undefined) {
      if (type === "pubrec") host.ack("pubrel", packetId, REASON.PACKET_IDENTIFIER_NOT_FOUND);
      return;
    }
    if (!flight.retain) {
      flight.subscription.unprocessed.delete(flight.seq);
      host.progress(flight.subscription);
    }
    host.changed(true);
    if (type === "pubrec" && reasonCode < 0x80) {
      flight.released = true;
      this.releaseFlight(flight, false);
      host.ack("pubrel", packetId, REASON.SUCCESS);
      return;
    }
    this.releaseFlight(flight, true);
    this.inflight.delete(packetId);
    const wasAccepting = host.accepting();
    this.pump();
    if (!wasAccepting && host.accepting()) host.drained();
  }

  /**
   * A resumed session's PUBLISHes in flight go again with their packet ids and DUP, and PUBRELs
   * again for QoS 2 ones PUBRECed [MQTT-4.4.0-1], in the order first sent. `find`: the
   * session's subscription of a filter.
   */
  resend(
    flights: readonly SavedFlight[],
    find: (filter: string) => SubscriptionState | undefined,
  ): void {
    // Their seqs are the first unprocessed of their subscriptions, in seq order.
    const bySeq = [...flights].sort((a, b) => a.message.seq - b.message.seq);
    for (const flight of bySeq) {
      const state = flight.inPosition ? find(flight.filter) : undefined;
      if (state !== undefined && !flight.released) state.unprocessed.add(flight.message.seq);
    }
    for (const flight of flights) {
      const found = flight.inPosition ? find(flight.filter) : undefined;
      const state = found ?? detachedSubscription(flight.filter);
      const message = flight.message;
      this.inflight.set(flight.packetId, {
        subscription: state,
        seq: message.seq,
        qos: message.qos,
        released: flight.released,
        retain: found === undefined,
        message,
      });
      this.keptFlightBytes += message.payload.length;
      if (flight.released) this.host.ack("pubrel", flight.packetId, REASON.SUCCESS);
      else if (!this.sendMessage(state, message, flight.packetId, true)) {
        // Too large for the client's new Maximum Packet Size: skipped.
        this.inflight.delete(flight.packetId);
        this.keptFlightBytes -= message.payload.length;
        state.unprocessed.delete(message.seq);
      }
    }
  }

  /** PUBREL again for QoS 2 messages the client PUBRECed before a restart [MQTT-4.4.0-1]. */
  resendPubrels(packetIds: readonly number[]): void {
    for (const packetId of packetIds) {
      if (this.inflight.has(packetId)) continue;
      const state = detachedSubscription("");
      this.inflight.set(packetId, {
        subscription: state,
        seq: 0,
        qos: 2,
        released: true,
        retain: true,
        message: EMPTY_SENT,
      });
      this.host.ack("pubrel", packetId, REASON.SUCCESS);
    }
  }

  /** Restored flights by seq, their packet ids reserved until they are sent again. */
  restoredOf(
    flights: readonly PersistedFlight[] | undefined,
  ): Map<number, PersistedFlight> | undefined {
    if (flights === undefined || flights.length === 0) return undefined;
    const bySeq = new Map<number, PersistedFlight>();
    for (const flight of flights) {
      bySeq.set(flight.seq, flight);
      this.reservedIds.add(flight.packetId);
    }
    return bySeq;
  }

  /** Restored flights whose seq is below `seq` never come (processed, or skipped): forgotten. */
  sweepRestored(state: SubscriptionState, seq: number): void {
    const restored = state.restored;
    if (restored === undefined) return;
    for (const [flightSeq, flight] of restored)
      if (flightSeq < seq) {
        restored.delete(flightSeq);
        this.reservedIds.delete(flight.packetId);
      }
    if (restored.size === 0) state.restored = undefined;
  }

  /** A restored flight's message came again: DUP, with its packet id [MQTT-4.4.0-1]. */
  resendRestored(state: SubscriptionState, flight: PersistedFlight, message: SentMessage): void {
    state.restored?.delete(flight.seq);
    this.reservedIds.delete(flight.packetId);
    const again = !this.inflight.has(flight.packetId);
    const packetId = again ? flight.packetId : this.takePacketId();
    state.unprocessed.add(message.seq);
    if (!this.sendMessage(state, message, packetId, again)) {
      state.unprocessed.delete(message.seq); // too large for the client's new maximum: skipped
      return;
    }
    this.inflight.set(packetId, {
      subscription: state,
      seq: message.seq,
      qos: message.qos,
      released: false,
      retain: false,
      message: this.keepFlight(message),
    });
    this.host.changed(true);
  }
}

/** A subscription no longer there, for a message in flight of it (outside any position). */
export function detachedSubscription(filter: string): SubscriptionState {
  return {
    filter,
    entries: [],
    options: { filter, qos: 0, noLocal: false, retainAsPublished: false, retainHandling: 2 },
    identifier: undefined,
    dollarExcluded: false,
    nativeId: -1,
    start: { kind: "live" },
    unprocessed: new Set(),
    positionSeq: 0,
    durable: undefined,
    lastDataSeq: 0,
    ackedSeq: 0,
    wantsRetained: false,
    shared: false,
    delivered: [],
    deliveredHead: 0,
    skipBelow: 0,
    again: new Set(),
  };
}
