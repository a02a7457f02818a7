/**
 * The durable state of a persistent MQTT session (session expiry > 0, 3.1.1 clean session 0):
 * what the door keeps besides the subscriptions' durable consumers, so a restart of the server (or
 * `kill -9`) resumes the session whole. Stored as a state record of `DATA_DIR/consumers.log`
 * (src/runtime/consumer_file.ts), one per client, named `sessionStateName(clientId)`, written in
 * the file's batches under the server's --fsync policy. Pure: bytes in, bytes out.
 *
 *   u8 version (1) | str client id | str signed in as | u32 expiry s | u64 released µs (wall clock)
 *   | u8 flags (1 connected when written, 2 will) | u16 subscriptions | subscriptions
 *   | u16 count | PUBREL ids (QoS 2 PUBRECed by the client: PUBREL again, PUBCOMP awaited)
 *   | u16 count | QoS 2 ids received and PUBRECed, awaiting PUBREL
 *   | [flag 2: str will topic (MQTT) | bin payload | bin stored properties | u8 qos
 *      | u32 delay s | u64 due µs (0: not yet: the connection was up)]
 *   subscription: str MQTT filter | u8 options (qos | 4 no local | 8 retain as published |
 *     16·retain handling) | u32 identifier (0: none) | u64 start seq (0: live) | u64 below (0: no
 *     resume) | u32 runs | the seqs below `below` to send again (held, never sent), as runs of
 *     consecutive seqs: u64 first | u32 count | u32 runs | flights (sent, not acknowledged: again
 *     with DUP) as runs of consecutive seqs with consecutive packet ids (65,535 is followed by 1)
 *     and one QoS: u64 first seq | u16 first packet id | u8 qos | u32 count
 *   str: u32 bytes | UTF-8; bin: u32 bytes | bytes
 *
 * Runs keep a busy session's state small: its held messages and flights are mostly consecutive
 * (one record of a few bytes for a window of 1,024 in flight to a subscriber of everything).
 *
 * Payloads are not stored (the log has them): a flight comes again, DUP with its packet id, when
 * its seq comes again from the subscription's consumer. Invariants: decode(encode(s)) equals s;
 * a state is at most SESSION_STATE_BYTES_MAX (flights and seqs again past their bounds are left
 * out: those messages come again from the log as new PUBLISHes).
 */
import type { QoS, Subscription } from "./packets.ts";
import { sessionConsumerPrefix } from "./session_consumers.ts";

/** A flight of a subscription: sent with `packetId`, not acknowledged. */
export interface PersistedFlight {
  seq: number;
  packetId: number;
  qos: QoS;
}

/** A subscription of a persisted session. */
export interface PersistedSubscription {
  filter: string;
  options: Subscription;
  identifier: number | undefined;
  /** Where it starts when its consumer is new (0: live). */
  startSeq: number;
  /** Below `below`, only `again` and the flights' seqs go to the client (0: all from the start). */
  below: number;
  again: number[];
  flights: PersistedFlight[];
}

/** A will waiting for its delay (or for its connection to end). */
export interface PersistedWill {
  /** The MQTT topic name. */
  topic: string;
  payload: Uint8Array;
  /** Its stored properties bytes as published (stored_properties.ts). */
  properties: Uint8Array;
  qos: QoS;
  delayS: number;
  /** When it is due (µs, wall clock); 0: its connection was up when written. */
  dueUs: number;
}

/** The state of one persistent session. */
export interface PersistedSession {
  clientId: string;
  signedInAs: string;
  expiryS: number;
  /** When its client left (µs, wall clock), or when this was written while it was connected. */
  releasedUs: number;
  connected: boolean;
  subscriptions: PersistedSubscription[];
  pubrelIds: number[];
  qos2Received: number[];
  will: PersistedWill | null;
}

/** Largest state encoded; past it the largest lists are cut (see the header). */
export const SESSION_STATE_BYTES_MAX = 4 * 1024 * 1024;
/**
 * Runs of seqs "again" kept across a session's subscriptions (held messages, 12 bytes a run): a
 * subscription past it is written without a resume (everything from its position comes again).
 */
