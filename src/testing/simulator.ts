/**
 * Simulator: runs the real broker, tip and store under simulated time, network and disk, driven
 * by one seeded Prng, and checks Aria's invariants after every step (src/testing/invariants.ts).
 *
 *   seed ─▶ Prng ─▶ config (fsync policy, tiny limits) + topic tree + clients
 *   step k: advance the clock ─▶ one action (publish, subscribe, unsubscribe, slow/stall a client,
 *           disconnect at any byte, crash the process or the machine now or at the n-th disk op,
 *           fail an fsync, fill the disk, jump in time, split) ─▶ drain until quiescent ─▶ check
 *           invariants
 *   end: stop faults, reconnect and drain everyone, split once more, check every subscription
 *        got everything
 *
 * Quiescent means: no broker task queued, no timer due, and no promise pending — the store and
 * SimDisk only ever wait on microtasks, so one macrotask turn (setImmediate, used as a barrier,
 * never as a timer) lets every chain of I/O finish — and no split in flight (its ops, and the
 * store's meanwhile, wait at a gate each round opens a little). Every choice comes from the Prng
 * and every container iterates in insertion order, so a seed replays byte for byte (TraceHash).
 *
 * A crash drops the broker, tip and store of the dead process (its scheduler is abandoned, its
 * connections swallow writes, its disk view fails with EBADF), crashes the SimDisk (power loss:
 * unsynced data lost, last write cut at a random byte) or kills the process (written data
 * survives), then reopens the Store (recovery), checks what it holds against the reference,
 * refills the tip from `store.readNewest`, builds a new Broker, and clients reconnect.
 *
 * A split runs `aria split` as a running server does it: the split executor (src/split) over the
 * live Store's host, tasks in-process over the same life's disk. While it runs, every disk op of
 * the process — the split's, the journal's, the sorter's, the readers' — and each host call waits
 * at one gate the drain loop opens a few ops per round, so the split, the store and broker work
 * (publishes, subscriptions, replays from earliest reading the disk) interleave op by op. A crash
 * may be armed at a random op of the split; after it, recovery must leave the old layout or the
 * new one in force (never a mix) and the store must read back every message exactly once.
 *
 * Durability by policy: under `always` an acknowledged message is fsynced, so both power loss and
 * kill -9 must keep it. Under `interval`/`never` a message is acknowledged once written: a power
 * loss may lose it (the policy's documented risk), so those runs crash only the process (written
 * data survives in the page cache), where "every acknowledged message survives" still holds.
 */
import { Broker } from "../broker/broker.ts";
import type { BrokerStore, StoredMessageLike } from "../broker/ports.ts";
import type { Session } from "../broker/session.ts";
import {
  CONNECTION_BUFFERED_BYTES_MAX,
  FRAME_BYTES_MAX,
  RECORD_HEADER_BYTES,
} from "../constants.ts";
import type { StartPosition } from "../protocol/mod.ts";
import { executeSplit, type SplitHost, type SplitReport } from "../split/executor.ts";
import { inProcessRunner, storeHost } from "../split/in_process.ts";
import { SPLIT_ALGORITHMS } from "../split/plan.ts";
import { assert } from "../stdx/assert.ts";
import { Prng } from "../stdx/prng.ts";
import {
  crc32,
  type Disk,
  DiskError,
  type DiskFile,
  type FsyncPolicy,
  type LayoutSwap,
  type PartitionLayout,
  type RepairReport,
  repairStore,
  type SegmentMeta,
  Store,
  StoreError,
  type StoreOptions,
  type SubtreeStoreMeta,
} from "../store/mod.ts";
import { decodeFileHeader } from "../store/file_header.ts";
import { parseFileName, SEGMENT_DIR } from "../store/layout.ts";
import { isSubtreeStore } from "../store/subtree_store_file.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Checker, check, InvariantViolation } from "./invariants.ts";
import type { ReferenceMessage } from "./reference_stream.ts";
import { type ClientSubscription, SimClient } from "./sim_client.ts";
import { DurableProbe } from "./sim_durable.ts";
import { SimClock, SimScheduler } from "./sim_clock.ts";
import { SimDisk } from "./sim_disk.ts";
import { DiskOpClock, faultDisk, type LifeToken } from "./sim_fault_disk.ts";
import { NetworkTamper, SimConnection } from "./sim_network.ts";
import { TraceHash } from "./sim_trace.ts";
import {
  makeFilter,
  makeLargePayload,
  makePayload,
  makeStart,
  makeTopicTree,
  pickTopic,
  type TopicTree,
} from "./workload.ts";

/** Bugs `--inject-bug` plants at the edge of the simulated world. */
export const INJECT_BUGS = ["drop-one", "reorder", "lose-acked", "stalled-unbounded"] as const;
/** A plantable bug. */
export type InjectBug = (typeof INJECT_BUGS)[number];

/** What to simulate. */
export interface SimulationOptions {
  seed: number;
  steps: number;
  injectBug?: InjectBug | null;
  /**
   * Damage files at rest between a kill and the restart (bit flips, cuts, deleted files in
   * journals, segments, packs, subtree stores and MANIFEST), under `--fsync always`; a store that
   * refuses is repaired (repairStore) and only the seqs it reports lost may be missing.
   */
  damage?: boolean;
  /**
   * A durable consumer rides along (sim_durable.ts): it acknowledges, hangs up and lives through
   * the crashes; where each of its subscriptions starts is checked (no gap, no regression).
   */
  durable?: boolean;
  /** Called after each step with its number (a progress display; it must not touch the simulation). */
  onStep?: (step: number) => void;
}

/** The first broken invariant of a run. */
export interface SimulationFailure {
  step: number;
  invariant: string;
  details: string;
}

/** The outcome of one seed. */
export interface SimulationResult {
  seed: number;
  steps: number;
  ok: boolean;
  failure: SimulationFailure | null;
  /** Hash of every byte clients received and every disk write: equal for equal seeds. */
  traceHash: string;
  summary: {
    fsync: FsyncPolicy;
    messages: number;
    acked: number;
    delivered: number;
    /** Of the deliveries, those live fan-out made through frames shared by equal filters. */
    deliveredShared: number;
    crashes: number;
    restarts: number;
    disconnects: number;
    storageFailures: number;
    /** Publishes answered ARIA_ERR_STORAGE_FAILED. */
    failedPublishes: number;
    diskOps: number;
    /** Most bytes a session's send queue held beyond its limit (after a step). */
    queueOvershootBytesMax: number;
    /** Most bytes a subscriber's session held (Session.heldBytes, after a step). */
    subscriberHeldBytesMax: number;
    /** Splits that switched the layout. */
    splitsSwitched: number;
    /** Splits that found the layout already planned (or nothing closed). */
    splitsUnchanged: number;
    /** Splits whose process crashed under them. */
    splitsCut: number;
    /** Splits that failed on an injected fault (EIO, ENOSPC) or a failed store; nothing switched. */
    splitsFailed: number;
    /** Closed files retention chose to remove (the run's log stays bounded by them). */
    filesRetained: number;
    /** Files damaged at rest (`damage`), repairs run on a refusal, and seqs they reported lost. */
    damaged: number;
    repairs: number;
    seqsLost: number;
  };
}

const START_US = 1_700_000_000_000_000;
/** A planted network bug waits this many steps (a constant: `--steps k` must replay step k exactly). */
const TAMPER_FROM_STEP = 10;
/** What a subscriber's queue may hold past its limit: one largest simulated message and a few control frames. */
const SUBSCRIBER_QUEUE_SLACK_BYTES = 4096 + 512;
/**
 * Memory a subscriber's session may hold for it (send queue chunks, frame writer, decoder carry:
 * Session.heldBytes), however long it stops reading: within issue 28's target of 256 KiB per
 * stalled subscriber beyond the kernel's buffers, the connection's buffer budget and 64 KiB (a
 * 16 KiB queue chunk past the limit, the writer). A stalled subscriber keeps a position, not a
 * copy of the stream. (At twice the budget, 16 KiB chunks let stalled-unbounded slip by 3 seeds
 * of 10.)
 */
const SUBSCRIBER_HELD_BYTES_MAX = CONNECTION_BUFFERED_BYTES_MAX + 64 * 1024;
/** Steps a long stall lasts at most (then the subscriber reads again, or hangs up). */
const LONG_STALL_STEPS_MAX = 300;
/** Messages one topic flood publishes, each to a topic never seen before (at most). */
const FLOOD_MESSAGES_MAX = 64;
/** Steps a run keeps reconnecting and draining at the end before it must be settled. */
const SETTLE_ROUNDS_MAX = 40;
/** Subscriptions a simulated client holds at most (closing ones aside). */
const SUBSCRIPTIONS_MAX = 4;
/** Drain rounds a split may wait with no op at its gate before the world counts as stuck. */
const SPLIT_IDLE_ROUNDS_MAX = 1000;
/** Disk ops a split is first guessed to take (where an armed crash lands); then the last split's count. */
const SPLIT_OPS_GUESS = 60;

