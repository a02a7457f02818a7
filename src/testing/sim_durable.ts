/**
 * DurableProbe: a durable consumer in the simulator (SimulationOptions.durable). One client
 * subscribes to `**` as durable consumer "probe" from the earliest message, acknowledges a random
 * seq it received now and then, hangs up and comes back, and lives through the simulator's
 * crashes; the consumers' positions persist in a MemoryConsumerStore whose writes land at the end
 * of some steps (a write window) and are lost on a crash when not landed yet.
 *
 * Invariants (checked as frames arrive, and at the end):
 *   durable-no-gap          a (re)subscription starts at or before the seq after the last one the
 *                           probe received: nothing is skipped
 *   durable-no-regression   it starts at or after the position written last (the stored ACK)
 *   durable-in-order        within one subscription seqs rise, and a seq skipped is gone
 *                           (retention, or lost in a repair)
 *   durable-complete        at the end every seq not gone was received at least once
 * Not here: the simulator's drive (when the probe connects, acks, hangs up: simulator.ts).
 */
import { PROTOCOL_VERSION } from "../constants.ts";
import { type DecodeError, type Frame, FrameDecoder } from "../protocol/mod.ts";
import { check, type Checker } from "./invariants.ts";
import { MemoryConsumerStore } from "./memory_consumer_store.ts";
import { encodeToBytes } from "./sim_client.ts";
import type { SimConnection } from "./sim_network.ts";

/** The durable consumer's name. */
export const PROBE_NAME = "probe";

/** A durable consumer that checks where each of its subscriptions starts. */
export class DurableProbe {
  /** The consumers' positions, as the data directory holds them (written at step ends). */
  readonly store = new MemoryConsumerStore(true);
  connection: SimConnection | null = null;
  reconnectAtStep = 0;
  private decoder = new FrameDecoder();
  /** The seq after the highest one received, over every subscription of it. */
  private receivedTo = 1;
  /** The highest seq received on this connection: an ACK's bound. */
  private deliveredOnConnection = 0;
  /** The last seq of this subscription (0: none yet), and where it started (null: not yet). */
  private lastSeq = 0;
  private firstSeq: number | null = null;
  /** The highest seq acknowledged (held by the broker's registry until a crash). */
  private ackedSeq = 0;
  private readonly received = new Set<number>();
  caughtUp = false;
  /** The server dropped the subscription (a failed disk read): subscribe again. */
  needsResubscribe = false;
  readonly counters = { subscriptions: 0, acks: 0, received: 0 };

  constructor(private readonly checker: Checker) {}

  /** HELLO and the SUBSCRIBE of the consumer (the start applies only when it is new). */
  opening(): Uint8Array[] {
    return [
      encodeToBytes({
        kind: "hello",
        version: PROTOCOL_VERSION,
        clientName: "durable-probe",
        authToken: null,
      }),
      this.subscribeFrame(),
    ];
  }

  /** SUBSCRIBE again after the server dropped the subscription. */
  subscribeFrame(): Uint8Array {
    this.needsResubscribe = false;
    this.firstSeq = null;
    this.lastSeq = 0;
    this.caughtUp = false;
    this.deliveredOnConnection = 0;
    return encodeToBytes({
      kind: "subscribe",
      subscriptionId: 1,
      start: { kind: "earliest" },
      filter: ["**"],
      durable: PROBE_NAME,
    });
  }

  /** An ACK of a seq received on this connection past the last acknowledged, or null. */
  ack(roll: number): Uint8Array | null {
    if (this.deliveredOnConnection <= this.ackedSeq) return null;
    const seq = this.ackedSeq + 1 + (roll % (this.deliveredOnConnection - this.ackedSeq));
    this.ackedSeq = seq;
    this.counters.acks++;
    return encodeToBytes({ kind: "ack", subscriptionId: 1, seq });
  }

  /** The connection is gone. */
  disconnected(): void {
    this.connection = null;
    this.decoder = new FrameDecoder();
    this.firstSeq = null;
    this.caughtUp = false;
    this.deliveredOnConnection = 0;
  }

  /** The server died: positions not written yet are lost; the registry starts from the store. */
  crashed(): void {
    this.store.crash();
    const stored = this.store.load()[0];
    this.ackedSeq = stored === undefined ? 0 : stored.nextSeq - 1;
  }

  /** Bytes from the server. */
  receive(chunk: Uint8Array): void {
    this.decoder.push(chunk);
    for (let frame = this.decoder.next(); frame !== null; frame = this.decoder.next())
      this.handle(frame);
  }

  private handle(frame: Frame | DecodeError): void {
    switch (frame.kind) {
      case "subscribed":
        return this.subscribed(frame.firstSeq);
      case "data": {
        const batch = frame.messages;
        while (batch.next()) this.data(batch.seq);
        return;
      }
      case "caught_up":
        this.caughtUp = true;
        return;
      case "error":
        check(
          frame.code === "ARIA_ERR_STORAGE_FAILED" || frame.code === "ARIA_ERR_SHUTTING_DOWN",
          "durable-expected-errors-only",
          () => `durable probe: ${frame.code}: ${frame.reason}`,
        );
        if (frame.relatedKind === "subscription") this.needsResubscribe = true;
        return;
      case "decode_error":
        check(false, "server-frames-valid", () => `durable probe: ${frame.reason}`);
        return;
      default:
        return;
    }
  }

  private subscribed(firstSeq: number): void {
    this.counters.subscriptions++;
    const written = this.store.load()[0];
    const floor = written === undefined ? 1 : written.nextSeq;
    check(
      firstSeq <= this.receivedTo,
      "durable-no-gap",
      () =>
        `durable probe resumed at ${firstSeq}, past the seq after the last it received (${this.receivedTo})`,
    );
    check(
      firstSeq >= floor,
      "durable-no-regression",
      () => `durable probe resumed at ${firstSeq}, before its written position ${floor}`,
    );
    this.firstSeq = firstSeq;
    this.lastSeq = firstSeq - 1;
  }

  private data(seq: number): void {
    const first = this.firstSeq;
    check(first !== null, "durable-in-order", () => `durable probe: DATA ${seq} before SUBSCRIBED`);
    check(
      seq > this.lastSeq,
      "durable-in-order",
      () => `durable probe: seq ${seq} after ${this.lastSeq}`,
    );
    for (let skipped = this.lastSeq + 1; skipped < seq; skipped++)
      check(
        this.checker.isGone(skipped),
        "durable-in-order",
        () => `durable probe: seq ${skipped} skipped (got ${seq} after ${this.lastSeq})`,
      );
    this.lastSeq = seq;
    this.deliveredOnConnection = Math.max(this.deliveredOnConnection, seq);
    this.receivedTo = Math.max(this.receivedTo, seq + 1);
    this.received.add(seq);
    this.counters.received++;
  }

  /** End of run: every seq not gone was received at least once. */
  checkComplete(lastSeq: number): void {
    for (let seq = 1; seq <= lastSeq; seq++)
      check(
        this.received.has(seq) || this.checker.isGone(seq),
        "durable-complete",
        () => `durable probe never received seq ${seq} (of ${lastSeq})`,
      );
  }
}
