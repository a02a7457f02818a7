/**
 * InboundPublishes: the PUBLISHes an MQTT client sends (and its will), on their way to the broker.
 * Resolves topic aliases, checks a publish (alias, QoS 2 id already received, the server's Receive
 * Maximum, payload format, topic, size), hands it to the native link as a request, and answers
 * it once the broker does: QoS 1 PUBACK, QoS 2 PUBREC (a persistent session's once its id is
 * durable), then PUBCOMP for the client's PUBREL.
 *
 * Does not encode nor send packets, nor close the connection: it asks its session (InboundHost)
 * to acknowledge or disconnect. Does not deliver messages to the client (outbound is the
 * session's).
 *
 * Invariants: `inFlight` counts the QoS 1 requests not yet answered plus the QoS 2 ids in
 * `qos2Received`, ≤ MQTT_RECEIVE_MAXIMUM; a QoS 2 packet id is published once until its PUBREL;
 * a request id is in `requests` from its publish to its PUBLISH_ACK or ERROR.
 */
import { MQTT_RECEIVE_MAXIMUM, MQTT_TOPIC_ALIASES_MAX } from "./mqtt_limits.ts";
import type { NativeError, NativeLink } from "./native_link.ts";
import { type PublishPacket, REASON, type Will } from "./packets.ts";
import { isUtf8, nativeLimitProblem, reasonOfError } from "./session_codes.ts";
import type { PendingRequest, SessionDoor } from "./session_types.ts";
import type { ClientOrigin } from "./stored_properties.ts";

/** The acknowledgements a session sends for its client's publishes. */
export type AckType = "puback" | "pubrec" | "pubrel" | "pubcomp";

/** What InboundPublishes asks of its session. */
export interface InboundHost {
  /** The connection's protocol version (3.1.1: 4, 5). */
  version(): number;
  /** The client id's origin, stored with each message it publishes. */
  origin(): ClientOrigin;
  /** True for a session kept after its connection (session expiry above 0). */
  persistent(): boolean;
  /** The client id (for the log). */
  clientId(): string;
  /** Sends PUBACK, PUBREC, PUBREL or PUBCOMP. */
  ack(type: AckType, packetId: number, reasonCode: number, reason?: string): void;
  /** DISCONNECT with a reason, then close. */
  disconnect(reasonCode: number, reason: string): void;
  /** The session's durable state changed (a QoS 2 id received or released). */
  changed(): void;
  /** The will's publish was answered (acknowledged or refused). */
  willDone(): void;
}

/** One MQTT session's publishes from its client, in flight to the broker. */
export class InboundPublishes {
  /** QoS 2 packet ids received, awaiting PUBREL ("acked": PUBRECed, or its PUBREC is due). */
  readonly qos2Received = new Map<number, "pending" | "acked">();
  private nextRequestId = 1;
  private readonly requests = new Map<number, PendingRequest>();
  private inFlight = 0;
  private readonly aliases = new Map<number, string>();

  constructor(
    private readonly door: SessionDoor,
    private readonly link: NativeLink,
    private readonly host: InboundHost,
  ) {}

  /** The QoS 2 ids the last connection received: a resent PUBLISH gets PUBREC, not a publish. */
  restore(qos2Received: readonly number[]): void {
    for (const packetId of qos2Received) {
      this.qos2Received.set(packetId, "acked");
      this.inFlight++;
    }
  }

