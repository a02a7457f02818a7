/**
 * ReplicaTracker: the leader's view of its replicas. A replica follows through a subscription
 * DURABLE `$replica/<node-id>` to `**` and ACKs the seq up to which its own store is durable;
 * here each replica's durable seq, whether it is connected, and whether it is in sync (ISR: it
 * joins once caught up — holding every seq the leader holds durably — and stays while connected
 * and caught up within the last `isrMaxLagUs` of the leader's clock; a quiet spell does not
 * count against it). `ackableSeq` says up to which seq a PUBLISH_ACK may go under `--acks`:
 * `leader` the leader's durable seq; `quorum` the seq a majority of the cluster (leader + every
 * replica seen since start, or `--replicas N` of them) holds durably; `all` the seq every in-sync
 * replica holds (the leader alone when none is in sync: docs/cluster.md says why).
 *
 * Not the consumer registry's: a replica's subscription starts where its SUBSCRIBE says (its own
 * next seq), never at a stored position, and its ACKs are not persisted in consumers.log (the
 * replica's store is the record of what it holds). Not here: the frames (dispatch.ts), the held
 * acks (sequencer.ts). Pure: the leader's durable seq and the time of a seq come in through
 * TrackedLog, and so does the clock. Invariants: a replica's durable seq is the highest it
 * reported since its subscription opened (a new subscription's start seq resets it: a replica
 * rebuilt empty holds nothing); a subscription maps to one replica.
 */
import type { Log } from "../stdx/log.ts";

/** The refusal of a replica whose node id is the server's own (the follower exits 9 on it). */
export const SELF_FOLLOW_REFUSAL = "a server cannot follow itself";

/** The durable consumer names of replicas: `$replica/<node-id>`. */
export const REPLICA_NAME_PREFIX = "$replica/";

/** When a PUBLISH is acknowledged (`aria serve --acks`). */
export type AckMode = "leader" | "quorum" | "all";

/** The acknowledgement modes, as the flag takes them. */
export const ACK_MODES: readonly AckMode[] = ["leader", "quorum", "all"];

/** One replica as /metrics, /api/stats and the web UI show it. */
export interface ReplicaInfo {
  id: string;
  connected: boolean;
  /** The last seq the replica reported durable (0: none yet). */
  durableSeq: number;
  /** Messages the leader holds durably beyond it. */
  lagMessages: number;
  /**
   * Time since the replica was last caught up (ms; 0 when it holds every durable seq); null:
   * unknown (never caught up and its first missing message left the leader's tip).
   */
  lagMs: number | null;
  inSync: boolean;
}

/** What the tracker reads of the leader's log. */
export interface TrackedLog {
  /** The leader's last durable seq. */
  readonly durableSeq: number;
  /** The publish time (µs) of `seq`, or null when no longer at hand (out of the tip). */
  timeOfSeq(seq: number): number | null;
  /** The leader's clock (µs), the one publish times are stamped with. */
  nowUs(): number;
}

interface Replica {
  id: string;
  durableSeq: number;
  subscriptions: number;
  inSync: boolean;
  /** When it was last seen holding the leader's durable seq (µs, leader's clock; 0: never). */
  caughtUpAtUs: number;
}

/** What the tracker is built from. */
export interface ReplicaTrackerOptions {
  log?: Log;
  acks?: AckMode;
  /** A replica not caught up within this long (µs) leaves the ISR. */
  isrMaxLagUs?: number;
  /** Called when `ackableSeq` may have moved (an ACK, a replica leaving or joining the ISR). */
  onAckable?: () => void;
  /**
   * The replicas the cluster has (`--replicas N`) whether seen yet or not: `quorum` counts the
   * ones not seen as holding nothing (a leader just restarted waits for them); absent: those
   * seen since start.
   */
  replicasExpected?: number;
  /** This server's own node id, when it has one (a replica): a replica of that id is refused. */
  nodeId?: string;
}

/** Default ISR bound: 10 s. */
export const ISR_MAX_LAG_US_DEFAULT = 10_000_000;

/** The leader's replicas: durable seqs, connection, ISR, and the seq acks may go up to. */
export class ReplicaTracker {
  readonly acks: AckMode;
  private readonly replicas = new Map<string, Replica>();
  private readonly bySubscription = new Map<object, Replica>();
  private readonly isrMaxLagUs: number;
  /** Times a replica left the ISR since start. */
  isrShrinks = 0;
  onAckable: () => void;

  constructor(
    private readonly leader: TrackedLog,
    private readonly options: ReplicaTrackerOptions = {},
  ) {
    this.acks = options.acks ?? "leader";
    this.isrMaxLagUs = options.isrMaxLagUs ?? ISR_MAX_LAG_US_DEFAULT;
    this.onAckable = options.onAckable ?? (() => {});
  }

  /** Why `clientName` may not follow as replica `name` with `filter` (null: it may). */
  refusal(clientName: string, filter: readonly string[], name?: string): string | null {
    if (clientName !== "aria-replica")
      return `durable consumer names starting ${REPLICA_NAME_PREFIX} are replicas' (aria serve --follow); use another name`;
    if (filter.length !== 1 || filter[0] !== "**")
      return "a replica follows the whole stream: its filter is **";
    const own = this.options.nodeId;
    if (own !== undefined && name === `${REPLICA_NAME_PREFIX}${own}`)
      return `${SELF_FOLLOW_REFUSAL} (node id "${own}"): its --follow URL points at itself`;
    return null;
  }