/** Runs one seed; never throws for an invariant (it is returned). */
export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const simulation = new Simulation(options);
  return simulation.run();
}

/** The command that replays a failure. */
export function replayCommand(
  seed: number,
  step: number,
  injectBug?: InjectBug | null,
  damage = false,
): string {
  return `aria simulate --seed ${seed} --steps ${step}${injectBug ? ` --inject-bug ${injectBug}` : ""}${damage ? " --damage" : ""}`;
}

// ---- Configuration -------------------------------------------------------------------------

interface Config {
  fsync: FsyncPolicy;
  tipBytes: number;
  poolBlocks: number;
  sendQueueBytesMax: number;
  catchUpSliceBytes: number;
  store: StoreOptions;
  /** The server's retention (`--retain-bytes`, `--retain-age`): it keeps the log bounded. */
  retain: RetainLimits;
  publishers: number;
  subscribers: number;
  /** Action weights. */
  weights: Record<ActionKind, number>;
}

type ActionKind =
  | "publish"
  | "subscribe"
  | "unsubscribe"
  | "read-mode"
  | "disconnect"
  | "cut-frame"
  | "kill"
  | "power-loss"
  | "crash-at-op"
  | "fsync-fails"
  | "disk-full"
  | "time-jump"
  | "split"
  | "stall-long"
  | "topic-flood"
  | "damage"
  | "durable"
  | "idle";

function pick<T>(prng: Prng, values: readonly T[]): T {
  return values[prng.nextInt(values.length)];
}

function makeConfig(prng: Prng, damage: boolean, durable: boolean): Config {
  const fsyncRoll = prng.nextInt(10);
  const fsync: FsyncPolicy = fsyncRoll < 7 ? "always" : fsyncRoll < 9 ? "interval" : "never";
  const journalBytesMax = pick(prng, [1024, 4096, 65536]);
  const faults = pick(prng, [0.5, 1, 2]);
  return {
    fsync,
    tipBytes: pick(prng, [1024, 2048, 4096, 16384, 65536]),
    poolBlocks: pick(prng, [2, 3, 8, 64]),
    sendQueueBytesMax: pick(prng, [1024, 4096, 16384, 65536]),
    catchUpSliceBytes: pick(prng, [256, 1024, 8192]),
    store: {
      fsync,
      fsyncIntervalMs: pick(prng, [1, 5, 50]),
      journalBytesMax,
      journalRetainedBytesMax: journalBytesMax * pick(prng, [2, 4, 64]),
      // Mostly small or young segments: the sorter closes them often, so splits have closed data.
      segmentBytesMax: pick(prng, [512, 2048, 65536]),
      segmentAgeUsMax: pick(prng, [20_000, 1_000_000, 600_000_000]),
      indexIntervalBytes: pick(prng, [128, 4096]),
      openFilesMax: pick(prng, [8, 32]),
      readBufferBytes: pick(prng, [4096, 65536]),
      readBatchBytesMax: pick(prng, [200, 4096, 1 << 20]),
    },
    publishers: 1 + prng.nextInt(3),
    subscribers: 1 + prng.nextInt(4),
    retain: {
      bytes: pick(prng, [16 << 10, 64 << 10, 256 << 10]),
      ageUs: pick(prng, [undefined, 30_000_000, 300_000_000]),
    },
    weights: {
      publish: 30,
      subscribe: 7,
      unsubscribe: 2,
      "read-mode": 8,
      disconnect: 2 * faults,
      "cut-frame": 1 * faults,
      kill: 0.7 * faults,
      "power-loss": fsync === "always" ? 0.7 * faults : 0,
      "crash-at-op": 1 * faults,
      "fsync-fails": 0.5 * faults,
      "disk-full": 0.4 * faults,
      "time-jump": 2,
      split: 1,
      "stall-long": 1,
      "topic-flood": 0.5,
      // Drawn only when asked for, so runs without it replay as before.
      damage: damage && fsync === "always" ? 0.5 * faults : 0,
      // The durable probe acts (acknowledges, hangs up) only when asked for, likewise.
      durable: durable ? 6 : 0,
      idle: 4,
    },
  };
}

// ---- The world -----------------------------------------------------------------------------

/** The broker→store port, observed: every append becomes part of the reference stream. */
class ObservedStore implements BrokerStore {
  constructor(
    readonly inner: Store,
    private readonly checker: Checker,
  ) {}

  get nextSeq(): number {
    return this.inner.nextSeq;
  }

  get committedSeq(): number {
    return this.inner.committedSeq;
  }

  get newestTimeUs(): number {
    return this.inner.newestTimeUs;
  }

  get firstSeqHeld(): number {
    return this.inner.firstSeqHeld;
  }

  get backlogged(): boolean {
    return this.inner.backlogged;
  }

  get retrying(): boolean {
    return this.inner.retrying;
  }

  whenCaughtUp(): Promise<void> {
    return this.inner.whenCaughtUp();
  }

  append(
    seq: number,
    timeUs: number,
    topic: string,
    payload: Uint8Array,
    start: number,
    length: number,
    _properties?: Uint8Array,
    _propertiesStart?: number,
    _propertiesBytes?: number,
    topicId?: number,
    partitionId?: number,
  ): void {
    // The broker's topic ids go through, so the store's entries by id meet reclaims here too.
    this.inner.append(seq, timeUs, topic, payload, start, length, null, 0, 0, topicId, partitionId);
    this.checker.onAppend(seq, timeUs, topic, payload.subarray(start, start + length));
  }

  commit(): Promise<void> {
    return this.inner.commit();
  }

  read(
    filter: Filter,
    from: { seq: number } | { timeUs: number },
    options?: { borrow?: boolean },
  ): { nextBatch(): Promise<StoredMessageLike[]> } {
    return this.inner.read(filter, from, options);
  }
}

/** One life of the server process. */
interface Life {
  token: LifeToken;
  /** The process's disk (a FaultDisk over this life's SimDisk view), through `gate`. */
  disk: Disk;
  /** Open, but closed while a split runs: the store's ops and the split's then take turns. */
  gate: OpGate;
  store: Store;
  tip: Tip;
  broker: Broker;
  scheduler: SimScheduler;
  connections: Set<SimConnection>;
  lastMaintainUs: number;
  /** The maintenance timer fired: retention runs once the world is quiet. */
  retentionDue: boolean;
}

class Simulation {
  private readonly prng: Prng;
  private readonly config: Config;
  private readonly clock = new SimClock(START_US);
  private readonly disk: SimDisk;
  private readonly opClock = new DiskOpClock();
  private readonly trace = new TraceHash();
  private readonly checker = new Checker();
  private readonly tamper: NetworkTamper;
  private readonly tree: TopicTree;
  private readonly clients: SimClient[] = [];
  private life: Life | null = null;
  /** The process recovering the store, while Store.open and the first reads run. */
  private recovering: LifeToken | null = null;
  private step = 0;
  private recorded: unknown = null;
  private crashPending: { committedBefore: number } | null = null;
  private restartAtStep = 0;
  private diskFullUntilStep = 0;
  private readonly loseAckedArmed: boolean;
  /** `--inject-bug stalled-unbounded`: subscriber sessions get no send-queue limit. */
  private readonly unboundedQueues: boolean;
  /** Subscribers stopped for many steps: the step they stop stalling, and whether they hang up then. */
  private readonly longStalls = new Map<SimClient, { untilStep: number; hangUp: boolean }>();
  private nextFloodTopic = 1;
  private nextConnectionLabel = 1;
  private nextPayloadTag = 1;
  private readonly counters = {
    crashes: 0,
    restarts: 0,
    storageFailures: 0,
    queueOvershootBytesMax: 0,
    subscriberHeldBytesMax: 0,
    /** Messages delivered through shared frames by the brokers of lives that ended. */
    deliveredShared: 0,
    splitsSwitched: 0,
    splitsUnchanged: 0,
    splitsCut: 0,
    splitsFailed: 0,
    filesRetained: 0,
    damaged: 0,
    repairs: 0,
    seqsLost: 0,
  };
  /** Damage done at rest since the last successful open: what a refusal may be about. */
  private damagedSinceOpen: string[] = [];
  /** The last few damages of the run, for a failure's details. */
  private readonly damageLog: string[] = [];
  /** A repair completed since the last refusal (reset by a new crash or damage, and an open). */
  private repairedSinceOpen = false;
  /** The split in flight (one at a time, as the data directory's LOCK allows), until it settles. */
  private split: SplitRun | null = null;
  /**
   * The first split since the last recovery whose outcome only the next open decides (a crash cut
   * it, or its switch failed and stopped the store): that recovery checks its layout is old or new.
   */
  private splitCut: SplitRun | null = null;
  /** Disk ops the last uncut split took: an armed crash lands within about that many. */
  private splitOpsEstimate = SPLIT_OPS_GUESS;
  /** The split at the end of the run (no faults) completed. */
  private finalSplitDone = false;
  /** The durable consumer riding along (SimulationOptions.durable), or null. */
  private readonly probe: DurableProbe | null;