  /** A PUBLISH from the client. */
  publish(packet: PublishPacket): void {
    const host = this.host;
    const v5 = host.version() === 5;
    let topic = packet.topic;
    const alias = packet.properties.topicAlias;
    if (alias !== undefined) {
      if (alias === 0 || alias > MQTT_TOPIC_ALIASES_MAX)
        return host.disconnect(REASON.TOPIC_ALIAS_INVALID, `topic alias ${alias} is out of range`);
      if (topic === "") {
        const known = this.aliases.get(alias);
        if (known === undefined)
          return host.disconnect(REASON.PROTOCOL_ERROR, `topic alias ${alias} was never set`);
        topic = known;
      } else this.aliases.set(alias, topic);
    } else if (topic === "") return host.disconnect(REASON.PROTOCOL_ERROR, "empty topic name");
    const packetId = packet.packetId ?? 0;
    if (packet.qos === 2 && this.qos2Received.has(packetId)) {
      // A resent QoS 2 PUBLISH: published once; PUBREC again if it was acked already.
      if (this.qos2Received.get(packetId) === "acked") host.ack("pubrec", packetId, 0);
      return;
    }
    if (packet.qos > 0 && this.inFlight >= MQTT_RECEIVE_MAXIMUM)
      return host.disconnect(
        REASON.RECEIVE_MAXIMUM_EXCEEDED,
        `more than ${MQTT_RECEIVE_MAXIMUM} QoS 1 and 2 publishes unacknowledged`,
      );
    if (v5 && packet.properties.payloadFormatIndicator === 1 && !isUtf8(packet.payload)) {
      const reason = "payload format indicator 1 with a payload that is not UTF-8";
      if (packet.qos === 0) return host.disconnect(REASON.PAYLOAD_FORMAT_INVALID, reason);
      const type = packet.qos === 1 ? "puback" : "pubrec";
      return host.ack(type, packetId, REASON.PAYLOAD_FORMAT_INVALID, reason);
    }
    const mapped = this.door.mapping.topicToAria(topic);
    if (!mapped.ok) {
      if (packet.qos === 0 || !v5) return host.disconnect(REASON.TOPIC_NAME_INVALID, mapped.reason);
      return host.ack(
        packet.qos === 1 ? "puback" : "pubrec",
        packetId,
        REASON.TOPIC_NAME_INVALID,
        mapped.reason,
      );
    }
    const properties = host.origin().encode(packet.properties, packet.qos, packet.retain);
    const tooLarge = nativeLimitProblem(packet.payload, properties);
    if (tooLarge !== null) {
      if (packet.qos === 0 || !v5) return host.disconnect(REASON.PACKET_TOO_LARGE, tooLarge);
      const type = packet.qos === 1 ? "puback" : "pubrec";
      // PUBACK cannot carry 0x95: 0x97 quota exceeded, with the limit in the reason string.
      return host.ack(type, packetId, REASON.QUOTA_EXCEEDED, tooLarge);
    }
    const requestId = this.takeRequestId();
    this.requests.set(requestId, { qos: packet.qos, packetId, will: false });
    if (packet.qos > 0) this.inFlight++;
    if (packet.qos === 2) this.qos2Received.set(packetId, "pending");
    this.link.publish(requestId, mapped.topic, packet.payload, properties);
  }

  /** Hands the will to the broker, on its native topic (its answer ends in host.willDone()). */
  publishWill(will: Will, topic: string): void {
    const requestId = this.takeRequestId();
    this.requests.set(requestId, { qos: will.qos, packetId: 0, will: true });
    this.link.publish(
      requestId,
      topic,
      will.payload,
      this.host.origin().encode(will.properties, will.qos, will.retain),
    );
  }

  private takeRequestId(): number {
    const id = this.nextRequestId;
    this.nextRequestId = id >= 0xffff_fffe ? 1 : id + 1;
    return id;
  }

  /** PUBLISH_ACK: the message is durable; QoS 1 gets PUBACK, QoS 2 PUBREC. */
  acked(requestId: number): void {
    const request = this.requests.get(requestId);
    if (request === undefined) return;
    this.requests.delete(requestId);
    const host = this.host;
    if (request.will) return host.willDone();
    if (request.qos === 1) {
      this.inFlight--;
      host.ack("puback", request.packetId, REASON.SUCCESS);
    } else if (request.qos === 2) {
      if (this.qos2Received.has(request.packetId)) this.qos2Received.set(request.packetId, "acked");
      // A persistent session's PUBREC waits until the id is durable: a PUBLISH resent after a
      // restart then gets PUBREC, not a second publish.
      if (!host.persistent()) return host.ack("pubrec", request.packetId, REASON.SUCCESS);
      host.changed();
      const packetId = request.packetId;
      this.door.whenDurable(() => host.ack("pubrec", packetId, REASON.SUCCESS));
    }
  }

  /** PUBREL from the client: PUBCOMP, and the QoS 2 id is free again. */
  released(packetId: number): void {
    const known = this.qos2Received.delete(packetId);
    if (known) this.inFlight--;
    if (known) this.host.changed();
    this.host.ack("pubcomp", packetId, known ? REASON.SUCCESS : REASON.PACKET_IDENTIFIER_NOT_FOUND);
  }

  /** ERROR of a request: a QoS 1/2 publish gets its reason (MQTT 5) or closes (3.1.1 cannot say). */
  refused(requestId: number, error: NativeError): void {
    const request = this.requests.get(requestId);
    if (request === undefined) return;
    this.requests.delete(requestId);
    const host = this.host;
    if (request.will) return host.willDone();
    const reasonCode = reasonOfError(error.code);
    if (request.qos === 0) {
      this.door.log?.info("mqtt publish refused", {
        client: host.clientId(),
        reason: error.reason,
      });
      return;
    }
    if (host.version() === 4) return host.disconnect(reasonCode, error.reason);
    if (request.qos === 1) {
      this.inFlight--;
      host.ack("puback", request.packetId, reasonCode, error.reason);
    } else {
      // A failed PUBREC ends the exchange: the packet id is free again.
      if (this.qos2Received.delete(request.packetId)) this.inFlight--;
      host.ack("pubrec", request.packetId, reasonCode, error.reason);
    }
  }
}
