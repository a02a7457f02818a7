/**
 * SessionSubscriptions: an MQTT session's subscriptions. SUBSCRIBE (aria-from, shared groups, the
 * same filter again, Retain Handling) and UNSUBSCRIBE, each filter a native subscription of the
 * link; SUBACK once every filter is answered; a kept session's subscriptions opened again from
 * their positions; a persistent subscription's position ACKed to the broker (a shared member's in
 * delivery order), put off to the end of a batch.
 *
 * Does not deliver messages (the session's DATA and OutboundFlights), nor read retained ones
 * (RetainedReads, which it starts), nor encode packets (the host's `send`).
 *
 * Invariants: a subscription is in `byFilter` and `byNativeId` alike, or in neither; a native id
 * is used once; a SUBACK goes once, after its last filter's answer and the SUBSCRIBE's loop; an
 * ACK never passes what the broker gave (`lastDataSeq`) nor an unprocessed seq.
 */
import type { StartPosition } from "../protocol/mod.ts";
import { parseAriaFrom } from "./aria_from.ts";
import type { NativeError, NativeLink } from "./native_link.ts";
import type { OutboundFlights } from "./outbound_flights.ts";
import {
  type Packet,
  type Properties,
  type QoS,
  REASON,
  type SubscribePacket,
  type UnsubscribePacket,
} from "./packets.ts";
import type { RetainedReads } from "./retained_reads.ts";
import { reasonOfError, SUBACK_FAILURES } from "./session_codes.ts";
import { sessionConsumerName, sharedConsumerName } from "./session_consumers.ts";
import type {
  PendingSuback,
  SavedSubscription,
  SessionDoor,
  SubscriptionState,
} from "./session_types.ts";

/** What SessionSubscriptions asks of its session. */
export interface SubscriptionsHost {
  /** The client id (names a persistent subscription's consumer). */
  clientId(): string;
  /** True for a session kept after its connection (its subscriptions are durable consumers). */
  persistent(): boolean;
  /** True inside a batch (ACKs wait for its end: settle()). */
  corked(): boolean;
  /** Encodes and writes a packet; false when larger than the client takes. */
  send(packet: Packet): boolean;
  /** A reason string's properties, when the client takes them. */
  problem(reason: string | undefined): Properties;
  /** The session's durable state changed. */
  changed(): void;
}

/** One MQTT session's subscriptions, by filter and by native id. */
export class SessionSubscriptions {
  /** The open subscriptions by MQTT filter. */
  readonly byFilter = new Map<string, SubscriptionState>();
  /** The open subscriptions by native subscription id. */
  readonly byNativeId = new Map<number, SubscriptionState>();
  private nextSubscriptionId = 1;
  private readonly subacks = new Map<number, PendingSuback>();
  private readonly waitingSuback = new Map<number, { suback: PendingSuback; index: number }>();
  /** Subscriptions whose position moved in the current batch (ACKed at its end). */
  private readonly progressDue = new Set<SubscriptionState>();

  constructor(
    private readonly door: SessionDoor,
    private readonly link: NativeLink,
    private readonly retained: RetainedReads,
    private readonly outbound: OutboundFlights,
    private readonly host: SubscriptionsHost,
  ) {}

