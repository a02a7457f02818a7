/**
 * Follower: the loop of a replica (`aria serve --follow URL`). It connects to the leader as a
 * client, subscribes to the whole stream `**` with PROPERTIES from its own next seq, and hands
 * each DATA batch to its broker, which appends it with the leader's seqs and publish times
 * (Sequencer.replicate), commits it under its own fsync policy and delivers it to its own
 * subscribers as the leader would. A lost connection, a gap or a reorder (a seq that is not the
 * next one) ends the session: it logs, waits with back-off, connects again and resumes from its
 * own next seq. Nothing is ever written around a gap.
 *
 * On each connect it checks it still continues the leader's log: the leader's next seq (a live
 * subscription's SUBSCRIBED) must not be below its own (a replica AHEAD of its leader is refused),
 * and its newest message is asked for again and compared whole (seq, time, topic, payload,
 * properties; a disagreement is refused). When the leader no longer holds the replica's next seq
 * (retention removed it) the replica stops, unless it is empty: it then begins at the leader's
 * oldest held seq (Store.beginAt, durably). A leader holding no message at all is found by a
 * probe read from the replica's next seq (no first batch would come to say so): the replica stops
 * at once, or, empty, begins at the leader's next seq. A leader that refuses it as itself (its own
 * node id: a --follow URL pointing at this server) stops it too. Those are fatal (ReplicaError,
 * with the exit code of `aria serve`): nothing is appended, and the operator decides
 * (docs/cluster.md).
 *
 * Not here: sockets (the client comes from `connect`), timers (`sleep`), storage (the broker).
 * Invariants: the broker's next seq only moves by replicate(), one batch at a time, each seq the
 * next; a batch not continuing it is never appended.
 */
import type { AriaClient, MessageBatch } from "../client/mod.ts";
import type { Log } from "../stdx/log.ts";
import { REPLICA_NAME_PREFIX, SELF_FOLLOW_REFUSAL } from "./tracker.ts";

/** What the follower asks of its broker (broker.ts, replica section). */
export interface ReplicaBroker {
  readonly nextSeq: number;
  /** The last seq durable here (under --fsync never: written). */
  readonly durableSeq: number;
  replicate(messages: MessageBatch): string | null;
  /** An empty replica begins at `seq` (durably): the leader's oldest held seq. */
  beginAt(seq: number): Promise<void>;
  storeBacklog(): Promise<void> | null;
  /** Resolves once every seq below `seq` is durable here. */
  whenVisible(seq: number): Promise<void>;
}

/** One message of the log, whole: what is compared with the leader's copy on connect. */
export interface LogMessage {
  seq: number;
  timeUs: number;
  topic: string;
  payload: Uint8Array;
  properties: Uint8Array;
}

/** Why a replica cannot go on following (its exit code is `aria serve`'s: FATAL_EXIT). */
export type ReplicaFailure =
  | "leader_lacks_next_seq"
  | "ahead_of_leader"
  | "diverged"
  | "follows_itself";

/** A fatal condition of a replica: it stops, and the operator decides. */
export class ReplicaError extends Error {
  constructor(
    readonly kind: ReplicaFailure,
    message: string,
  ) {
    super(message);
  }
}

/** What a follower is built from. */
export interface FollowerOptions {
  leaderUrl: string;
  /** This replica's name at the leader (`--node-id`): its subscription is `$replica/<nodeId>`. */
  nodeId: string;
  broker: ReplicaBroker;
  /** Connects to the leader (signed in, TLS as the flags say; no reconnect of its own). */
  connect(url: string): Promise<AriaClient>;
  sleep(ms: number): Promise<void>;
  /** This replica's newest message (read from its store at start), or null when it is empty. */
  last: LogMessage | null;
  log: Log;
  /** Called once with the fatal condition; the loop has ended. */
  onFatal(error: ReplicaError): void;
  /** First back-off delay; doubles up to backoffMaxMs. */
  backoffMs?: number;
  backoffMaxMs?: number;
}

/** Where a follower is, for metrics and tests. */
export interface FollowerStatus {
  connected: boolean;
  /** Sessions begun (connects that completed). */
  sessions: number;
  /** Sessions ended by a gap or a refused batch (a reconnect resumed them). */
  gaps: number;
}