  constructor(private readonly options: SimulationOptions) {
    this.prng = new Prng(options.seed);
    this.config = makeConfig(this.prng, options.damage === true, options.durable === true);
    this.probe = options.durable === true ? new DurableProbe(this.checker) : null;
    this.disk = new SimDisk({ seed: this.prng.nextU32() });
    this.tree = makeTopicTree(this.prng);
    const bug = options.injectBug ?? null;
    this.tamper = new NetworkTamper(
      bug === "drop-one" || bug === "reorder" ? bug : null,
      new Prng(options.seed ^ 0x5eed),
      TAMPER_FROM_STEP,
    );
    this.loseAckedArmed = bug === "lose-acked";
    this.unboundedQueues = bug === "stalled-unbounded";
    this.opClock.onCrash = () =>
      this.crash(
        this.config.fsync === "always" && this.prng.nextInt(2) === 0 ? "power" : "process",
      );
    this.checker.tipHeldFrom = () => {
      const records = this.life?.tip.records;
      return records !== undefined && records.count > 0
        ? records.firstSeq
        : Number.POSITIVE_INFINITY;
    };
    const world = { checker: this.checker, tamper: this.tamper, step: () => this.step };
    for (let i = 0; i < this.config.publishers; i++)
      this.clients.push(new SimClient(`pub${i + 1}`, true, false, world));
    for (let i = 0; i < this.config.subscribers; i++)
      this.clients.push(new SimClient(`sub${i + 1}`, false, true, world));
    if (this.prng.nextInt(3) === 0) this.clients.push(new SimClient("both", true, true, world));
  }

  async run(): Promise<SimulationResult> {
    let failure: SimulationFailure | null = null;
    try {
      await this.startLife(0);
      for (this.step = 1; this.step <= this.options.steps; this.step++) {
        await this.oneStep();
        this.options.onStep?.(this.step);
      }
      this.step = this.options.steps;
      await this.settle();
    } catch (error) {
      failure = this.describe(error);
    }
    const clientCounters = this.clients.map((c) => c.counters);
    return {
      seed: this.options.seed,
      steps: this.options.steps,
      ok: failure === null,
      failure,
      traceHash: this.trace.hex(),
      summary: {
        fsync: this.config.fsync,
        messages: this.checker.reference.length,
        acked: clientCounters.reduce((sum, c) => sum + c.acked, 0),
        delivered: this.checker.messagesChecked,
        deliveredShared:
          this.counters.deliveredShared + (this.life?.broker.stats().messagesDeliveredShared ?? 0),
        crashes: this.counters.crashes,
        restarts: this.counters.restarts,
        disconnects: clientCounters.reduce((sum, c) => sum + c.disconnects, 0),
        storageFailures: this.counters.storageFailures,
        failedPublishes: clientCounters.reduce((sum, c) => sum + c.failedPublishes, 0),
        diskOps: this.opClock.ops,
        queueOvershootBytesMax: this.counters.queueOvershootBytesMax,
        subscriberHeldBytesMax: this.counters.subscriberHeldBytesMax,
        splitsSwitched: this.counters.splitsSwitched,
        splitsUnchanged: this.counters.splitsUnchanged,
        splitsCut: this.counters.splitsCut,
        splitsFailed: this.counters.splitsFailed,
        filesRetained: this.counters.filesRetained,
        damaged: this.counters.damaged,
        repairs: this.counters.repairs,
        seqsLost: this.counters.seqsLost,
      },
    };
  }

  private describe(error: unknown): SimulationFailure {
    const damage =
      this.damageLog.length === 0 ? "" : ` [damage at rest so far: ${this.damageLog.join("; ")}]`;
    if (error instanceof InvariantViolation)
      return { step: this.step, invariant: error.invariant, details: error.details + damage };
    const message =
      error instanceof Error
        ? `${error.message}\n${(error.stack ?? "").split("\n").slice(1, 6).join("\n")}`
        : String(error);
    return { step: this.step, invariant: "no-exception", details: message };
  }

  /** Client callbacks run inside broker calls: their violations are kept and thrown after. */
  private guard(work: () => void): void {
    try {
      work();
    } catch (error) {
      this.recorded ??= error;
    }
  }

  private throwRecorded(): void {
    if (this.recorded !== null) throw this.recorded;
  }

  // ---- Lives ---------------------------------------------------------------------------------

