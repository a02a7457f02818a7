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
 * Persistence (`sessions`, the data directory's consumers.log): the state of each persistent
 * session (session_state.ts) is written whenever it changes, in the file's batches; at start-up
 * the door reads them back into `stored` (a session connected when the server stopped counts as
 * left at start-up), removes the ones that expired while the server was down (with their
 * consumers), and publishes the wills that came due (restored_will.ts).
 *
 * Invariants: `byClientId` holds connected sessions only; a client id is in `byClientId` or in
 * `stored`, never both; `stored.size <= MQTT_SESSIONS_MAX`; a client's state record, once
 * written, is what encodeState gives at the batch's write (null: removed).
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
import { RestoredWill } from "./restored_will.ts";
import { mqttFilterOf, qosOfConsumer, sessionConsumerPrefix } from "./session_consumers.ts";
import {
  decodeSessionState,
  encodeSessionState,
  type PersistedFlight,
  type PersistedSession,
  sessionStateName,
} from "./session_state.ts";
import type { TopicMapping } from "./topic_mapping.ts";

/** The broker's durable consumers, as the door lists and removes them (Broker fits through server.ts). */
export interface SessionConsumers {
  list(): readonly { name: string; filter: readonly string[] }[];
  remove(name: string): "removed" | "unknown" | "busy";
}

/** Where persistent sessions' states are written (ConsumerFile fits: the same batches). */
export interface SessionStateStore {
  /** The states stored when the server started, by name. */
  loadStates(): ReadonlyMap<string, Uint8Array>;
  /**
   * State `name` changed: `encode` gives its bytes (null: removed) when the batch is written;
   * `lazy`: a change a crash may lose (a message in flight), written within an interval.
   */
  saveState(name: string, encode: () => Uint8Array | null, lazy?: boolean): void;
  /** Calls `done` once what was saved before is durable under the fsync policy. */
  whenDurable(done: () => void): void;
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
  /** Persistent sessions' states (absent: in memory only, lost on a restart). */
  sessions?: SessionStateStore;
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
  private readonly sessions: SessionStateStore | undefined;
  /** Sessions whose socket is gone and whose will waits for its delay, by client id. */
  private readonly willsWaiting = new Map<string, MqttSession>();
  /**
   * Each client's record while it is pending in the store (one closure and one name, not one per
   * change; `lazy`: only lazy changes so far): a change while pending costs one map lookup.
   */
  private readonly pending = new Map<string, { encode: () => Uint8Array | null; lazy: boolean }>();
  /** Wills restored from the data directory being published. */
  private readonly restoredWills = new Set<RestoredWill>();
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
    this.sessions = options.sessions;
    if (this.sessions !== undefined) this.restore(this.sessions, this.clock.nowUs());
  }

  /**
   * The sessions stored before the server stopped: kept again (their expiry counting from when
   * their client left, or from now for one connected then); expired ones and due wills at once.
   */
  private restore(sessions: SessionStateStore, nowUs: number): void {
    for (const [name, bytes] of sessions.loadStates()) {
      const persisted = decodeSessionState(bytes);
      if (persisted === null || sessionStateName(persisted.clientId) !== name) {
        this.log?.warn("mqtt session state unreadable: dropped", { name });
        continue;
      }
      if (this.stored.size >= MQTT_SESSIONS_MAX) break;
      this.stored.set(persisted.clientId, storedOf(persisted, nowUs));
      // Written again: a session connected when the server stopped now counts as left.
      if (persisted.connected) this.touch(persisted.clientId);
    }
    this.expire(nowUs);
  }

  /** Client `clientId`'s state record is rewritten (or removed) in the next batch. */
  private touch(clientId: string, lazy = false): void {
    if (this.sessions === undefined) return;
    const pending = this.pending.get(clientId);
    if (pending !== undefined && (lazy || !pending.lazy)) return;
    const entry = {
      encode: () => {
        if (this.pending.get(clientId) === entry) this.pending.delete(clientId);
        return this.encodeState(clientId);
      },
      lazy,
    };
    this.pending.set(clientId, entry);
    this.sessions.saveState(sessionStateName(clientId), entry.encode, lazy);
  }

  /** The bytes of client `clientId`'s persistent session now; null: it has none. */
  private encodeState(clientId: string): Uint8Array | null {
    const live = this.byClientId.get(clientId);
    if (live !== undefined)
      return live.sessionExpiryS > 0 ? encodeSessionState(live.persisted(this.nowUs())) : null;
    const kept = this.stored.get(clientId);
    if (kept === undefined) return null;
    return encodeSessionState(persistedOf(kept, this.willsWaiting.get(clientId)));
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

  /**
   * A session's durable state changed: written in the next batch of the sessions' store (`lazy`:
   * a message in flight, within the store's interval).
   */
  sessionChanged(session: MqttSession, lazy = false): void {
    if (this.sessions === undefined || session.clientId === "") return;
    const clientId = session.clientId;
    if (session.socketGone && session.will !== null && session.willDueUs >= 0)
      this.willsWaiting.set(clientId, session);
    else if (this.willsWaiting.size > 0 && this.willsWaiting.get(clientId) === session)
      this.willsWaiting.delete(clientId);
    this.touch(clientId, lazy);
  }

  /** Calls `done` once the states changed so far are durable (at once without a store). */
  whenDurable(done: () => void): void {
    if (this.sessions === undefined) done();
    else this.sessions.whenDurable(done);
  }

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
    this.touch(session.clientId);
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
      // A will restored from the data directory, due (overdue ones at start-up).
      if (kept.will !== undefined && nowUs >= kept.will.dueUs) {
        this.publishRestoredWill(clientId, kept.will);
        kept.will = undefined;
        this.touch(clientId);
      }
      if (kept.expiryS === SESSION_EXPIRY_NEVER) continue;
      if (nowUs - kept.releasedUs < kept.expiryS * 1e6) continue;
      this.stored.delete(clientId);
      this.removeSessionConsumers(clientId);
      this.touch(clientId);
    }
    for (const will of this.restoredWills) if (will.done) this.restoredWills.delete(will);
  }

  private publishRestoredWill(clientId: string, will: NonNullable<StoredSession["will"]>): void {
    const mapped = this.mapping.topicToAria(will.topic);
    if (!mapped.ok) return;
    const signedInAs = this.stored.get(clientId)?.signedInAs ?? JSON.stringify(["", ""]);
    const message = { clientId, signedInAs, topic: mapped.topic, payload: will.payload };
    const restored = new RestoredWill(
      this.broker,
      this.scheduler,
      { ...message, properties: will.properties },
      this.log,
    );
    this.restoredWills.add(restored);
  }

  /** Counters. */
  stats(): MqttDoorStats {
    let willsPending = 0;
    for (const session of this.connections.values())
      if (session.socketGone && session.will !== null) willsPending++;
    for (const kept of this.stored.values()) if (kept.will !== undefined) willsPending++;
    return { connections: this.connections.size, sessionsStored: this.stored.size, willsPending };
  }
}