const AGAIN_RUNS_MAX = 131_072;

/** Sorted seqs as runs of consecutive ones: [first, count][]. */
function runsOf(seqs: readonly number[]): [number, number][] {
  const runs: [number, number][] = [];
  for (const seq of seqs) {
    const last = runs.at(-1);
    if (last !== undefined && last[0] + last[1] === seq) last[1]++;
    else runs.push([seq, 1]);
  }
  return runs;
}

/** The packet id after `id` (65,535 is followed by 1). */
const nextId = (id: number) => (id === 65_535 ? 1 : id + 1);

/** Flights sorted by seq as runs: consecutive seqs, consecutive ids, one QoS. */
function flightRuns(flights: readonly PersistedFlight[]): [PersistedFlight, number][] {
  const runs: [PersistedFlight, number][] = [];
  for (const flight of flights) {
    const last = runs.at(-1);
    if (
      last !== undefined &&
      last[0].seq + last[1] === flight.seq &&
      last[0].qos === flight.qos &&
      flight.packetId === ((last[0].packetId + last[1] - 1) % 65_535) + 1
    )
      last[1]++;
    else runs.push([flight, 1]);
  }
  return runs;
}

const VERSION = 1;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** The state record's name of client `clientId`'s session (its consumers' prefix, no slash). */
export function sessionStateName(clientId: string): string {
  return sessionConsumerPrefix(clientId).slice(0, -1);
}

class Out {
  private bytes = new Uint8Array(256);
  private view = new DataView(this.bytes.buffer);
  at = 0;
  private room(n: number): void {
    if (this.at + n <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.at + n));
    grown.set(this.bytes.subarray(0, this.at));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }
  u8(v: number): void {
    this.room(1);
    this.bytes[this.at++] = v;
  }
  u16(v: number): void {
    this.room(2);
    this.view.setUint16(this.at, v, true);
    this.at += 2;
  }
  u32(v: number): void {
    this.room(4);
    this.view.setUint32(this.at, v, true);
    this.at += 4;
  }
  u64(v: number): void {
    this.room(8);
    this.view.setBigUint64(this.at, BigInt(v), true);
    this.at += 8;
  }
  bin(v: Uint8Array): void {
    this.u32(v.length);
    this.room(v.length);
    this.bytes.set(v, this.at);
    this.at += v.length;
  }
  str(v: string): void {
    this.bin(utf8.encode(v));
  }
  done(): Uint8Array {
    return this.bytes.slice(0, this.at);
  }
}

class In {
  private readonly view: DataView;
  at = 0;
  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  u8(): number {
    return this.view.getUint8(this.at++);
  }
  u16(): number {
    const v = this.view.getUint16(this.at, true);
    this.at += 2;
    return v;
  }
  u32(): number {
    const v = this.view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }
  u64(): number {
    const v = Number(this.view.getBigUint64(this.at, true));
    this.at += 8;
    return v;
  }
  bin(): Uint8Array {
    const n = this.u32();
    if (this.at + n > this.bytes.length) throw new RangeError("cut short");
    const v = this.bytes.slice(this.at, this.at + n);
    this.at += n;
    return v;
  }
  str(): string {
    return utf8Decoder.decode(this.bin());
  }
  get ended(): boolean {
    return this.at === this.bytes.length;
  }
}