  /** Opens the store (recovering), checks it against the reference, refills the tip, builds a broker. */
  private async startLife(committedBefore: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      check(attempt < 20, "recovery-succeeds", () => "recovery crashed 20 times in a row");
      this.crashPending = null;
      const token: LifeToken = { alive: true };
      this.recovering = token;
      const scheduler = new SimScheduler(this.clock);
      const gate = new OpGate();
      const disk = gatedDisk(faultDisk(this.disk.view(), this.opClock, this.trace, token), gate);
      const storeOptions: StoreOptions = { ...this.config.store, schedule: scheduler.schedule };
      let store: Store;
      let stored: ReferenceMessage[];
      let newest: ReferenceMessage[];
      try {
        const opened = await Store.open(disk, storeOptions);
        store = opened.store;
        // A manifest rebuilt from the files (one a crash tore, or damage) picks each partition's
        // layout by what its files hold (docs/storage.md): a cut split's stores may win in some
        // partitions and not others, both holding the same records. Only the reads are checked.
        if (opened.recovery.manifestRebuilt) this.splitCut = null;
        stored = await readAll(store);
        newest = await store.readNewest(this.config.tipBytes, {
          bytesOf: (m) => RECORD_HEADER_BYTES + ((m.payload.length + 7) & ~7),
        });
      } catch (error) {
        if (this.crashPending !== null) continue; // crashed again during recovery: recover again
        if (
          error instanceof StoreError &&
          error.code === "ARIA_ERR_STORE_CORRUPT" &&
          this.damagedSinceOpen.length > 0
        ) {
          // Refused for the damage done at rest: the operator runs `aria repair`, then starts.
          // Once repaired (and no crash cut the repair), the store must open.
          check(
            !this.repairedSinceOpen,
            "repair-makes-servable",
            () =>
              `after ${this.damagedSinceOpen.join("; ")} and a repair, the store still refuses: ${error.message}`,
          );
          token.alive = false;
          this.disk.kill();
          await this.repair(storeOptions);
          continue;
        }
        // An injected fsync failure or a full disk may hit recovery too: the operator retries.
        const code = (error as { code?: string }).code;
        const cause = (error as Error).message;
        if (
          code === "EIO" ||
          code === "ENOSPC" ||
          /injected I\/O error|no space left/.test(cause)
        ) {
          token.alive = false;
          this.disk.kill();
          continue;
        }
        const damage = this.damagedSinceOpen.join("; ");
        throw new InvariantViolation(
          "recovery-succeeds",
          `Store.open after a crash failed: ${cause}${damage === "" ? "" : ` (damage: ${damage})`}`,
        );
      } finally {
        this.recovering = null;
      }
      this.checkRecoveredLayout(store);
      this.checker.afterRecovery(store.nextSeq, committedBefore, stored);
      this.damagedSinceOpen = [];
      this.repairedSinceOpen = false;
      const topics = new TopicTable();
      const tip = new Tip(topics, {
        capacityBytes: this.config.tipBytes,
        poolBlocks: this.config.poolBlocks,
      });
      for (const message of newest)
        tip.append(topics.internValid(message.topic), message.seq, message.timeUs, message.payload);
      const broker = new Broker({
        topics,
        tip,
        store: new ObservedStore(store, this.checker),
        clock: this.clock,
        scheduler,
        sendQueueBytesMax: this.config.sendQueueBytesMax,
        catchUpSliceBytes: this.config.catchUpSliceBytes,
        consumerStore: this.probe?.store,
      });
      this.life = {
        token,
        disk,
        gate,
        store,
        tip,
        broker,
        scheduler,
        connections: new Set(),
        lastMaintainUs: this.clock.timeUs,
        retentionDue: false,
      };
      return;
    }
  }

  /**
   * `aria repair` on the directory (its own process and disk view): every seq range it reports lost
   * is marked gone — only those may be missing when the store opens next.
   */
  private async repair(storeOptions: StoreOptions): Promise<void> {
    this.counters.repairs++;
    check(this.counters.repairs < 1000, "repair-converges", () => "a thousand repairs in one run");
    const token: LifeToken = { alive: true };
    this.recovering = token;
    const disk = faultDisk(this.disk.view(), this.opClock, this.trace, token);
    let report: RepairReport;
    try {
      report = await repairStore(disk, { ...storeOptions, schedule: undefined });
    } catch (error) {
      if (this.crashPending !== null) return; // crashed while repairing: the next open refuses again
      throw new InvariantViolation(
        "repair-succeeds",
        `repair after ${this.damagedSinceOpen.join("; ")} failed: ${(error as Error).message}`,
      );
    } finally {
      this.recovering = null;
      token.alive = false;
      this.disk.kill();
    }
    this.repairedSinceOpen = true;
    // A repair rewrites damaged closed files under fresh ids: the layout a cut split left is no
    // longer the one to check (split-old-or-new), only what the repair reports.
    if (report.moved.length > 0 || report.lostSeqs.length > 0) this.splitCut = null;
    for (const lost of report.lostSeqs) {
      this.checker.onLost(lost.first, lost.last);
      this.counters.seqsLost += lost.last - lost.first + 1;
    }
  }

  /** The process dies now: `power` also loses what was not synced. Recovery runs in the next drain. */
  private crash(kind: "power" | "process"): void {
    const life = this.life;
    if (life === null) {
      // A crash in the middle of recovery: the recovering process dies, recovery starts over.
      if (this.recovering === null) return;
      this.counters.crashes++;
      this.recovering.alive = false;
      if (kind === "power") this.disk.crash({ mode: "prefix" });
      else this.disk.kill();
      this.crashPending = { committedBefore: this.crashPending?.committedBefore ?? 0 };
      return;
    }
    this.counters.crashes++;
    this.counters.deliveredShared += life.broker.stats().messagesDeliveredShared;
    life.token.alive = false;
    this.life = null;
    // The process's waiting ops (a split's among them) run now and fail (EBADF).
    life.gate.openAll();
    const split = this.split;
    if (split !== null && split.token === life.token) this.splitCut ??= split;
    const committedBefore = life.store.committedSeq;
    for (const connection of life.connections) connection.dead = true;
    for (const client of this.clients) {
      if (client.connection !== null && life.connections.has(client.connection))
        this.dropClient(client);
    }
    if (this.probe !== null) {
      if (this.probe.connection !== null) this.dropProbe(this.probe);
      this.probe.crashed();
    }
    if (kind === "power")
      this.disk.crash({ mode: this.prng.nextInt(4) === 0 ? "subset" : "prefix" });
    else this.disk.kill();
    if (this.loseAckedArmed) this.loseAcked();
    this.crashPending = {
      committedBefore: Math.max(committedBefore, this.crashPending?.committedBefore ?? 0),
    };
  }

  /**
   * `--inject-bug lose-acked`: the disk loses the newest acknowledged record (a synced write), at
   * every crash: the record may already sit in a closed segment too (then its journal copy is not
   * needed), so one cut alone may lose nothing.
   */
  private loseAcked(): void {
    const journals = this.disk.paths().filter((path) => path.startsWith("journal/"));
    const newest = journals.at(-1);
    if (newest === undefined || this.checker.ackedMaxSeq === 0) return;
    const bytes = this.disk.snapshot(newest) ?? new Uint8Array(0);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // Where its records start (after a version-2 journal's synced-point slots).
    const header = decodeFileHeader(bytes, "journal", crc32);
    if (typeof header === "string") return;
    for (let at = header.bytes; at + 16 <= bytes.length; ) {
      const length = view.getUint32(at, true);
      if (length < 32) return;
      if (readU64(view, at + 8) === this.checker.ackedMaxSeq) {
        this.disk.cut(newest, at + 1);
        return;
      }
      at += length;
    }
  }

  private async restart(): Promise<void> {
    const pending = this.crashPending;
    assert(pending !== null, "restart after a crash");
    this.disk.capacityBytes = Infinity; // the operator freed space before restarting
    this.diskFullUntilStep = 0;
    this.restartAtStep = 0;
    this.counters.restarts++;
    await this.startLife(pending.committedBefore);
  }

  // ---- Clients -------------------------------------------------------------------------------

  private connect(client: SimClient): void {
    const life = this.life;
    if (life === null) return;
    const label = this.nextConnectionLabel++;
    const connection = new SimConnection(
      (bytes) => this.guard(() => client.receive(bytes)),
      this.trace,
      label,
    );
    client.connection = connection;
    life.connections.add(connection);
    connection.sessionId = life.broker.open(connection);
    if (this.unboundedQueues && client.subscribes) {
      // The planted bug: the broker forgets the subscriber's send-queue limit.
      const session = sessionsOf(life.broker).get(connection.sessionId);
      if (session !== undefined) (session as { queueBytesMax: number }).queueBytesMax = Infinity;
    }
    for (const frame of client.opening()) this.send(client, frame);
  }

  /** Sends `bytes` to the server, in 1-3 pieces (the decoder must take any split). */
  private send(client: SimClient, bytes: Uint8Array): void {
    const life = this.life;
    const connection = client.connection;
    if (life === null || connection === null || connection.dead || connection.closedByServer)
      return;
    let at = 0;
    const pieces = 1 + this.prng.nextInt(3);
    for (let i = 1; i <= pieces && at < bytes.length; i++) {
      const end = i === pieces ? bytes.length : at + this.prng.nextInt(bytes.length - at + 1);
      if (end > at) life.broker.receive(connection.sessionId, bytes.slice(at, end));
      at = end;
    }
  }

  /** The client's side of the connection is gone (it hung up, the server closed, or died). */
  private dropClient(client: SimClient): void {
    const connection = client.connection;
    if (connection !== null) connection.dead = true;
    client.disconnected();
    client.reconnectAtStep = this.step + 1 + this.prng.nextInt(4);
  }

  // ---- The durable probe (SimulationOptions.durable) ---------------------------------------

  private connectProbe(probe: DurableProbe): void {
    const life = this.life;
    if (life === null) return;
    const connection = new SimConnection(
      (bytes) => this.guard(() => probe.receive(bytes)),
      this.trace,
      this.nextConnectionLabel++,
    );
    probe.connection = connection;
    life.connections.add(connection);
    connection.sessionId = life.broker.open(connection);
    for (const frame of probe.opening()) this.sendProbe(probe, frame);
  }

  private sendProbe(probe: DurableProbe, bytes: Uint8Array): void {
    const connection = probe.connection;
    const life = this.life;
    if (life === null || connection === null || connection.dead || connection.closedByServer)
      return;
    life.broker.receive(connection.sessionId, bytes);
  }

  private dropProbe(probe: DurableProbe): void {
    if (probe.connection !== null) probe.connection.dead = true;
    probe.disconnected();
    probe.reconnectAtStep = this.step + 1 + this.prng.nextInt(4);
  }

  /** The probe acknowledges a seq it received (mostly), or hangs up. */
  private probeAct(): void {
    const probe = this.probe;
    if (probe === null || probe.connection === null) return;
    if (this.prng.nextInt(5) === 0) {
      const sessionId = probe.connection.sessionId;
      this.dropProbe(probe);
      this.life?.broker.closed(sessionId);
      return;
    }
    const ack = probe.ack(this.prng.nextU32());
    if (ack !== null) this.sendProbe(probe, ack);
  }

  /** The client hangs up: the server sees the close. */
  private hangUp(client: SimClient): void {
    const connection = client.connection;
    if (connection === null) return;
    this.dropClient(client);
    this.life?.broker.closed(connection.sessionId);
  }

  private noticeServerCloses(): number {
    let noticed = 0;
    const probe = this.probe;
    if (probe?.connection?.closedByServer === true) {
      noticed++;
      const sessionId = probe.connection.sessionId;
      this.dropProbe(probe);
      this.life?.broker.closed(sessionId);
    }
    for (const client of this.clients) {
      const connection = client.connection;
      if (connection === null || !connection.closedByServer) continue;
      noticed++;
      this.dropClient(client);
      this.life?.broker.closed(connection.sessionId);
    }
    return noticed;
  }

  // ---- Steps ---------------------------------------------------------------------------------

  private async oneStep(): Promise<void> {
    this.clock.advance(1 + this.prng.nextInt(3000));
    if (
      this.crashPending === null &&
      this.life !== null &&
      this.restartAtStep !== 0 &&
      this.restartAtStep <= this.step
    ) {
      this.crash("process"); // the operator restarts a server whose storage failed
    }
    if (this.diskFullUntilStep !== 0 && this.diskFullUntilStep <= this.step) {
      this.disk.capacityBytes = Infinity;
      this.diskFullUntilStep = 0;
    }
    await this.drain();
    this.endLongStalls(false);
    this.prepareClients(false);
    // While a subscriber is stalled, publishers often send bursts of large messages (issue 28:
    // readers that never read while 200 MB is published): the broker must not buffer them for it.
    if (this.longStalls.size > 0 && this.prng.nextInt(2) === 0) this.burst();
    await this.act(this.chooseAction());
    await this.drain();
    await this.retainMaybe();
    this.afterStep();
  }

  /**
   * The server's retention, when its timer fired and the world is quiet (so no sorter append can
   * slip between the layout read here and the store's choice): the files it removes are predicted
   * from the layout and their seqs marked gone first (a crash may cut it after its REMOVE record is
   * durable); then exactly those must have left the layout, and the store must read back the rest.
   * Not while a split runs: the server's switch would refuse a layout retention changed, which the
   * split's checks do not model.
   */
  private async retainMaybe(): Promise<void> {
    const life = this.life;
    if (life === null || !life.retentionDue || this.split !== null) return;
    life.retentionDue = false;
    if (life.store.failure !== null) return;
    const limits = this.config.retain;
    const nowUs = this.clock.timeUs;
    const victims = retentionVictims(life.store.layout(), limits, nowUs);
    if (victims.length === 0) return;
    this.counters.filesRetained += victims.length;
    const marked = new Map<number, number[]>();
    for (const file of victims) {
      const seqs: number[] = [];
      marked.set(file.id, seqs);
      this.checker.onRemoved(
        file.partition,
        file.firstSeq,
        file.lastSeq,
        isSubtreeStore(file) ? new Set(file.topics) : null,
        seqs,
      );
    }
    let outcome: { error: unknown } | null = null;
    life.store.retain(limits, nowUs).then(
      () => (outcome = { error: null }),
      (error: unknown) => (outcome = { error }),
    );
    await this.drain();
    const settled = outcome as { error: unknown } | null;
    assert(settled !== null, "retention settles within a drain");
    if (!life.token.alive) return; // a crash cut it: recovery says which files are left
    if (settled.error !== null) {
      const code = (settled.error as { code?: string }).code;
      // A full disk or an injected I/O error, also as the store words it (retention retries).
      const injected = /no space left|injected I\/O error/.test(String(settled.error));
      const faulted =
        code === "EIO" || code === "ENOSPC" || injected || life.store.failure !== null;
      check(faulted, "retention-succeeds", () => `retention failed: ${String(settled.error)}`);
      return;
    }
    const inForce = idsOf(life.store.layout());
    if (life.store.unwritable !== null) {
      // No room to record a removal: retention removed nothing and resolved (the store says it
      // cannot write); the files it kept still read.
      for (const file of victims)
        if (inForce.has(file.id)) this.checker.onKept(marked.get(file.id) ?? []);
      inForce.clear();
    }
    const kept = victims.filter((file) => inForce.has(file.id)).map((file) => file.id);
    check(
      kept.length === 0,
      "retention-removes",
      () => `retention was to remove files ${kept.join(" ")}, they are still in force`,
    );
    let read: ReferenceMessage[];
    try {
      read = await readAll(life.store);
    } catch (error) {
      if (!life.token.alive) return; // a crash armed at one of its reads
      throw error;
    }
    // A store stalled on a full disk has appended past what it committed: those are not readable
    // yet (nor acknowledged), and come once it writes again.
    this.checker.checkHolds(read, life.store.nextSeq, "after retention", {
      recovered: false,
      completeTo: life.store.retrying ? life.store.committedSeq + 1 : undefined,
    });
    // The oldest seq held is the oldest read (what a read from below it starts at; the topic
    // table reclaims ids below it): retention of files whose seqs the live journal still covered
    // once left it at 1, which nothing here checked (too low only reclaims fewer ids).
    const held = life.store.firstSeqHeld;
    const committed = life.store.committedSeq;
    check(
      read.length > 0 ? held === read[0].seq : held > committed && held <= life.store.nextSeq,
      "first-seq-held",
      () => `firstSeqHeld ${held}, oldest read ${read[0]?.seq ?? "none"}, committed ${committed}`,
    );
  }

  /** Long stalls that are over (all of them when settling): the subscriber reads or hangs up. */
  private endLongStalls(settling: boolean): void {
    for (const [client, stall] of this.longStalls) {
      if (!settling && stall.untilStep > this.step) continue;
      this.longStalls.delete(client);
      if (stall.hangUp) this.hangUp(client);
    }
  }

  /** Reconnects due clients, refreshes read budgets, signals drains. */
  private prepareClients(settling: boolean): void {
    const life = this.life;
    if (life === null) return;
    const probe = this.probe;
    if (
      probe !== null &&
      probe.connection === null &&
      (settling || probe.reconnectAtStep <= this.step)
    )
      this.connectProbe(probe);
    if (probe?.connection != null && probe.needsResubscribe)
      this.sendProbe(probe, probe.subscribeFrame());
    for (const client of this.clients) {
      if (client.connection === null && (settling || client.reconnectAtStep <= this.step))
        this.connect(client);
      const connection = client.connection;
      if (connection === null) continue;
      if (settling || client.readModeUntilStep <= this.step) client.readMode = { kind: "normal" };
      const mode = client.readMode;
      connection.budgetBytes =
        mode.kind === "normal" ? Infinity : mode.kind === "slow" ? mode.bytesPerStep : 0;
      if (
        connection.wantsDrain &&
        connection.budgetBytes > 0 &&
        !connection.dead &&
        !connection.closedByServer
      ) {
        connection.wantsDrain = false;
        life.broker.writable(connection.sessionId);
      }
      for (const sub of client.subscriptions.values()) {
        if (!sub.needsResubscribe) continue;
        // Reads never fail on this disk (faults hit writes and fsyncs): a dropped subscription
        // means the store failed, never that a split or the sorter pulled a file from under a reader.
        check(
          life.store.failure !== null,
          "disk-reads-succeed",
          () =>
            `${client.name} sub ${sub.id} [${sub.filterTexts.join(" ")}] was dropped by a failed disk read, but the store had not failed`,
        );
        this.send(client, client.resubscribe(sub));
      }
    }
  }

  private chooseAction(): ActionKind {
    const weights = this.config.weights;
    let total = 0;
    for (const kind in weights) total += weights[kind as ActionKind];
    let roll = this.prng.nextFloat() * total;
    for (const kind in weights) {
      roll -= weights[kind as ActionKind];
      if (roll < 0) return kind as ActionKind;
    }
    return "idle";
  }

  private async act(kind: ActionKind): Promise<void> {
    const life = this.life;
    if (life === null) return;
    const prng = this.prng;
    const client = pick(prng, this.clients);
    switch (kind) {
      case "publish":
      case "cut-frame":
        return this.publish(client, kind === "cut-frame");
      case "subscribe":
        return this.subscribe(client, null);
      case "unsubscribe":
        return this.unsubscribe(client);
      case "read-mode": {
        const roll = prng.nextInt(3);
        client.readMode =
          roll === 0
            ? { kind: "stalled" }
            : roll === 1
              ? { kind: "slow", bytesPerStep: 1 + prng.nextInt(2000) }
              : { kind: "normal" };
        client.readModeUntilStep = this.step + 1 + prng.nextInt(30);
        return;
      }
      case "disconnect":
        return this.hangUp(client);
      case "kill":
        return this.crash("process");
      case "power-loss":
        return this.crash("power");
      case "crash-at-op":
        this.opClock.crashAtOp = this.opClock.ops + 1 + prng.nextInt(40);
        return;
      case "fsync-fails":
        this.disk.failNextSyncs(1);
        return;
      case "disk-full":
        this.disk.capacityBytes = this.disk.usedBytes() + prng.nextInt(4096);
        this.diskFullUntilStep = this.step + 1 + prng.nextInt(10);
        return;
      case "time-jump":
        this.clock.advance(1_000_000 + prng.nextInt(30_000_000));
        return;
      case "split":
        // Often a subscriber starts replaying from earliest first and reads slowly, so its reader
        // is mid-disk (held back by its full send queue) when the layout switches under it.
        if (prng.nextInt(3) !== 0) {
          const subscriber = client.subscribes ? client : this.clients.at(-1)!;
          if (openSubscriptions(subscriber) >= SUBSCRIPTIONS_MAX) this.unsubscribe(subscriber);
          this.subscribe(subscriber, { kind: "earliest" });
          if (prng.nextInt(4) !== 0) this.slowDown(subscriber, 1 + prng.nextInt(5));
        }
        return this.startSplit(life, { crash: prng.nextInt(3) === 0, final: false });
      case "stall-long":
        return this.stallLong(client);
      case "topic-flood":
        return this.floodTopics(client);
      case "damage":
        this.crash("process");
        return this.damageAtRest();
      case "durable":
        return this.probeAct();
      case "idle":
        return;
    }
  }

  /**
   * A subscriber stops reading for many steps (up to LONG_STALL_STEPS_MAX) while the others go
   * on; then it reads again or hangs up. Its session must hold no more than
   * SUBSCRIBER_HELD_BYTES_MAX meanwhile (afterStep).
   */
  private stallLong(client: SimClient): void {
    const subscriber = client.subscribes ? client : this.clients.at(-1)!;
    const steps = 20 + this.prng.nextInt(LONG_STALL_STEPS_MAX - 20);
    subscriber.readMode = { kind: "stalled" };
    subscriber.readModeUntilStep = this.step + steps;
    if (subscriber.connection !== null) subscriber.connection.budgetBytes = 0;
    this.longStalls.set(subscriber, {
      untilStep: this.step + steps,
      hangUp: this.prng.nextInt(2) === 0,
    });
  }

  /**
   * Between a crash and the restart, one data file is damaged at rest: a bit flipped anywhere, the
   * file cut short, or the file deleted — a journal (sealed, newest or spare), a segment, pack,
   * index or subtree store, or MANIFEST.
   */
  private damageAtRest(): void {
    const prng = this.prng;
    const files = this.disk
      .paths()
      .filter((path) => path === "MANIFEST" || /^(journal|segments)\//.test(path));
    if (files.length === 0) return;
    const path = pick(prng, files);
    const bytes = this.disk.snapshot(path) ?? new Uint8Array(0);
    const roll = prng.nextInt(4);
    let what: string;
    // Anywhere, the newest journal too: after a kill its synced point covers every acknowledged
    // record (written after each fsync), so damage there is told from a torn tail (seed 34).
    if (roll <= 1 && bytes.length > 0) {
      const at = prng.nextInt(bytes.length);
      const bit = 1 << prng.nextInt(8);
      this.disk.corrupt(path, at, Uint8Array.of(bytes[at] ^ bit));
      what = `bit ${bit} flipped at ${at} of ${path} (${bytes.length} B)`;
    } else if (roll === 2 && bytes.length > 0) {
      const size = prng.nextInt(bytes.length);
      this.disk.cut(path, size);
      what = `${path} cut to ${size} of ${bytes.length} B`;
    } else {
      this.disk.erase(path);
      what = `${path} deleted`;
    }
    this.counters.damaged++;
    this.damagedSinceOpen.push(what);
    this.damageLog.push(`step ${this.step}: ${what}`);
    if (this.damageLog.length > 3) this.damageLog.shift();
    this.repairedSinceOpen = false;
  }

  /** A publisher sends 4-16 messages of 1-3 KB to hot topics. */
  private burst(): void {
    const prng = this.prng;
    const publisher = pick(prng, this.clients);
    if (!publisher.publishes || !publisher.connected) return;
    const messages = [];
    for (let i = 4 + prng.nextInt(13); i > 0; i--)
      messages.push({
        topic: pickTopic(prng, this.tree),
        payload: makeLargePayload(prng, `${publisher.name}#${this.nextPayloadTag++}:`),
      });
    this.send(publisher, publisher.publish(messages));
  }

  /**
   * A publisher sends a burst of messages, each to a topic the server has never seen, under the
   * tree's subtrees (so subtree filters and `**` must match the new names at once), within the
   * tree's partitions (one more per root at most): new partitions would make every `**` read of
   * the run cost more, and the run's steps cost more the longer it runs.
   */
  private floodTopics(client: SimClient): void {
    const prng = this.prng;
    const publisher = client.publishes ? client : this.clients[0];
    if (!publisher.connected) return;
    const count = 1 + prng.nextInt(FLOOD_MESSAGES_MAX);
    const prefixes = this.tree.prefixes;
    for (let sent = 0; sent < count; ) {
      const batch = Math.min(count - sent, 1 + prng.nextInt(16));
      const messages = [];
      for (let i = 0; i < batch; i++) {
        const root = prefixes.length === 0 ? "flood" : pick(prng, prefixes);
        // Below a one-level root, a `f` level keeps the new topics in one partition per root:
        // each partition ever made costs every `**` read (see the report of issue 28).
        const parent = root.includes("/") ? root : `${root}/f`;
        messages.push({
          topic: `${parent}/n${this.nextFloodTopic++}`,
          payload: makePayload(prng, `${publisher.name}#${this.nextPayloadTag++}:`),
        });
      }
      this.send(publisher, publisher.publish(messages));
      sent += batch;
    }
  }

  private publish(client: SimClient, cut: boolean): void {
    const prng = this.prng;
    const publisher = client.publishes ? client : this.clients[0];
    if (!publisher.connected) return;
    const count = prng.nextInt(10) < 7 ? 1 + prng.nextInt(3) : 1 + prng.nextInt(16);
    const messages = [];
    for (let i = 0; i < count; i++)
      messages.push({
        topic: pickTopic(prng, this.tree),
        payload: makePayload(prng, `${publisher.name}#${this.nextPayloadTag++}:`),
      });
    const bytes = publisher.publish(messages);
    if (!cut) return this.send(publisher, bytes);
    // Disconnect at any byte: the server gets part of the frame, then the connection drops.
    this.send(publisher, bytes.subarray(0, prng.nextInt(bytes.length)));
    this.hangUp(publisher);
  }

  /** A new subscription of a random filter, from `start` or a random start. */
  private subscribe(client: SimClient, start: StartPosition | null): void {
    const prng = this.prng;
    const subscriber = client.subscribes ? client : this.clients.at(-1)!;
    if (!subscriber.connected || openSubscriptions(subscriber) >= SUBSCRIPTIONS_MAX) return;
    start ??= makeStart(prng, {
      nextSeq: this.checker.reference.length + 1,
      startUs: START_US,
      nowUs: this.clock.timeUs,
    });
    this.send(subscriber, subscriber.subscribe(makeFilter(prng, this.tree), start));
  }

  /** `client` reads at most a hundred bytes a step, from now on, for `steps` steps. */
  private slowDown(client: SimClient, steps: number): void {
    const mode = { kind: "slow", bytesPerStep: 1 + this.prng.nextInt(100) } as const;
    client.readMode = mode;
    client.readModeUntilStep = this.step + steps;
    if (client.connection !== null) client.connection.budgetBytes = mode.bytesPerStep;
  }

  private unsubscribe(client: SimClient): void {
    const open = [...client.subscriptions.values()].filter(
      (sub) => !sub.closing && sub.nextExpected !== null,
    );
    if (!client.connected || open.length === 0) return;
    this.send(client, client.unsubscribe(pick(this.prng, open)));
  }

  // ---- Splits --------------------------------------------------------------------------------

  /**
   * Starts `aria split` against the live store, as the running server hosts it: a random planner
   * and budget, 1-3 workers, random read chunks; sometimes a crash armed within the split's ops,
   * an fsync failing at one of them, or the switch's own manifest fsync failing. The drain loop
   * lets it progress (advanceSplit); it settles in `splitDone`.
   */
  private startSplit(life: Life, options: { crash: boolean; final: boolean }): void {
    if (this.split !== null) return; // a second split is refused while one runs (the LOCK)
    const prng = this.prng;
    const plan = {
      algorithm: pick(prng, SPLIT_ALGORITHMS),
      maxStores: prng.nextInt(3) === 0 ? undefined : 1 + prng.nextInt(12),
    };
    const workers = 1 + prng.nextInt(3);
    const chunkBytes = pick(prng, [97, 1024, 1 << 20]);
    const run: SplitRun = {
      token: life.token,
      gate: life.gate,
      final: options.final,
      before: null,
      closedLastSeq: 0,
      reserved: null,
      swap: null,
      armedAtOp: Infinity,
      crashAtSwitch: false,
      failSwitchSync: false,
      idleRounds: 0,
      trafficLeft: 1 + prng.nextInt(8),
    };
    // Anywhere in the split, or (as often) within a few ops of asking for the switch, where the
    // SWAP append, its fsync and the removal of the replaced files are.
    if (options.crash && prng.nextInt(2) === 0) this.armCrash(run, this.splitOpsEstimate + 10);
    else run.crashAtSwitch = options.crash;
    // From here until it settles, the store's disk ops and the split's take turns at the gate.
    run.gate.close();
    const faultRoll = options.final ? -1 : prng.nextInt(12);
    run.failSwitchSync = faultRoll === 0;
    if (faultRoll === 1 || faultRoll === 2) {
      run.gate.failSyncAt = 1 + prng.nextInt(this.splitOpsEstimate + 10);
      run.gate.onFailSync = () => this.disk.failNextSyncs(1);
    }
    const disk = life.disk; // the server process's own disk: `aria split` shares the data directory
    const runner = inProcessRunner(disk, { crc32, chunkBytes });
    const host = this.splitHost(life.store, run);
    const opsBefore = this.opClock.ops;
    this.split = run;
    const work = async (): Promise<SplitReport> => {
      const report = await executeSplit(host, runner, disk, {
        plan,
        workers,
        intervalBytes: this.config.store.indexIntervalBytes ?? 4096,
      });
      if (report.switched) await this.checkSwitched(life, run);
      return report;
    };
    work().then(
      (report) => this.splitDone(run, report, null, this.opClock.ops - opsBefore),
      (error: unknown) => this.splitDone(run, null, error, 0),
    );
  }

  /** Arms a crash at one of the next `withinOps` disk ops, for `run` (disarmed if it ends first). */
  private armCrash(run: SplitRun, withinOps: number): void {
    run.armedAtOp = this.opClock.ops + 1 + this.prng.nextInt(withinOps);
    this.opClock.crashAtOp = Math.min(this.opClock.crashAtOp, run.armedAtOp);
  }

  /** The live store's split host (the server's), each call waiting at the gate and recorded in `run`. */
  private splitHost(store: Store, run: SplitRun): SplitHost {
    const inner = storeHost(store);
    const gate = run.gate;
    return {
      layout: async () => {
        await gate.wait();
        const layouts = await inner.layout();
        run.before = idsOf(layouts);
        for (const layout of layouts)
          for (const file of [...layout.segments, ...layout.stores])
            run.closedLastSeq = Math.max(run.closedLastSeq, file.lastSeq);
        return layouts;
      },
      reserveIds: async (count) => {
        await gate.wait();
        const first = await inner.reserveIds(count);
        run.reserved = { first, count };
        return first;
      },
      switchLayout: async (swap) => {
        await gate.wait();
        run.swap = swap;
        // The switch first reads each new store's head, then appends, then removes each old file.
        if (run.crashAtSwitch)
          this.armCrash(run, 4 * swap.added.length + 2 * swap.removed.length + 8);
        if (run.failSwitchSync) this.disk.failNextSyncs(1);
        return inner.switchLayout(swap);
      },
    };
  }

  /** The live store after a switch: the swap is in force and `**` reads every message once. */
  private async checkSwitched(life: Life, run: SplitRun): Promise<void> {
    const swap = run.swap;
    assert(swap !== null, "a switched split asked for its swap");
    const inForce = idsOf(life.store.layout());
    const stale = swap.removed.filter((id) => inForce.has(id));
    const absent = swap.added.filter((store) => !inForce.has(store.id)).map((store) => store.id);
    check(
      stale.length === 0 && absent.length === 0,
      "split-switched",
      () =>
        `after the switch, replaced files ${stale.join(" ")} are still in force, new stores ${absent.join(" ")} are not`,
    );
    // Every seq its closed files held reads back (publishes may still be in flight above them).
    const read = await readAll(life.store);
    this.checker.checkHolds(read, life.store.nextSeq, "after a split", {
      recovered: false,
      completeTo: run.closedLastSeq + 1,
    });
  }

  private splitDone(run: SplitRun, report: SplitReport | null, error: unknown, ops: number): void {
    if (this.split === run) this.split = null;
    run.gate.openAll();
    if (this.opClock.crashAtOp === run.armedAtOp) this.opClock.crashAtOp = Infinity; // it ended first
    if (report !== null) {
      if (report.switched) this.counters.splitsSwitched++;
      else this.counters.splitsUnchanged++;
      if (run.final) this.finalSplitDone = true;
      if (run.armedAtOp === Infinity && !run.crashAtSwitch && ops > 0) this.splitOpsEstimate = ops;
      return;
    }
    if (!run.token.alive) {
      this.counters.splitsCut++;
      return;
    }
    if (error instanceof InvariantViolation) {
      this.recorded ??= error;
      return;
    }
    // A fault the world injected, or a store that failed meanwhile: nothing switched, the old
    // layout is in force (the switch re-checks; the files it wrote are removed).
    const code = (error as { code?: string }).code;
    const storeFailed =
      this.life !== null && this.life.token === run.token && this.life.store.failure !== null;
    if (
      (error instanceof DiskError && (code === "EIO" || code === "ENOSPC")) ||
      (error instanceof StoreError && storeFailed)
    ) {
      this.counters.splitsFailed++;
      // A switch that failed in the manifest write stops the store: which layout is in force is
      // for the next open to say (old or new, checked like a cut split's).
      if (run.swap !== null && storeFailed) this.splitCut ??= run;
      return;
    }
    const message =
      error instanceof Error
        ? `${error.message}\n${(error.stack ?? "").split("\n").slice(1, 6).join("\n")}`
        : String(error);
    this.recorded ??= new InvariantViolation("split-succeeds", `the split failed: ${message}`);
  }

  /** One drain round of the split in flight: open its gate for a few ops, maybe let a client act. */
  private advanceSplit(run: SplitRun): number {
    const prng = this.prng;
    const released = run.gate.release(1 + prng.nextInt(6));
    if (released > 0) run.idleRounds = 0;
    else
      check(
        ++run.idleRounds < SPLIT_IDLE_ROUNDS_MAX,
        "split-progress",
        () => `a split waited ${SPLIT_IDLE_ROUNDS_MAX} drain rounds with no op to run`,
      );
    const life = this.life;
    if (life !== null && life.token === run.token && run.trafficLeft > 0 && prng.nextInt(3) === 0) {
      run.trafficLeft--;
      const client = pick(prng, this.clients);
      const roll = prng.nextInt(6);
      if (roll <= 2) this.publish(client, false);
      else if (roll === 3) this.subscribe(client, { kind: "earliest" });
      else if (roll === 4) this.subscribe(client, null);
      else this.unsubscribe(client);
    }
    return released;
  }

  /**
   * After a recovery: no file in `segments/` that no segment or store in force owns; and when a
   * crash cut a split, either its old layout is whole or its new one is (never a mix).
   */
  private checkRecoveredLayout(store: Store): void {
    const layouts = store.layout();
    const inForce = idsOf(layouts);
    const stores = new Set(layouts.flatMap((layout) => layout.stores.map((s) => s.id)));
    const packs = new Set(
      layouts.flatMap((layout) =>
        layout.segments.flatMap((segment) =>
          segment.pack === undefined ? [] : [segment.pack.pack],
        ),
      ),
    );
    for (const path of this.disk.paths()) {
      if (!path.startsWith(`${SEGMENT_DIR}/`)) continue;
      const parsed = parseFileName(path.slice(SEGMENT_DIR.length + 1));
      const owned =
        parsed !== null &&
        (parsed.kind === "pack"
          ? packs.has(parsed.n)
          : inForce.has(parsed.n) &&
            (parsed.kind === "index" || (parsed.kind === "store") === stores.has(parsed.n)));
      check(
        owned,
        "no-orphans",
        () => `after recovery ${path} is on disk, but no segment or store in force owns it`,
      );
    }
    const cut = this.splitCut;
    if (cut === null) return;
    this.splitCut = null;
    const before = cut.before ?? new Set<number>();
    const reserved = cut.reserved;
    const fresh =
      reserved === null
        ? []
        : [...inForce].filter((id) => id >= reserved.first && id < reserved.first + reserved.count);
    if (fresh.length === 0) {
      const lost = [...before].filter((id) => !inForce.has(id));
      check(
        lost.length === 0,
        "split-old-or-new",
        () =>
          `a cut split left none of its new stores, and files ${lost.join(" ")} of the old layout are gone`,
      );
      return;
    }
    const swap = cut.swap;
    check(
      swap !== null,
      "split-old-or-new",
      () => `stores ${fresh.join(" ")} of a split that never switched are in force`,
    );
    const added = new Set(swap.added.map((s) => s.id));
    const removed = new Set(swap.removed);
    const missing = [...added].filter((id) => !inForce.has(id));
    const stale = swap.removed.filter((id) => inForce.has(id));
    const lost = [...before].filter((id) => !removed.has(id) && !inForce.has(id));
    check(
      fresh.every((id) => added.has(id)) &&
        missing.length === 0 &&
        stale.length === 0 &&
        lost.length === 0,
      "split-old-or-new",
      () =>
        `a cut split left a mix: new stores missing ${missing.join(" ")}, replaced files in force ${stale.join(" ")}, untouched files gone ${lost.join(" ")}`,
    );
  }

  /** Runs broker tasks, due timers and I/O until nothing is left; restarts after a crash. */
  private async drain(): Promise<void> {
    for (let round = 0; round < 100_000; round++) {
      await macrotask();
      this.throwRecorded();
      if (this.crashPending !== null) {
        await this.restart();
        continue;
      }
      const life = this.life;
      let work = this.noticeServerCloses();
      if (life !== null) {
        if (this.clock.timeUs - life.lastMaintainUs >= 1_000_000) {
          // The server's maintenance timer: segment aging.
          life.lastMaintainUs = this.clock.timeUs;
          life.store.maintain(this.clock.timeUs);
          life.retentionDue = true;
          work++;
        }
        work += life.scheduler.fireDueTimers();
        work += life.scheduler.runTasks();
      }
      if (this.split !== null) work += this.advanceSplit(this.split);
      if (work === 0 && this.split === null) return;
    }
    throw new InvariantViolation("quiescence", "the world never became quiet");
  }

  private afterStep(): void {
    const life = this.life;
    if (life === null) return;
    // The consumers file's write window: positions land at the end of some steps.
    if (this.probe !== null && this.prng.nextInt(2) === 0) this.probe.store.flush();
    this.checker.tip(life.tip.stats());
    const visibleSeq = life.broker.stats().visibleSeq;
    check(
      visibleSeq - 1 <= life.store.committedSeq,
      "visible-is-committed",
      () => `visible end ${visibleSeq}, committed ${life.store.committedSeq}`,
    );
    for (const session of sessionsOf(life.broker).values()) {
      // A publisher's acks may grow its queue to the flood limit (then it is disconnected); a
      // pure subscriber's subscriptions stop at the limit, so it exceeds it by at most one message.
      const bound = session.clientName.startsWith("sub")
        ? session.queueBytesMax + SUBSCRIBER_QUEUE_SLACK_BYTES
        : 2 * session.queueBytesMax + FRAME_BYTES_MAX;
      check(
        session.queuedBytes <= bound,
        "send-queue-bounded",
        () =>
          `session ${session.id} (${session.clientName}) queues ${session.queuedBytes} B, bound ${bound}`,
      );
      if (session.clientName.startsWith("sub")) {
        const held = session.heldBytes;
        check(
          held <= SUBSCRIBER_HELD_BYTES_MAX,
          "subscriber-memory-bounded",
          () =>
            `session ${session.id} (${session.clientName}) holds ${held} B, budget ${SUBSCRIBER_HELD_BYTES_MAX}`,
        );
        this.counters.subscriberHeldBytesMax = Math.max(this.counters.subscriberHeldBytesMax, held);
      }
      this.counters.queueOvershootBytesMax = Math.max(
        this.counters.queueOvershootBytesMax,
        session.queuedBytes - session.queueBytesMax,
      );
    }
    // A store stalled on a full disk keeps what it could not write for its retry.
    check(
      life.store.failure !== null || life.store.retrying || life.store.bufferedBytes === 0,
      "store-buffer-balance",
      () => `a quiet store still buffers ${life.store.bufferedBytes} B`,
    );
    if (life.store.failure !== null && this.restartAtStep === 0) {
      this.counters.storageFailures++;
      this.restartAtStep = this.step + 1 + this.prng.nextInt(4);
    }
  }

  /**
   * End of run: no more faults; everyone reconnects and drains; one more split runs (it must
   * complete, whatever earlier crashes cut); every subscription is complete.
   */
  private async settle(): Promise<void> {
    this.opClock.crashAtOp = Infinity;
    this.disk.capacityBytes = Infinity;
    this.diskFullUntilStep = 0;
    let settled = false;
    for (let round = 0; round < SETTLE_ROUNDS_MAX && !settled; round++) {
      if (this.life !== null && this.life.store.failure !== null) this.crash("process");
      await this.drain();
      this.endLongStalls(true);
      this.prepareClients(true);
      const life = this.life;
      if (!this.finalSplitDone && life !== null && life.store.failure === null)
        this.startSplit(life, { crash: false, final: true });
      this.clock.advance(100_000);
      await this.drain();
      await this.retainMaybe(); // the server's timer goes on: retention retries after a full disk
      this.afterStep();
      // Settled once the store writes again (the space is back: its retries go through), every
      // publish is answered (one the journal's retry holds is acknowledged when it goes through)
      // and every subscriber caught up.
      settled =
        this.life !== null &&
        this.life.store.failure === null &&
        this.life.store.unwritable === null &&
        this.finalSplitDone &&
        (this.probe === null || (this.probe.connection !== null && this.probe.caughtUp)) &&
        this.clients.every(
          (client) =>
            client.connected &&
            client.pending.size === 0 &&
            [...client.subscriptions.values()].every((sub) => sub.caughtUp || sub.closing),
        );
    }
    check(
      this.finalSplitDone,
      "split-completes",
      () => `no split completed in ${SETTLE_ROUNDS_MAX} quiet rounds at the end of the run`,
    );
    check(
      settled,
      "settles",
      () =>
        `after ${SETTLE_ROUNDS_MAX} quiet rounds some client is still not connected and caught up`,
    );
    const life = this.life!;
    const visibleSeq = life.broker.stats().visibleSeq;
    this.probe?.checkComplete(visibleSeq - 1);
    for (const client of this.clients) {
      check(
        client.pending.size === 0,
        "publishes-answered",
        () => `${client.name}: ${client.pending.size} publishes never answered`,
      );
      for (const sub of client.subscriptions.values())
        if (!sub.closing) this.checker.complete(client.name, sub as ClientSubscription, visibleSeq);
    }
  }
}

