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
import type { ConnectionEvents } from "../runtime/runtime.ts";
import type { Log } from "../stdx/log.ts";
import { MQTT_CLOSING_LINGER_US, MQTT_SESSIONS_MAX } from "./mqtt_limits.ts";
import {
  MqttSession,
  SESSION_EXPIRY_NEVER,
  type SessionDoor,
  type StoredSession,
} from "./mqtt_session.ts";
import { REASON } from "./packets.ts";
import type { TopicMapping } from "./topic_mapping.ts";

/** What a door is built from. */
export interface MqttDoorOptions {
  /** The broker, as the door's connections reach it (Broker fits). */
  broker: ConnectionEvents;
  clock: Clock;
  scheduler: Scheduler;
  mapping: TopicMapping;
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

  /** The time now (µs). */
  nowUs(): number {
    return this.clock.nowUs();
  }

  /** A client id for a client that gave none. */
  assignClientId(): string {
    this.assignedCount++;
    return `aria-${this.clock.nowUs().toString(36)}-${this.assignedCount.toString(36)}`;
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
      // Its will: a delayed one is not sent if the session goes on; otherwise it is, now.
      const delayed = (previous.will?.properties.willDelayInterval ?? 0) > 0;
      if (delayed && !cleanStart) previous.cancelWill();
      else previous.publishWill();
    }
    // A will waiting for its delay is not sent once the client is back with its session.
    for (const waiting of this.connections.values())
      if (waiting !== session && waiting.socketGone && waiting.clientId === clientId && !cleanStart)
        waiting.cancelWill();
    const kept = this.stored.get(clientId) ?? null;
    this.stored.delete(clientId);
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
      if (nowUs - kept.releasedUs >= kept.expiryS * 1e6) this.stored.delete(clientId);
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
