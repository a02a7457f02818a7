/**
 * MqttDoor: the MQTT listener's events (ConnectionEvents, as the runtime's TCP listener calls
 * them) turned into MQTT sessions, each bridged onto the broker (mqtt_session.ts). Owns what spans
 * connections: the client-id registry (a second connection of a client id takes the session
 * over), the sessions kept while their clients are away (session expiry), and the timer's work
 * (keep alive, will delay, session expiry, closing connections that do not read).
 *
 * Not here: sockets (src/runtime), packets (codec.ts), the broker (reached only through its
 * ConnectionEvents, like any TCP client). Pure: time comes in as arguments of events.
 *
 * Invariants: `byClientId` holds connected sessions only; a client id is in `byClientId` or in
 * `stored`, never both; `stored.size <= MQTT_SESSIONS_MAX`.
 */
import type { Clock, Connection, Scheduler } from "../broker/ports.ts";
import type { ConnectionEvents } from "../broker/ports.ts";
import type { Log } from "../stdx/log.ts";
import { MQTT_CLOSING_LINGER_US, MQTT_SESSIONS_MAX } from "./mqtt_limits.ts";
import {
  MqttSession,
  SESSION_EXPIRY_NEVER,
  type SessionDoor,
  type StoredSession,
} from "./mqtt_session.ts";
import { REASON } from "./packets.ts";
import { mqttFilterOf, qosOfConsumer, sessionConsumerPrefix } from "./session_consumers.ts";
import type { TopicMapping } from "./topic_mapping.ts";

/** The broker's durable consumers, as the door lists and removes them (Broker fits through server.ts). */
export interface SessionConsumers {
  list(): readonly { name: string; filter: readonly string[] }[];
  remove(name: string): "removed" | "unknown" | "busy";
}

/** What a door is built from. */
export interface MqttDoorOptions {
  /** The broker, as the door's connections reach it (Broker fits). */
  broker: ConnectionEvents;
  clock: Clock;
  scheduler: Scheduler;
  mapping: TopicMapping;
  /** Durable consumers: persistent sessions keep their positions there (absent: in memory). */
  consumers?: SessionConsumers;
  /** Each matching topic's newest message, for retained messages (absent: none are sent). */
  retained?: SessionDoor["retained"];
  /** MQTT 5 subscribers get user property `aria-seq` on each PUBLISH (default true). */
  ariaSeq?: boolean;
  log?: Log;
}

/** Counters of the door, for metrics and tests. */
export interface MqttDoorStats {
  connections: number;
  sessionsStored: number;
  willsPending: number;
}

/** The MQTT front door. */
export class MqttDoor implements ConnectionEvents, SessionDoor {
  readonly broker: ConnectionEvents;
  readonly scheduler: Scheduler;
  readonly mapping: TopicMapping;
  readonly log?: Log;
  readonly durableSessions: boolean;
  readonly retained: SessionDoor["retained"];
  readonly ariaSeq: boolean;
  private readonly consumers: SessionConsumers | undefined;
  private readonly clock: Clock;
  private readonly connections = new Map<number, MqttSession>();
  private readonly byClientId = new Map<string, MqttSession>();
  private readonly stored = new Map<string, StoredSession>();
  private nextConnectionId = 1;
  private assignedCount = 0;

  constructor(options: MqttDoorOptions) {
    this.broker = options.broker;
    this.scheduler = options.scheduler;
    this.clock = options.clock;
    this.mapping = options.mapping;
    this.log = options.log;
    this.consumers = options.consumers;
    this.durableSessions = options.consumers !== undefined;
    this.retained = options.retained;
    this.ariaSeq = options.ariaSeq ?? true;
  }

  // ---- ConnectionEvents --------------------------------------------------------------------

  /** A client connected. */
  open(connection: Connection): number {
    const id = this.nextConnectionId++;
    this.connections.set(id, new MqttSession(this, connection, this.clock.nowUs()));
    return id;
  }

  /** Bytes arrived from a client. */
  receive(connectionId: number, bytes: Uint8Array): void {
    this.connections.get(connectionId)?.receive(bytes, this.clock.nowUs());
  }

  /** A client's socket takes more. */
  writable(connectionId: number): void {
    this.connections.get(connectionId)?.writable();
  }

  /** A client's socket closed. */
  closed(connectionId: number): void {
    const session = this.connections.get(connectionId);
    if (session === undefined) return;
    session.socketClosed(this.clock.nowUs());
    if (session.done) this.connections.delete(connectionId);
  }

  // ---- SessionDoor ---------------------------------------------------------------------------

  /** Removes durable consumer `name` after the frames sent so far (its UNSUBSCRIBE) were handled. */
  removeConsumerSoon(name: string): void {
    this.scheduler.soon(() => this.removeConsumer(name));
  }

  private removeConsumer(name: string): void {
    const removed = this.consumers?.remove(name);
    if (removed === "busy")
      this.log?.warn("mqtt session consumer still in use: not removed", { consumer: name });
  }

  /** Removes every durable consumer of client `clientId`'s session. */
  private removeSessionConsumers(clientId: string): void {
    if (this.consumers === undefined) return;
    const prefix = sessionConsumerPrefix(clientId);
    for (const consumer of this.consumers.list())
      if (consumer.name.startsWith(prefix)) this.removeConsumer(consumer.name);
  }