/** Follows a leader until stopped or a fatal condition. */
export class Follower {
  readonly status: FollowerStatus = { connected: false, sessions: 0, gaps: 0 };
  private last: LogMessage | null;
  private stopped = false;
  private client: AriaClient | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly options: FollowerOptions) {
    this.last = options.last;
  }

  /** Starts the loop (once). */
  start(): void {
    this.running ??= this.loop();
  }

  /** Ends the loop and its connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.client?.close();
    await this.running;
  }

  private async loop(): Promise<void> {
    const { log, leaderUrl } = this.options;
    const backoffMin = this.options.backoffMs ?? 100;
    const backoffMax = this.options.backoffMaxMs ?? 2000;
    let backoff = backoffMin;
    while (!this.stopped) {
      let client: AriaClient;
      try {
        client = await this.options.connect(leaderUrl);
      } catch (error) {
        log.warn("replica: cannot connect to the leader; retrying", {
          leader: leaderUrl,
          reason: reasonOf(error),
          retryMs: backoff,
        });
        await this.options.sleep(backoff);
        backoff = Math.min(backoff * 2, backoffMax);
        continue;
      }
      this.client = client;
      this.status.connected = true;
      this.status.sessions++;
      const nextBefore = this.options.broker.nextSeq;
      try {
        if (this.stopped) break;
        log.info("replica: following the leader", { leader: leaderUrl, nextSeq: nextBefore });
        await this.session(client);
      } catch (caught) {
        // The leader refused this replica as itself (tracker.ts): following on cannot help.
        const error =
          caught instanceof Error && caught.message.includes(SELF_FOLLOW_REFUSAL)
            ? new ReplicaError("follows_itself", caught.message)
            : caught;
        if (error instanceof ReplicaError) {
          log.error(`replica: ${error.message}`, { leader: leaderUrl, kind: error.kind });
          this.stopped = true;
          this.status.connected = false;
          await client.close();
          this.options.onFatal(error);
          return;
        }
        if (!this.stopped)
          log.warn("replica: the connection to the leader ended; resuming", {
            leader: leaderUrl,
            reason: reasonOf(error),
            nextSeq: this.options.broker.nextSeq,
          });
      } finally {
        this.status.connected = false;
        this.client = null;
      }
      await client.close();
      if (this.stopped) break;
      // A session that moved on starts the back-off again.
      if (this.options.broker.nextSeq > nextBefore) backoff = backoffMin;
      await this.options.sleep(backoff);
      backoff = Math.min(backoff * 2, backoffMax);
    }
  }

  /** One connection: the checks, then the stream until it ends (returns) or fails (throws). */
  private async session(client: AriaClient): Promise<void> {
    const broker = this.options.broker;
    const leaderNext = await leaderNextSeq(client);
    const next = broker.nextSeq;
    if (next > leaderNext)
      throw new ReplicaError(
        "ahead_of_leader",
        `this replica holds seqs up to ${next - 1} but the leader's next seq is ${leaderNext}: its data directory is not a copy of this leader's log (refused; see docs/cluster.md)`,
      );
    if (leaderNext > next && !(await leaderHoldsFrom(client, next))) {
      // The leader holds nothing at all (retention removed everything): no first batch will say
      // so until a new message is published. An empty replica begins at the leader's next seq.
      if (this.last === null && next === 1) {
        this.options.log.info(
          "replica: empty, the leader holds nothing; beginning at its next seq",
          {
            leader: this.options.leaderUrl,
            seq: leaderNext,
          },
        );
        await broker.beginAt(leaderNext);
      } else throw lacksNextSeq(next, `it holds nothing; its next seq is ${leaderNext}`);
    }
    const last = this.last;
    // From the newest message held, to compare it; from the next seq when none is held (seq 1
    // when empty: the leader's oldest held comes first, where an empty replica begins).
    const from = last === null ? next : last.seq;
    // DURABLE $replica/<node-id>: the leader starts it where this says and takes its ACKs as the
    // seq this replica holds durably (src/replica/tracker.ts), sent once its own commit is done.
    const subscription = client.subscribe("**", {
      from: { seq: from },
      properties: true,
      durable: `${REPLICA_NAME_PREFIX}${this.options.nodeId}`,
      ack: "manual",
    });
    const report = () => subscription.acknowledge(broker.durableSeq);
    if (broker.durableSeq >= from) report();
    let first = true;
    for await (const frame of subscription.frames()) {
      let batch: MessageBatch | null = frame;
      if (first) {
        first = false;
        await this.beginAtOldest(frame);
        batch = this.checkFirst(frame);
        if (batch === null) continue;
      }
      if (batch.firstSeq !== broker.nextSeq) {
        this.status.gaps++;
        this.options.log.error("replica: a gap or reorder in the leader's stream; reconnecting", {
          expected: broker.nextSeq,
          received: batch.firstSeq,
        });
        return;
      }
      const refused = broker.replicate(batch);
      if (refused !== null) {
        this.status.gaps++;
        this.options.log.error("replica: a batch of the leader was refused; reconnecting", {
          reason: refused,
        });
        return;
      }
      this.last = lastOf(batch);
      void broker.whenVisible(broker.nextSeq).then(report);
      const backlog = broker.storeBacklog();
      if (backlog !== null) await backlog;
    }
  }

  /**
   * An EMPTY replica (nothing ever appended) whose leader's oldest held seq is above 1 (its
   * retention removed seq 1) begins there, as a new Kafka follower begins at the leader's log
   * start offset: nothing below it can be copied, and nothing is missing from what it will hold.
   * A replica holding anything needs its own next seq and gets no such start (checkFirst).
   */
  private async beginAtOldest(batch: MessageBatch): Promise<void> {
    const broker = this.options.broker;
    if (this.last !== null || broker.nextSeq !== 1 || batch.firstSeq <= 1) return;
    this.options.log.info("replica: empty; beginning at the leader's oldest held seq", {
      leader: this.options.leaderUrl,
      seq: batch.firstSeq,
    });
    await broker.beginAt(batch.firstSeq);
  }

  /**
   * The first batch of a session: its first message is the replica's newest one again (compared
   * whole) or, when it holds none, its next seq (an empty one's begins at the first: see
   * beginAtOldest). Returns what follows it, or null when nothing.
   */
  private checkFirst(batch: MessageBatch): MessageBatch | null {
    const next = this.options.broker.nextSeq;
    const last = this.last;
    batch.rewind();
    batch.next();
    const seq = batch.seq;
    if (last !== null && seq === last.seq) {
      const problem = difference(last, batch);
      batch.rewind();
      if (problem !== null)
        throw new ReplicaError(
          "diverged",
          `this replica's seq ${seq} differs from the leader's (${problem}): the logs disagree (refused; see docs/cluster.md)`,
        );
      return batch.copy(next);
    }
    batch.rewind();
    if (seq > next) throw lacksNextSeq(next, `its oldest is ${seq}`);
    return batch;
  }
}