/** A split in flight and what it has done so far, for the checks after a crash. */
interface SplitRun {
  /** The life (process) that runs it: it dies with it. */
  token: LifeToken;
  gate: OpGate;
  /** The split at the end of the run. */
  final: boolean;
  /** Ids of the closed files in force when it read the layout. */
  before: Set<number> | null;
  /** The newest seq those files held. */
  closedLastSeq: number;
  /** The ids reserved for its new stores. */
  reserved: { first: number; count: number } | null;
  /** The switch it asked for (in force or not, depending on when a crash came). */
  swap: LayoutSwap | null;
  /** The disk op a crash is armed at for it, or Infinity. */
  armedAtOp: number;
  /** Arm a crash when it asks for the switch. */
  crashAtSwitch: boolean;
  /** The next fsync after it asks to switch fails (most often the SWAP record's). */
  failSwitchSync: boolean;
  /** Drain rounds in a row with no op of it waiting. */
  idleRounds: number;
  /** Client actions still allowed between its ops. */
  trafficLeft: number;
}

/**
 * Where a process's disk ops wait for the drain loop while a split runs: each op queues, and
 * `release(n)` lets the first n go (FIFO, deterministic). Open (ops go straight through) when no
 * split runs, and after a crash, so the dead process's ops fail at once.
 */