  /** SUBSCRIBE: each filter opened (or its options replaced), SUBACK once all are answered. */
  subscribe(packet: SubscribePacket, nowUs: number): void {
    // `waiting` holds one for this loop: answers may come while it runs (the broker answers
    // SUBSCRIBE at once); SUBACK goes once the last filter is answered and the loop is done.
    const suback: PendingSuback = {
      packetId: packet.packetId,
      codes: [],
      waiting: 1,
      reasons: [],
    };
    const identifier = packet.properties.subscriptionIdentifiers?.[0];
    let start: StartPosition = { kind: "live" };
    let startGiven = false;
    for (const [name, value] of packet.properties.userProperties ?? []) {
      if (name !== "aria-from") continue;
      const parsed = parseAriaFrom(value, nowUs);
      if (!parsed.ok) {
        const codes = packet.subscriptions.map(() => REASON.IMPLEMENTATION_SPECIFIC_ERROR);
        return this.sendSuback({ ...suback, codes, reasons: [parsed.reason] });
      }
      start = parsed.start;
      startGiven = true;
    }
    for (const [index, wanted] of packet.subscriptions.entries()) {
      suback.codes.push(wanted.qos);
      const mapped = this.door.mapping.filterToAria(wanted.filter);
      if (!mapped.ok) {
        suback.codes[index] = REASON.TOPIC_FILTER_INVALID;
        suback.reasons.push(mapped.reason);
        continue;
      }
      if (mapped.share !== null && !this.door.durableSessions) {
        suback.codes[index] = REASON.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED;
        suback.reasons.push("shared subscriptions need the server's durable consumers");
        continue;
      }
      const existing = this.byFilter.get(wanted.filter);
      // The same filter again replaces the options; its position goes on (no gap, no repeat).
      // `aria-from` restarts it, but not a persistent session's: a durable consumer's start
      // applies only when it is new.
      if (existing !== undefined && (!startGiven || existing.durable !== undefined)) {
        existing.options = wanted;
        existing.identifier = identifier;
        if (wanted.retainHandling === 0 && !startGiven && existing.positionSeq > 0)
          this.retained.start(existing, existing.positionSeq);
        continue;
      }
      if (existing !== undefined) this.dropSubscription(existing);
      const state: SubscriptionState = {
        filter: wanted.filter,
        entries: mapped.entries,
        options: wanted,
        identifier,
        dollarExcluded: mapped.dollarExcluded,
        nativeId: 0,
        start,
        unprocessed: new Set(),
        positionSeq: 0,
        durable:
          mapped.share === null
            ? this.consumerNameOf(wanted.filter, wanted.qos)
            : sharedConsumerName(mapped.share, mapped.entries.join(",")),
        lastDataSeq: 0,
        ackedSeq: 0,
        // 0: retained messages on every SUBSCRIBE, 1: only for a new subscription, 2: never.
        // A replay (`aria-from`) has the history it asked for instead; a shared group none.
        wantsRetained: !startGiven && wanted.retainHandling !== 2 && mapped.share === null,
        shared: mapped.share !== null,
        delivered: [],
        deliveredHead: 0,
        skipBelow: 0,
        again: new Set(),
      };
      suback.waiting++;
      this.openSubscription(state, { suback, index });
    }
    this.subacks.set(packet.packetId, suback);
    this.subackStep(suback);
    this.host.changed();
  }

  private openSubscription(
    state: SubscriptionState,
    waiting?: { suback: PendingSuback; index: number },
  ): void {
    state.nativeId = this.nextSubscriptionId++;
    this.byFilter.set(state.filter, state);
    this.byNativeId.set(state.nativeId, state);
    if (waiting !== undefined) this.waitingSuback.set(state.nativeId, waiting);
    this.link.subscribe(state.nativeId, state.start, state.entries, state.durable, state.shared);
  }

  /** The durable consumer of a subscription of this session, when it persists. */
  private consumerNameOf(filter: string, qos: QoS): string | undefined {
    if (!this.door.durableSessions || !this.host.persistent()) return undefined;
    return sessionConsumerName(this.host.clientId(), filter, qos);
  }

  /**
   * A persistent subscription's position moved: ACK up to the last seq its client processed
   * (every earlier one of it too), never past what the broker gave it.
   */
  progress(state: SubscriptionState): void {
    if (state.durable === undefined || !this.byNativeId.has(state.nativeId)) return;
    // In a batch the ACK waits for its end (one scan of `unprocessed`, not one per PUBACK).
    if (this.host.corked()) {
      this.progressDue.add(state);
      return;
    }
    this.progressNow(state);
  }

  private progressNow(state: SubscriptionState): void {
    if (state.durable === undefined || !this.byNativeId.has(state.nativeId)) return;
    if (state.shared) return this.progressShared(state);
    let processed = state.positionSeq - 1;
    for (const seq of state.unprocessed) if (seq - 1 < processed) processed = seq - 1;
    const ackable = Math.min(processed, state.lastDataSeq);
    if (ackable <= state.ackedSeq) return;
    state.ackedSeq = ackable;
    this.link.ack(state.nativeId, ackable);
  }

  /** A subscription of a session kept while the client was away: on from its position. */
  resubscribe(saved: SavedSubscription): void {
    const mapped = this.door.mapping.filterToAria(saved.filter);
    if (!mapped.ok) return;
    this.openSubscription({
      filter: saved.filter,
      entries: mapped.entries,
      options: saved.options,
      identifier: saved.identifier,
      dollarExcluded: mapped.dollarExcluded,
      nativeId: 0,
      start: saved.start,
      unprocessed: new Set(),
      positionSeq: 0,
      durable:
        mapped.share === null
          ? this.consumerNameOf(saved.filter, saved.options.qos)
          : sharedConsumerName(mapped.share, mapped.entries.join(",")),
      lastDataSeq: 0,
      ackedSeq: 0,
      wantsRetained: false,
      shared: mapped.share !== null,
      delivered: [],
      deliveredHead: 0,
      // Restored flights' seqs come to the client again (as DUPs), below the resume's bound too.
      skipBelow: saved.resume?.below ?? 0,
      again: new Set([...(saved.resume?.again ?? []), ...(saved.flights ?? []).map((f) => f.seq)]),
      restored: this.outbound.restoredOf(saved.flights),
    });
  }