/** A stored session from its durable state, read at start-up at `nowUs`. */
function storedOf(persisted: PersistedSession, nowUs: number): StoredSession {
  const releasedUs = persisted.connected ? nowUs : persisted.releasedUs;
  const stored: StoredSession = {
    clientId: persisted.clientId,
    subscriptions: persisted.subscriptions.map((sub) => ({
      filter: sub.filter,
      options: sub.options,
      identifier: sub.identifier,
      start: sub.startSeq > 0 ? { kind: "seq", seq: sub.startSeq } : { kind: "live" },
      resume: sub.below > 0 ? { below: sub.below, again: sub.again } : undefined,
      flights: sub.flights,
    })),
    expiryS: persisted.expiryS,
    releasedUs,
    qos2Received: persisted.qos2Received,
    signedInAs: persisted.signedInAs,
    pubrelIds: persisted.pubrelIds,
  };
  const will = persisted.will;
  if (will !== null) {
    // Connected when written: its connection ended with the server; the delay runs from now.
    const dueUs =
      will.dueUs > 0 ? will.dueUs : releasedUs + Math.min(will.delayS, persisted.expiryS) * 1e6;
    stored.will = { ...will, dueUs };
  }
  return stored;
}

/** The durable state of a session kept while its client is away (and its will, if waiting). */
function persistedOf(kept: StoredSession, waiting: MqttSession | undefined): PersistedSession {
  const flightsOf = new Map<string, PersistedFlight[]>();
  const pubrelIds = [...(kept.pubrelIds ?? [])];
  for (const flight of kept.inflight ?? []) {
    if (flight.released) pubrelIds.push(flight.packetId);
    else if (flight.inPosition) {
      const list = flightsOf.get(flight.filter) ?? [];
      list.push({ seq: flight.message.seq, packetId: flight.packetId, qos: flight.message.qos });
      flightsOf.set(flight.filter, list);
    }
  }
  return {
    clientId: kept.clientId,
    signedInAs: kept.signedInAs ?? "",
    expiryS: kept.expiryS,
    releasedUs: kept.releasedUs,
    connected: false,
    subscriptions: kept.subscriptions.map((sub) => ({
      filter: sub.filter,
      options: sub.options,
      identifier: sub.identifier,
      startSeq: sub.start.kind === "seq" ? sub.start.seq : 0,
      below: sub.resume?.below ?? 0,
      again: [...(sub.resume?.again ?? [])],
      flights: [...(flightsOf.get(sub.filter) ?? []), ...(sub.flights ?? [])].sort(
        (a, b) => a.seq - b.seq,
      ),
    })),
    pubrelIds: [...new Set(pubrelIds)],
    qos2Received: [...(kept.qos2Received ?? [])],
    will: waiting?.persistedWill() ?? kept.will ?? null,
  };
}