class OpGate {
  private waiting: (() => void)[] = [];
  private closed = false;
  private passed = 0;
  /** The op (1-based, since `close`) before which `onFailSync` runs, or Infinity. */
  failSyncAt = Infinity;
  onFailSync: () => void = () => {};

  /** Resolves when the op may run: now when open, else once released. */
  wait(): Promise<void> {
    if (!this.closed) return Promise.resolve();
    if (++this.passed === this.failSyncAt) this.onFailSync();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Runs `op` now when open, else once released. */
  through<T>(op: () => Promise<T>): Promise<T> {
    return this.closed ? this.wait().then(op) : op();
  }

  close(): void {
    this.closed = true;
    this.passed = 0;
    this.failSyncAt = Infinity;
  }

  /** Lets up to `count` waiting ops run; returns how many. */
  release(count: number): number {
    const batch = this.waiting.splice(0, count);
    for (const resolve of batch) resolve();
    return batch.length;
  }

  openAll(): void {
    this.closed = false;
    this.release(Infinity);
  }
}

/** `disk` with every op (and every open file's op) going through `gate`. */
function gatedDisk(disk: Disk, gate: OpGate): Disk {
  const file = (inner: DiskFile): DiskFile => ({
    path: inner.path,
    read: (position, into) => gate.through(() => inner.read(position, into)),
    write: (position, bytes) => gate.through(() => inner.write(position, bytes)),
    size: () => gate.through(() => inner.size()),
    sync: () => gate.through(() => inner.sync()),
    truncate: (size) => gate.through(() => inner.truncate(size)),
    close: () => inner.close(),
  });
  return {
    open: (path, mode) => gate.through(async () => file(await disk.open(path, mode))),
    list: (dir) => gate.through(() => disk.list(dir)),
    mkdir: (dir) => gate.through(() => disk.mkdir(dir)),
    remove: (path) => gate.through(() => disk.remove(path)),
    rename: (from, to) => gate.through(() => disk.rename(from, to)),
    syncDir: (dir) => gate.through(() => disk.syncDir(dir)),
  };
}

/** Retention's limits (the store's `retain` argument). */
type RetainLimits = { bytes: number; ageUs: number | undefined };

/**
 * The closed files `Store.retain(limits, nowUs)` removes from `layouts`, chosen as the store
 * documents it: oldest last seq first, those older than the age limit, then until at most
 * `bytes` remain. A model to check the store against, not a copy of its code path.
 */
function retentionVictims(
  layouts: readonly PartitionLayout[],
  limits: RetainLimits,
  nowUs: number,
): (SegmentMeta | SubtreeStoreMeta)[] {
  const files: (SegmentMeta | SubtreeStoreMeta)[] = [];
  let total = 0;
  for (const layout of layouts)
    for (const file of [...layout.segments, ...layout.stores]) {
      files.push(file);
      total += file.bytes;
    }
  files.sort((a, b) => a.lastSeq - b.lastSeq);
  const ageLimitUs = limits.ageUs === undefined ? -Infinity : nowUs - limits.ageUs;
  const victims: (SegmentMeta | SubtreeStoreMeta)[] = [];
  for (const file of files) {
    if (file.lastTimeUs >= ageLimitUs && total <= limits.bytes) break;
    victims.push(file);
    total -= file.bytes;
  }
  return victims;
}

/** The broker's sessions (the simulator looks into them for the memory checks). */
function sessionsOf(broker: Broker): Map<number, Session> {
  return (broker as unknown as { sessions: Map<number, Session> }).sessions;
}

/** Ids of every closed file (segment or store) in `layouts`. */
function idsOf(layouts: readonly PartitionLayout[]): Set<number> {
  const ids = new Set<number>();
  for (const layout of layouts)
    for (const file of [...layout.segments, ...layout.stores]) ids.add(file.id);
  return ids;
}

/** Subscriptions of `client` not being closed. */
function openSubscriptions(client: SimClient): number {
  let count = 0;
  for (const sub of client.subscriptions.values()) if (!sub.closing) count++;
  return count;
}

/** Every message a store holds, in seq order. */
async function readAll(store: Store): Promise<ReferenceMessage[]> {
  const out: ReferenceMessage[] = [];
  const reader = store.read(Filter.of("**"), { seq: 1 });
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch()) {
    for (const message of batch)
      out.push({
        seq: message.seq,
        timeUs: message.timeUs,
        topic: message.topic,
        payload: message.payload.slice(),
      });
  }
  return out;
}

function readU64(view: DataView, at: number): number {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 4294967296;
}

/** One turn of the event loop: every pending microtask (all simulated I/O) has run after it. */
function macrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