  /**
   * A shared group member ACKs in delivery order (an ACK acknowledges every message delivered to
   * it before, docs/protocol.md): up to the end of the prefix its client processed.
   */
  private progressShared(state: SubscriptionState): void {
    let acked = -1;
    while (
      state.deliveredHead < state.delivered.length &&
      !state.unprocessed.has(state.delivered[state.deliveredHead])
    )
      acked = state.delivered[state.deliveredHead++];
    if (state.deliveredHead === state.delivered.length) {
      state.delivered.length = 0;
      state.deliveredHead = 0;
    }
    if (acked >= 0) this.link.ack(state.nativeId, acked);
  }

  private dropSubscription(state: SubscriptionState): void {
    this.settle();
    this.byFilter.delete(state.filter);
    this.byNativeId.delete(state.nativeId);
    this.link.unsubscribe(state.nativeId);
    if (state.durable !== undefined && !state.shared) this.door.removeConsumerSoon(state.durable);
  }

  /** SUBSCRIBED: a filter of a SUBSCRIBE is granted. */
  subscribed(subscriptionId: number, firstSeq: number): void {
    const state = this.byNativeId.get(subscriptionId);
    if (state !== undefined && state.positionSeq === 0) state.positionSeq = firstSeq;
    if (state !== undefined) this.outbound.sweepRestored(state, firstSeq);
    this.filterAnswered(subscriptionId, null, "");
    if (state?.wantsRetained) {
      state.wantsRetained = false;
      this.retained.start(state, firstSeq);
    }
  }

  /** A filter of a SUBSCRIBE was answered (granted: failure null). */
  private filterAnswered(nativeId: number, failure: number | null, reason: string): void {
    const waiting = this.waitingSuback.get(nativeId);
    if (waiting === undefined) return;
    this.waitingSuback.delete(nativeId);
    if (failure !== null) {
      const allowed = SUBACK_FAILURES.has(failure);
      waiting.suback.codes[waiting.index] = allowed ? failure : REASON.UNSPECIFIED_ERROR;
      waiting.suback.reasons.push(reason);
    }
    this.subackStep(waiting.suback);
  }

  /** One answer (or the SUBSCRIBE loop) less to wait for; SUBACK after the last. */
  private subackStep(suback: PendingSuback): void {
    suback.waiting--;
    if (suback.waiting === 0) {
      this.subacks.delete(suback.packetId);
      this.sendSuback(suback);
    }
  }

  private sendSuback(suback: PendingSuback): void {
    const reason = suback.reasons.length === 0 ? undefined : suback.reasons.join("; ");
    this.host.send({
      type: "suback",
      packetId: suback.packetId,
      reasonCodes: suback.codes,
      properties: this.host.problem(reason),
    });
  }

  /** UNSUBSCRIBE: each filter's subscription ends; UNSUBACK. */
  unsubscribe(packet: UnsubscribePacket): void {
    const reasonCodes = packet.filters.map((filter) => {
      const state = this.byFilter.get(filter);
      if (state === undefined) return REASON.NO_SUBSCRIPTION_EXISTED;
      this.dropSubscription(state);
      return REASON.SUCCESS;
    });
    this.host.send({ type: "unsuback", packetId: packet.packetId, reasonCodes, properties: {} });
    this.host.changed();
  }

  /** The ACKs a batch put off, before the batch ends or a subscription does. */
  settle(): void {
    if (this.progressDue.size === 0) return;
    for (const state of this.progressDue) this.progressNow(state);
    this.progressDue.clear();
  }

  /** ERROR of a subscription: refused (its SUBACK says so), or ended by the server. */
  failed(nativeId: number, error: NativeError): void {
    // Refused, or an open subscription ended by the server (a reload of the users): it is gone.
    const waiting = this.waitingSuback.has(nativeId);
    const state = this.byNativeId.get(nativeId);
    if (state !== undefined) {
      this.byFilter.delete(state.filter);
      this.byNativeId.delete(state.nativeId);
    }
    if (waiting) this.filterAnswered(nativeId, reasonOfError(error.code), error.reason);
  }

  /** The connection ended: each native subscription ends; its consumer too unless `kept`. */
  endAll(kept: boolean): void {
    for (const state of this.byFilter.values()) {
      this.link.unsubscribe(state.nativeId);
      // A session that ends with its connection (DISCONNECT set the expiry to 0) leaves none.
      if (state.durable !== undefined && !state.shared && !kept)
        this.door.removeConsumerSoon(state.durable);
    }
    this.byFilter.clear();
    this.byNativeId.clear();
  }
}