  /**
   * The session of `clientId` from its durable consumers (after a restart of the server, the
   * door's memory is empty but the consumers are not); null: it has none.
   */
  private sessionFromConsumers(clientId: string): StoredSession | null {
    if (this.consumers === undefined) return null;
    const prefix = sessionConsumerPrefix(clientId);
    const subscriptions: StoredSession["subscriptions"] = [];
    for (const consumer of this.consumers.list()) {
      const qos = qosOfConsumer(consumer.name);
      if (!consumer.name.startsWith(prefix) || qos === null || consumer.filter.length !== 1)
        continue;
      const filter = mqttFilterOf(consumer.filter[0]);
      subscriptions.push({
        filter,
        options: { filter, qos, noLocal: false, retainAsPublished: false, retainHandling: 0 },
        identifier: undefined,
        start: { kind: "live" },
      });
    }
    if (subscriptions.length === 0) return null;
    return { clientId, subscriptions, expiryS: SESSION_EXPIRY_NEVER, releasedUs: 0 };
  }

  /** The time now (µs). */
  nowUs(): number {
    return this.clock.nowUs();
  }

  /**
   * A client id for a client that gave none: `auto-` and 32 hex digits shaped as a UUID (the time
   * in µs, then a count), as mosquitto assigns them (its suite checks the length and prefix).
   */
  assignClientId(): string {
    this.assignedCount++;
    const hex16 = (n: number) => Math.floor(n).toString(16).padStart(16, "0").slice(-16);
    const hex = hex16(this.clock.nowUs()) + hex16(this.assignedCount);
    const parts = [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20)];
    return `auto-${parts.join("-")}-${hex.slice(20)}`;
  }

  /** The client signed in as `clientId`. */
  claim(
    session: MqttSession,
    clientId: string,
    cleanStart: boolean,
  ): StoredSession | null | "full" {
    const previous = this.byClientId.get(clientId);
    if (previous !== undefined && previous !== session) {
      previous.takenOver();
      // Its will: not when this connection goes on with the session, nor when it has a will delay
      // (a new connection of the client id came before it ran out, MQTT 5 [MQTT-3.1.2-8]); else
      // now, as the session ends. Mosquitto does the same, for 3.1.1 too.
      const continues = !cleanStart && previous.sessionExpiryS > 0;
      const delayed = (previous.will?.properties.willDelayInterval ?? 0) > 0;
      if (continues || delayed) previous.cancelWill();
      else previous.publishWill();
    }
    // A will waiting for its delay is not sent once a new connection of its client id came,
    // clean start or not [MQTT-3.1.2-8].
    for (const waiting of this.connections.values())
      if (waiting !== session && waiting.socketGone && waiting.clientId === clientId)
        waiting.cancelWill();
    let kept = this.stored.get(clientId) ?? null;
    this.stored.delete(clientId);
    // A session kept for another user is not this one's, nor are its in-flight messages: the
    // door forgets it (its consumers stay, and the broker refuses them to another user).
    const foreign =
      kept !== null && kept.signedInAs !== undefined && kept.signedInAs !== session.signedInAs;
    if (foreign) kept = null;
    if (cleanStart) {
      // Clean start discards the session: its consumers (positions) go too.
      if (this.durableSessions) this.removeSessionConsumers(clientId);
      kept = null;
    } else if (kept === null && previous === undefined && !foreign)
      kept = this.sessionFromConsumers(clientId);
    // Room for one more kept session, when this client will leave one.
    if (session.sessionExpiryS > 0 && kept === null && this.stored.size >= MQTT_SESSIONS_MAX)
      return "full";
    this.byClientId.set(clientId, session);
    return cleanStart ? null : kept;
  }

  /** A connection ended; its session is kept when it has a session expiry. */
  released(session: MqttSession, stored: StoredSession | null): void {
    if (this.byClientId.get(session.clientId) === session) this.byClientId.delete(session.clientId);
    if (stored !== null && this.stored.size < MQTT_SESSIONS_MAX)
      this.stored.set(stored.clientId, stored);
  }

  // ---- Timer ---------------------------------------------------------------------------------

  /**
   * Once a second or so (the server's maintenance timer): keep alive, wills whose delay ran out,
   * sessions that expired, connections closing whose client does not read.
   */
  expire(nowUs: number): void {
    for (const [id, session] of this.connections) {
      if (session.keepAliveExpired(nowUs))
        session.disconnect(REASON.KEEP_ALIVE_TIMEOUT, "keep alive timed out");
      if (session.closingSocket) {
        if (session.closingSinceUs < 0) session.closingSinceUs = nowUs;
        else if (nowUs - session.closingSinceUs >= MQTT_CLOSING_LINGER_US) session.forceClose();
      }
      if (session.socketGone) {
        session.tick(nowUs);
      }
      if (session.done) this.connections.delete(id);
    }
    for (const [clientId, kept] of this.stored) {
      if (kept.expiryS === SESSION_EXPIRY_NEVER) continue;
      if (nowUs - kept.releasedUs < kept.expiryS * 1e6) continue;
      this.stored.delete(clientId);
      this.removeSessionConsumers(clientId);
    }
  }

  /** Counters. */
  stats(): MqttDoorStats {
    let willsPending = 0;
    for (const session of this.connections.values())
      if (session.socketGone && session.will !== null) willsPending++;
    return { connections: this.connections.size, sessionsStored: this.stored.size, willsPending };
  }
}