/** The bytes of a session's state (lists past their bounds cut: see the header). */
export function encodeSessionState(session: PersistedSession): Uint8Array {
  const out = new Out();
  out.u8(VERSION);
  out.str(session.clientId);
  out.str(session.signedInAs);
  out.u32(session.expiryS);
  out.u64(Math.max(0, session.releasedUs));
  out.u8((session.connected ? 1 : 0) | (session.will === null ? 0 : 2));
  out.u16(session.subscriptions.length);
  // Flights are bounded by the windows (65,535 ids at most); seqs again by a budget of runs.
  let againLeft = AGAIN_RUNS_MAX;
  for (const sub of session.subscriptions) {
    out.str(sub.filter);
    const o = sub.options;
    out.u8(o.qos | (o.noLocal ? 4 : 0) | (o.retainAsPublished ? 8 : 0) | (o.retainHandling << 4));
    out.u32(sub.identifier ?? 0);
    out.u64(sub.startSeq);
    const runs = runsOf(sub.again);
    const resume = sub.below > 0 && runs.length <= againLeft;
    if (resume) againLeft -= runs.length;
    out.u64(resume ? sub.below : 0);
    const again = resume ? runs : [];
    out.u32(again.length);
    for (const [first, count] of again) {
      out.u64(first);
      out.u32(count);
    }
    const flights = flightRuns(sub.flights);
    out.u32(flights.length);
    for (const [flight, count] of flights) {
      out.u64(flight.seq);
      out.u16(flight.packetId);
      out.u8(flight.qos);
      out.u32(count);
    }
  }
  out.u16(session.pubrelIds.length);
  for (const id of session.pubrelIds) out.u16(id);
  out.u16(session.qos2Received.length);
  for (const id of session.qos2Received) out.u16(id);
  const will = session.will;
  if (will !== null) {
    out.str(will.topic);
    out.bin(will.payload);
    out.bin(will.properties);
    out.u8(will.qos);
    out.u32(will.delayS);
    out.u64(will.dueUs);
  }
  return out.done();
}

/** A session's state from its bytes; null when they do not decode (a bug, or a newer format). */
export function decodeSessionState(bytes: Uint8Array): PersistedSession | null {
  try {
    const input = new In(bytes);
    if (input.u8() !== VERSION) return null;
    const clientId = input.str();
    const signedInAs = input.str();
    const expiryS = input.u32();
    const releasedUs = input.u64();
    const flags = input.u8();
    const subscriptions: PersistedSubscription[] = [];
    for (let n = input.u16(); n > 0; n--) {
      const filter = input.str();
      const o = input.u8();
      const qos = (o & 3) as QoS;
      const retainHandling = (o >> 4) as 0 | 1 | 2;
      if (qos > 2 || retainHandling > 2) return null;
      const options: Subscription = {
        filter,
        qos,
        noLocal: (o & 4) !== 0,
        retainAsPublished: (o & 8) !== 0,
        retainHandling,
      };
      const id = input.u32();
      const startSeq = input.u64();
      const below = input.u64();
      const again: number[] = [];
      for (let k = input.u32(); k > 0; k--) {
        const first = input.u64();
        const count = input.u32();
        if (count > 1 << 24) return null;
        for (let i = 0; i < count; i++) again.push(first + i);
      }
      const flights: PersistedFlight[] = [];
      for (let k = input.u32(); k > 0; k--) {
        const seq = input.u64();
        let packetId = input.u16();
        const flightQos = input.u8() as QoS;
        const count = input.u32();
        if (count > 65_535 || packetId === 0 || flightQos === 0 || flightQos > 2) return null;
        for (let i = 0; i < count; i++, packetId = nextId(packetId))
          flights.push({ seq: seq + i, packetId, qos: flightQos });
      }
      const identifier = id === 0 ? undefined : id;
      subscriptions.push({ filter, options, identifier, startSeq, below, again, flights });
    }
    const pubrelIds: number[] = [];
    for (let n = input.u16(); n > 0; n--) pubrelIds.push(input.u16());
    const qos2Received: number[] = [];
    for (let n = input.u16(); n > 0; n--) qos2Received.push(input.u16());
    let will: PersistedWill | null = null;
    if ((flags & 2) !== 0) {
      const topic = input.str();
      const payload = input.bin();
      const properties = input.bin();
      const qos = input.u8() as QoS;
      const delayS = input.u32();
      const dueUs = input.u64();
      will = { topic, payload, properties, qos, delayS, dueUs };
    }
    if (!input.ended) return null;
    const connected = (flags & 1) !== 0;
    return {
      clientId,
      signedInAs,
      expiryS,
      releasedUs,
      connected,
      subscriptions,
      pubrelIds,
      qos2Received,
      will,
    };
  } catch {
    return null;
  }
}