/** The leader no longer holds `next`, the seq this replica needs: exit 8. */
function lacksNextSeq(next: number, leaderHolds: string): ReplicaError {
  return new ReplicaError(
    "leader_lacks_next_seq",
    `the leader no longer holds seq ${next}, the next this replica needs (${leaderHolds}; retention removed the rest): give this replica a copy of the leader's data directory, taken while the leader is stopped (see docs/cluster.md)`,
  );
}

/** Whether the leader holds any message at or after `seq` (a probe read until caught up). */
async function leaderHoldsFrom(client: AriaClient, seq: number): Promise<boolean> {
  const probe = client.subscribe("**", { from: { seq }, untilCaughtUp: true });
  for await (const _ of probe.frames()) return true;
  return false;
}

/** The leader's next seq: what a live subscription's SUBSCRIBED says. */
async function leaderNextSeq(client: AriaClient): Promise<number> {
  const probe = client.subscribe("**", { from: "live", untilCaughtUp: true });
  for await (const _ of probe.frames()) break;
  const seq = probe.resumeSeq;
  if (seq === null) throw new Error("the leader ended the probe subscription before SUBSCRIBED");
  return seq;
}

/** The last message of `batch`, copied. */
function lastOf(batch: MessageBatch): LogMessage {
  batch.rewind();
  while (batch.remaining > 1) batch.next();
  batch.next();
  const message = {
    seq: batch.seq,
    timeUs: batch.timeUs,
    topic: batch.topic,
    payload: batch.payload.slice(),
    properties: batch.properties.slice(),
  };
  batch.rewind();
  return message;
}

/** What differs between `held` and the batch's current message, or null. */
function difference(held: LogMessage, batch: MessageBatch): string | null {
  if (held.timeUs !== batch.timeUs) return `time ${held.timeUs} µs here, ${batch.timeUs} µs there`;
  if (held.topic !== batch.topic) return `topic "${held.topic}" here, "${batch.topic}" there`;
  if (!equalBytes(held.payload, batch.payload)) return "payloads differ";
  if (!equalBytes(held.properties, batch.properties)) return "properties differ";
  return null;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