  /**
   * A replica's subscription opened (`name` is `$replica/<node-id>`) at `startSeq`, the replica's
   * next seq or its newest held: what it holds durably is below it (a replica rebuilt on an empty
   * data directory under the same node id reports less than before; it reports more at once).
   */
  attach(name: string, subscription: object, startSeq?: number): void {
    const id = name.slice(REPLICA_NAME_PREFIX.length);
    let replica = this.replicas.get(id);
    if (replica === undefined) {
      replica = { id, durableSeq: 0, subscriptions: 0, inSync: false, caughtUpAtUs: 0 };
      this.replicas.set(id, replica);
      this.options.log?.info("replica connected for the first time", { replica: id });
    }
    if (startSeq !== undefined && startSeq - 1 < replica.durableSeq) {
      replica.durableSeq = Math.max(0, startSeq - 1);
      this.review(replica);
    }
    replica.subscriptions++;
    this.bySubscription.set(subscription, replica);
  }

  /** A subscription closed: when it was a replica's, that replica may be disconnected. */
  detach(subscription: object): void {
    const replica = this.bySubscription.get(subscription);
    if (replica === undefined) return;
    this.bySubscription.delete(subscription);
    replica.subscriptions--;
    if (replica.subscriptions === 0) {
      this.options.log?.warn("replica disconnected", {
        replica: replica.id,
        durableSeq: replica.durableSeq,
      });
      this.setInSync(replica, false);
    }
  }

  /** An ACK: true when it was a replica's (recorded), false for any other subscription. */
  ack(subscription: object, seq: number): boolean {
    const replica = this.bySubscription.get(subscription);
    if (replica === undefined) return false;
    if (seq > replica.durableSeq) replica.durableSeq = seq;
    this.review(replica);
    this.onAckable();
    return true;
  }

  /** Re-checks every replica's ISR membership (the leader's end moved; a timer calls it too). */
  reviewAll(): void {
    for (const replica of this.replicas.values()) this.review(replica);
  }

  /** The highest seq a PUBLISH_ACK may cover under `acks` (at most the leader's durable seq). */
  ackableSeq(): number {
    const leaderSeq = this.leader.durableSeq;
    if (this.acks === "leader") return leaderSeq;
    if (this.acks === "quorum") {
      // A majority of leader + replicas; the leader is one of them. Replicas expected but not
      // seen hold nothing yet.
      const total = Math.max(this.replicas.size, this.options.replicasExpected ?? 0);
      const needed = Math.floor((total + 1) / 2);
      if (needed === 0) return leaderSeq;
      const seqs = [...this.replicas.values()].map((r) => r.durableSeq).sort((a, b) => b - a);
      return Math.min(leaderSeq, seqs[needed - 1] ?? 0);
    }
    let ackable = leaderSeq;
    for (const replica of this.replicas.values())
      if (replica.inSync) ackable = Math.min(ackable, replica.durableSeq);
    return ackable;
  }

  /** Every replica seen since start, by id. */
  list(): ReplicaInfo[] {
    const leaderSeq = this.leader.durableSeq;
    const rows: ReplicaInfo[] = [];
    for (const replica of this.replicas.values()) {
      const lagUs = this.lagUs(replica);
      rows.push({
        id: replica.id,
        connected: replica.subscriptions > 0,
        durableSeq: replica.durableSeq,
        lagMessages: Math.max(0, leaderSeq - replica.durableSeq),
        lagMs: lagUs === null ? null : lagUs / 1000,
        inSync: replica.inSync,
      });
    }
    rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return rows;
  }

  /**
   * Time since the replica was last caught up (µs; 0 when it is), or null when unknown. It was
   * caught up when last seen holding the leader's durable seq, and until the leader published
   * the first seq it lacks: a quiet spell of the leader does not count against it.
   */
  private lagUs(replica: Replica): number | null {
    const now = this.leader.nowUs();
    if (replica.durableSeq >= this.leader.durableSeq) {
      replica.caughtUpAtUs = now;
      return 0;
    }
    const missingSince = this.leader.timeOfSeq(replica.durableSeq + 1);
    const since = Math.max(replica.caughtUpAtUs, missingSince ?? 0);
    return since === 0 ? null : Math.max(0, now - since);
  }

  private review(replica: Replica): void {
    if (replica.subscriptions === 0) return this.setInSync(replica, false);
    const lag = this.lagUs(replica);
    // Kafka's rule both ways: out of the set, a replica joins only once it holds everything the
    // leader holds durably (lag 0); in it, it stays while it was caught up within the bound.
    const bound = replica.inSync ? this.isrMaxLagUs : 0;
    this.setInSync(replica, lag !== null && lag <= bound);
  }

  private setInSync(replica: Replica, inSync: boolean): void {
    if (replica.inSync === inSync) return;
    replica.inSync = inSync;
    if (inSync) this.options.log?.info("replica joined the in-sync set", { replica: replica.id });
    else {
      this.isrShrinks++;
      this.options.log?.warn("replica left the in-sync set", {
        replica: replica.id,
        durableSeq: replica.durableSeq,
        leaderDurableSeq: this.leader.durableSeq,
      });
    }
    this.onAckable();
  }
}
