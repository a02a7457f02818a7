/**
 * What an MQTT session leaves behind, as plain functions over a narrow view of its state: the
 * durable record of a persistent session (PersistedSession, written by the door into the consumers
 * file, session_state.ts) and the in-memory StoredSession a session leaves for its client's return.
 *
 * Does not change the session, decide when to save, nor write anything: mqtt_session.ts calls
 * these (`persisted()`, `persistedWill()`, at its end `finish()`), the door writes the result.
 *
 * Invariants: a shared group's subscription keeps no flights nor resume (its messages go to the
 * group's other members); a flight whose payload was not kept (over MQTT_FLIGHT_KEPT_BYTES_MAX)
 * is not saved (it comes again from the log); seqs listed `again` are never also flights.
 */
import type { Will } from "./packets.ts";
import { resumeOf } from "./session_codes.ts";
import type {
  PersistedFlight,
  PersistedSession,
  PersistedSubscription,
  PersistedWill,
} from "./session_state.ts";
import type {
  InFlight,
  SavedFlight,
  SavedSubscription,
  StoredSession,
  SubscriptionState,
} from "./session_types.ts";
import type { ClientOrigin } from "./stored_properties.ts";

/** The part of a session's state its snapshots read (mqtt_session.ts fills it). */
export interface SessionView {
  clientId: string;
  signedInAs: string;
  sessionExpiryS: number;
  /** Last time (µs) bytes came from the client. */
  lastInputUs: number;
  socketGone: boolean;
  will: Will | null;
  willDueUs: number;
  origin: ClientOrigin;
  inflight: ReadonlyMap<number, InFlight>;
  subscriptions: ReadonlyMap<string, SubscriptionState>;
  byNativeId: ReadonlyMap<number, SubscriptionState>;
  qos2Received: ReadonlyMap<number, "pending" | "acked">;
}

/** The durable state of a connected session (session_state.ts), as of `nowUs`. */
export function persistedSession(view: SessionView, nowUs: number): PersistedSession {
  const flightsOf = new Map<SubscriptionState, PersistedFlight[]>();
  const pubrelIds: number[] = [];
  for (const [packetId, flight] of view.inflight) {
    if (flight.released) pubrelIds.push(packetId);
    else if (!flight.retain && !flight.subscription.shared) {
      const list = flightsOf.get(flight.subscription) ?? [];
      list.push({ seq: flight.seq, packetId, qos: flight.qos });
      flightsOf.set(flight.subscription, list);
    }
  }
  const subscriptions: PersistedSubscription[] = [];
  for (const state of view.subscriptions.values()) {
    const flights = flightsOf.get(state) ?? [];
    if (state.restored !== undefined) flights.push(...state.restored.values());
    flights.sort((a, b) => a.seq - b.seq);
    const start = resumeOf(state);
    let below = 0;
    let again: number[] = [];
    if (!state.shared && state.positionSeq > 0) {
      const flying = new Set(flights.map((flight) => flight.seq));
      below = state.positionSeq;
      again = [...state.unprocessed].filter((seq) => !flying.has(seq));
    } else if (!state.shared && state.skipBelow > 0) {
      below = state.skipBelow;
      again = [...state.again];
    }
    subscriptions.push({
      filter: state.filter,
      options: state.options,
      identifier: state.identifier,
      startSeq: start.kind === "seq" ? start.seq : 0,
      below,
      again: again.sort((a, b) => a - b),
      flights,
    });
  }
  const connected = !view.socketGone;
  return {
    clientId: view.clientId,
    signedInAs: view.signedInAs,
    expiryS: view.sessionExpiryS,
    releasedUs: connected ? nowUs : view.lastInputUs,
    connected,
    subscriptions,
    pubrelIds,
    qos2Received: [...view.qos2Received].filter(([, s]) => s === "acked").map(([id]) => id),
    will: persistedWill(view.will, view.willDueUs, view.origin),
  };
}

/** The will still to publish, as the state keeps it (null: none). */
export function persistedWill(
  will: Will | null,
  willDueUs: number,
  origin: ClientOrigin,
): PersistedWill | null {
  if (will === null) return null;
  return {
    topic: will.topic,
    payload: will.payload,
    properties: origin.encode(will.properties, will.qos, will.retain),
    qos: will.qos,
    delayS: will.properties.willDelayInterval ?? 0,
    dueUs: Math.max(0, willDueUs),
  };
}

/** The session a connection leaves for its client's return (in memory, the door keeps it). */
export function storedSession(view: SessionView): StoredSession {
  return {
    clientId: view.clientId,
    subscriptions: [...view.subscriptions.values()].map((state) => ({
      filter: state.filter,
      options: state.options,
      identifier: state.identifier,
      start: resumeOf(state),
      resume: resumeAgain(state, view.inflight),
      flights: state.restored === undefined ? undefined : [...state.restored.values()],
    })),
    expiryS: view.sessionExpiryS,
    releasedUs: view.lastInputUs,
    inflight: savedFlights(view),
    qos2Received: [...view.qos2Received.keys()],
    signedInAs: view.signedInAs,
  };
}

/** The PUBLISHes in flight, for the session's resume (a shared group's go to its members). */
function savedFlights(view: SessionView): SavedFlight[] {
  const saved: SavedFlight[] = [];
  for (const [packetId, flight] of view.inflight) {
    const state = flight.subscription;
    // Not kept (over MQTT_FLIGHT_KEPT_BYTES_MAX): it comes again from the log instead.
    if (state.shared || flight.message === undefined) continue;
    const inPosition = !flight.retain && view.byNativeId.get(state.nativeId) === state;
    saved.push({
      packetId,
      filter: state.filter,
      inPosition,
      released: flight.released,
      message: flight.message,
    });
  }
  return saved;
}

/** Which seqs below its position a subscription's resume sends again (SavedSubscription). */
function resumeAgain(
  state: SubscriptionState,
  inflight: ReadonlyMap<number, InFlight>,
): SavedSubscription["resume"] {
  // Not subscribed yet (a resumed session gone at once): the resume it came with.
  if (!state.shared && state.positionSeq === 0 && state.skipBelow > 0)
    return { below: state.skipBelow, again: [...state.again] };
  if (state.shared || state.positionSeq === 0) return undefined;
  const flying = new Set<number>();
  for (const flight of inflight.values())
    if (flight.subscription === state && !flight.retain && flight.message !== undefined)
      flying.add(flight.seq);
  const again = [...state.unprocessed].filter((seq) => !flying.has(seq));
  return { below: state.positionSeq, again };
}
