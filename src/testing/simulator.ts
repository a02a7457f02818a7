/**
 * Simulator: runs the real broker, tip and store under simulated time, network and disk, driven
 * by one seeded Prng, and checks Aria's invariants after every step (src/testing/invariants.ts).
 *
 *   seed ─▶ Prng ─▶ config (fsync policy, tiny limits) + topic tree + clients
 *   step k: advance the clock ─▶ one action (publish, subscribe, unsubscribe, slow/stall a reader,
 *           disconnect at any byte, crash the process or the machine now or at the n-th disk op,
 *           fail an fsync, fill the disk, jump in time, split [no-op for now]) ─▶ drain until
 *           quiescent ─▶ check invariants
 *   end: stop faults, reconnect and drain everyone, check every subscription got everything
 *
 * Quiescent means: no broker task queued, no timer due, and no promise pending — the store and
 * SimDisk only ever wait on microtasks, so one macrotask turn (setImmediate, used as a barrier,
 * never as a timer) lets every chain of I/O finish. Every choice comes from the Prng and every
 * container iterates in insertion order, so a seed replays byte for byte (TraceHash).
 *
 * A crash drops the broker, tip and store of the dead process (its scheduler is abandoned, its
 * connections swallow writes, its disk view fails with EBADF), crashes the SimDisk (power loss:
 * unsynced data lost, last write cut at a random byte) or kills the process (written data
 * survives), then reopens the Store (recovery), checks what it holds against the reference,
 * refills the tip from `store.readNewest`, builds a new Broker, and clients reconnect.
 *
 * Durability by policy: under `always` an acknowledged message is fsynced, so both power loss and
 * kill -9 must keep it. Under `interval`/`never` a message is acknowledged once written: a power
 * loss may lose it (the policy's documented risk), so those runs crash only the process (written
 * data survives in the page cache), where "every acknowledged message survives" still holds.
 */
import { Broker } from "../broker/broker.ts";
import type { BrokerStore, StoredMessageLike } from "../broker/ports.ts";
import type { Session } from "../broker/session.ts";
import { FRAME_BYTES_MAX, RECORD_HEADER_BYTES } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { Prng } from "../stdx/prng.ts";
import { type FsyncPolicy, Store, type StoreOptions } from "../store/mod.ts";
import { Tip } from "../tip/tip.ts";
import { Filter } from "../topic/filter.ts";
import { TopicTable } from "../topic/topic_table.ts";
import { Checker, check, InvariantViolation } from "./invariants.ts";
import type { ReferenceMessage } from "./reference_stream.ts";
import { type ClientSubscription, SimClient } from "./sim_client.ts";
import { SimClock, SimScheduler } from "./sim_clock.ts";
import { SimDisk } from "./sim_disk.ts";
import { DiskOpClock, faultDisk, type LifeToken } from "./sim_fault_disk.ts";
import { NetworkTamper, SimConnection } from "./sim_network.ts";
import { TraceHash } from "./sim_trace.ts";
import { makeFilter, makePayload, makeStart, makeTopicTree, pickTopic, type TopicTree } from "./workload.ts";

/** Bugs `--inject-bug` plants at the edge of the simulated world. */
export const INJECT_BUGS = ["drop-one", "reorder", "lose-acked"] as const;
/** A plantable bug. */
export type InjectBug = (typeof INJECT_BUGS)[number];

/** What to simulate. */
export interface SimulationOptions {
  seed: number;
  steps: number;
  injectBug?: InjectBug | null;
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
    crashes: number;
    restarts: number;
    disconnects: number;
    storageFailures: number;
    /** Publishes answered ARIA_ERR_STORAGE_FAILED. */
    failedPublishes: number;
    diskOps: number;
    /** Most bytes a session's send queue held beyond its limit (after a step). */
    queueOvershootBytesMax: number;
  };
}

const START_US = 1_700_000_000_000_000;
/** A planted network bug waits this many steps (a constant: `--steps k` must replay step k exactly). */
const TAMPER_FROM_STEP = 10;
/** What a subscriber's queue may hold past its limit: one largest simulated message and a few control frames. */
const SUBSCRIBER_QUEUE_SLACK_BYTES = 4096 + 512;
/** Steps a run keeps reconnecting and draining at the end before it must be settled. */
const SETTLE_ROUNDS_MAX = 40;

/** Runs one seed; never throws for an invariant (it is returned). */
export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const simulation = new Simulation(options);
  return simulation.run();
}

/** The command that replays a failure. */
export function replayCommand(seed: number, step: number, injectBug?: InjectBug | null): string {
  return `aria simulate --seed ${seed} --steps ${step}${injectBug ? ` --inject-bug ${injectBug}` : ""}`;
}

// ---- Configuration -------------------------------------------------------------------------

interface Config {
  fsync: FsyncPolicy;
  tipBytes: number;
  poolBlocks: number;
  sendQueueBytesMax: number;
  catchUpSliceBytes: number;
  store: StoreOptions;
  publishers: number;
  subscribers: number;
  /** Action weights. */
  weights: Record<ActionKind, number>;
}

type ActionKind =
  | "publish" | "subscribe" | "unsubscribe" | "read-mode" | "disconnect" | "cut-frame" | "kill" | "power-loss"
  | "crash-at-op" | "fsync-fails" | "disk-full" | "time-jump" | "split" | "idle";

function pick<T>(prng: Prng, values: readonly T[]): T {
  return values[prng.nextInt(values.length)];
}

function makeConfig(prng: Prng): Config {
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
      segmentBytesMax: pick(prng, [512, 2048, 65536]),
      segmentAgeUsMax: pick(prng, [20_000, 1_000_000, 600_000_000]),
      indexIntervalBytes: pick(prng, [128, 4096]),
      openFilesMax: pick(prng, [8, 32]),
      readBufferBytes: pick(prng, [4096, 65536]),
      readBatchBytesMax: pick(prng, [200, 4096, 1 << 20]),
    },
    publishers: 1 + prng.nextInt(3),
    subscribers: 1 + prng.nextInt(4),
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
      split: 0.5,
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

  append(seq: number, timeUs: number, topic: string, payload: Uint8Array): void {
    this.inner.append(seq, timeUs, topic, payload);
    this.checker.onAppend(seq, timeUs, topic, payload);
  }

  commit(): Promise<void> {
    return this.inner.commit();
  }

  read(filter: Filter, from: { seq: number } | { timeUs: number }): { nextBatch(): Promise<StoredMessageLike[]> } {
    return this.inner.read(filter, from);
  }
}

/** One life of the server process. */
interface Life {
  token: LifeToken;
  store: Store;
  tip: Tip;
  broker: Broker;
  scheduler: SimScheduler;
  connections: Set<SimConnection>;
  lastMaintainUs: number;
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
  private loseAckedArmed: boolean;
  private nextConnectionLabel = 1;
  private nextPayloadTag = 1;
  private readonly counters = { crashes: 0, restarts: 0, storageFailures: 0, queueOvershootBytesMax: 0 };

  constructor(private readonly options: SimulationOptions) {
    this.prng = new Prng(options.seed);
    this.config = makeConfig(this.prng);
    this.disk = new SimDisk({ seed: this.prng.nextU32() });
    this.tree = makeTopicTree(this.prng);
    const bug = options.injectBug ?? null;
    this.tamper = new NetworkTamper(bug === "drop-one" || bug === "reorder" ? bug : null, new Prng(options.seed ^ 0x5eed), TAMPER_FROM_STEP);
    this.loseAckedArmed = bug === "lose-acked";
    this.opClock.onCrash = () => this.crash(this.config.fsync === "always" && this.prng.nextInt(2) === 0 ? "power" : "process");
    const world = { checker: this.checker, tamper: this.tamper, step: () => this.step };
    for (let i = 0; i < this.config.publishers; i++) this.clients.push(new SimClient(`pub${i + 1}`, true, false, world));
    for (let i = 0; i < this.config.subscribers; i++) this.clients.push(new SimClient(`sub${i + 1}`, false, true, world));
    if (this.prng.nextInt(3) === 0) this.clients.push(new SimClient("both", true, true, world));
  }

  async run(): Promise<SimulationResult> {
    let failure: SimulationFailure | null = null;
    try {
      await this.startLife(0);
      for (this.step = 1; this.step <= this.options.steps; this.step++) await this.oneStep();
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
        crashes: this.counters.crashes,
        restarts: this.counters.restarts,
        disconnects: clientCounters.reduce((sum, c) => sum + c.disconnects, 0),
        storageFailures: this.counters.storageFailures,
        failedPublishes: clientCounters.reduce((sum, c) => sum + c.failedPublishes, 0),
        diskOps: this.opClock.ops,
        queueOvershootBytesMax: this.counters.queueOvershootBytesMax,
      },
    };
  }

  private describe(error: unknown): SimulationFailure {
    if (error instanceof InvariantViolation) return { step: this.step, invariant: error.invariant, details: error.details };
    const message = error instanceof Error ? `${error.message}\n${(error.stack ?? "").split("\n").slice(1, 6).join("\n")}` : String(error);
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
      const disk = faultDisk(this.disk.view(), this.opClock, this.trace, token);
      const storeOptions: StoreOptions = { ...this.config.store, schedule: scheduler.schedule };
      let store: Store;
      let stored: ReferenceMessage[];
      let newest: ReferenceMessage[];
      try {
        store = (await Store.open(disk, storeOptions)).store;
        stored = await readAll(store);
        newest = await store.readNewest(this.config.tipBytes, { bytesOf: (m) => RECORD_HEADER_BYTES + ((m.payload.length + 7) & ~7) });
      } catch (error) {
        if (this.crashPending !== null) continue; // crashed again during recovery: recover again
        // An injected fsync failure or a full disk may hit recovery too: the operator retries.
        const code = (error as { code?: string }).code;
        const cause = (error as Error).message;
        if (code === "EIO" || code === "ENOSPC" || /injected I\/O error|no space left/.test(cause)) {
          token.alive = false;
          this.disk.kill();
          continue;
        }
        throw new InvariantViolation("recovery-succeeds", `Store.open after a crash failed: ${cause}`);
      } finally {
        this.recovering = null;
      }
      this.checker.afterRecovery(store.nextSeq, committedBefore, stored);
      const topics = new TopicTable();
      const tip = new Tip(topics, { capacityBytes: this.config.tipBytes, poolBlocks: this.config.poolBlocks });
      for (const message of newest) tip.append(topics.internValid(message.topic), message.seq, message.timeUs, message.payload);
      const broker = new Broker({
        topics,
        tip,
        store: new ObservedStore(store, this.checker),
        clock: this.clock,
        scheduler,
        sendQueueBytesMax: this.config.sendQueueBytesMax,
        catchUpSliceBytes: this.config.catchUpSliceBytes,
      });
      this.life = { token, store, tip, broker, scheduler, connections: new Set(), lastMaintainUs: this.clock.timeUs };
      return;
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
    life.token.alive = false;
    this.life = null;
    const committedBefore = life.store.committedSeq;
    for (const connection of life.connections) connection.dead = true;
    for (const client of this.clients) {
      if (client.connection !== null && life.connections.has(client.connection)) this.dropClient(client);
    }
    if (kind === "power") this.disk.crash({ mode: this.prng.nextInt(4) === 0 ? "subset" : "prefix" });
    else this.disk.kill();
    if (this.loseAckedArmed) this.loseAcked();
    this.crashPending = { committedBefore: Math.max(committedBefore, this.crashPending?.committedBefore ?? 0) };
  }

  /** `--inject-bug lose-acked`: the disk loses the newest acknowledged record (a synced write). */
  private loseAcked(): void {
    const journals = this.disk.paths().filter((path) => path.startsWith("journal/"));
    const newest = journals.at(-1);
    if (newest === undefined || this.checker.ackedMaxSeq === 0) return;
    const bytes = this.disk.snapshot(newest) ?? new Uint8Array(0);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const headerBytes = bytes.length >= 8 ? view.getUint16(6, true) : 0;
    for (let at = headerBytes; at + 16 <= bytes.length; ) {
      const length = view.getUint32(at, true);
      if (length < 32) return;
      if (readU64(view, at + 8) === this.checker.ackedMaxSeq) {
        this.disk.cut(newest, at + 1);
        this.loseAckedArmed = false;
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
    const connection = new SimConnection((bytes) => this.guard(() => client.receive(bytes)), this.trace, label);
    client.connection = connection;
    life.connections.add(connection);
    connection.sessionId = life.broker.open(connection);
    for (const frame of client.opening()) this.send(client, frame);
  }

  /** Sends `bytes` to the server, in 1-3 pieces (the decoder must take any split). */
  private send(client: SimClient, bytes: Uint8Array): void {
    const life = this.life;
    const connection = client.connection;
    if (life === null || connection === null || connection.dead || connection.closedByServer) return;
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

  /** The client hangs up: the server sees the close. */
  private hangUp(client: SimClient): void {
    const connection = client.connection;
    if (connection === null) return;
    this.dropClient(client);
    this.life?.broker.closed(connection.sessionId);
  }

  private noticeServerCloses(): number {
    let noticed = 0;
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
    if (this.crashPending === null && this.life !== null && this.restartAtStep !== 0 && this.restartAtStep <= this.step) {
      this.crash("process"); // the operator restarts a server whose storage failed
    }
    if (this.diskFullUntilStep !== 0 && this.diskFullUntilStep <= this.step) {
      this.disk.capacityBytes = Infinity;
      this.diskFullUntilStep = 0;
    }
    await this.drain();
    this.prepareClients(false);
    await this.act(this.chooseAction());
    await this.drain();
    this.afterStep();
  }

  /** Reconnects due clients, refreshes read budgets, signals drains. */
  private prepareClients(settling: boolean): void {
    const life = this.life;
    if (life === null) return;
    for (const client of this.clients) {
      if (client.connection === null && (settling || client.reconnectAtStep <= this.step)) this.connect(client);
      const connection = client.connection;
      if (connection === null) continue;
      if (settling || client.readModeUntilStep <= this.step) client.readMode = { kind: "normal" };
      const mode = client.readMode;
      connection.budgetBytes = mode.kind === "normal" ? Infinity : mode.kind === "slow" ? mode.bytesPerStep : 0;
      if (connection.wantsDrain && connection.budgetBytes > 0 && !connection.dead && !connection.closedByServer) {
        connection.wantsDrain = false;
        life.broker.writable(connection.sessionId);
      }
      for (const sub of client.subscriptions.values()) if (sub.needsResubscribe) this.send(client, client.resubscribe(sub));
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
      case "cut-frame": {
        const publisher = client.publishes ? client : this.clients[0];
        if (!publisher.connected) return;
        const count = prng.nextInt(10) < 7 ? 1 + prng.nextInt(3) : 1 + prng.nextInt(16);
        const messages = [];
        for (let i = 0; i < count; i++) messages.push({ topic: pickTopic(prng, this.tree), payload: makePayload(prng, `${publisher.name}#${this.nextPayloadTag++}:`) });
        const bytes = publisher.publish(messages);
        if (kind === "publish") return this.send(publisher, bytes);
        // Disconnect at any byte: the server gets part of the frame, then the connection drops.
        this.send(publisher, bytes.subarray(0, prng.nextInt(bytes.length)));
        return this.hangUp(publisher);
      }
      case "subscribe": {
        const subscriber = client.subscribes ? client : this.clients.at(-1)!;
        if (!subscriber.connected || subscriber.subscriptions.size >= 4) return;
        const start = makeStart(prng, { nextSeq: this.checker.reference.length + 1, startUs: START_US, nowUs: this.clock.timeUs });
        return this.send(subscriber, subscriber.subscribe(makeFilter(prng, this.tree), start));
      }
      case "unsubscribe": {
        const open = [...client.subscriptions.values()].filter((sub) => !sub.closing && sub.nextExpected !== null);
        if (!client.connected || open.length === 0) return;
        return this.send(client, client.unsubscribe(pick(prng, open)));
      }
      case "read-mode": {
        const roll = prng.nextInt(3);
        client.readMode = roll === 0 ? { kind: "stalled" } : roll === 1 ? { kind: "slow", bytesPerStep: 1 + prng.nextInt(2000) } : { kind: "normal" };
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
        // TODO(split): run `aria split` on the closed segments here, interleaved with traffic and
        // crashes (at any disk op, like recovery), once src/split has an executor: the hook is
        // `runSplit(disk, options)` over this.disk.view() between two drains; the invariants
        // (store-matches-stream after recovery, subscriptions complete) stay as they are.
        return;
      case "idle":
        return;
    }
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
          work++;
        }
        work += life.scheduler.fireDueTimers();
        work += life.scheduler.runTasks();
      }
      if (work === 0) return;
    }
    throw new InvariantViolation("quiescence", "the world never became quiet");
  }

  private afterStep(): void {
    const life = this.life;
    if (life === null) return;
    this.checker.tip(life.tip.stats());
    const visibleSeq = life.broker.stats().visibleSeq;
    check(visibleSeq - 1 <= life.store.committedSeq, "visible-is-committed", () => `visible end ${visibleSeq}, committed ${life.store.committedSeq}`);
    const sessions = (life.broker as unknown as { sessions: Map<number, Session> }).sessions;
    for (const session of sessions.values()) {
      // A publisher's acks may grow its queue to the flood limit (then it is disconnected); a
      // pure subscriber's cursors stop at the limit, so it exceeds it by at most one message.
      const bound = session.clientName.startsWith("sub") ? session.queueBytesMax + SUBSCRIBER_QUEUE_SLACK_BYTES : 2 * session.queueBytesMax + FRAME_BYTES_MAX;
      check(session.queuedBytes <= bound, "send-queue-bounded", () => `session ${session.id} (${session.clientName}) queues ${session.queuedBytes} B, bound ${bound}`);
      this.counters.queueOvershootBytesMax = Math.max(this.counters.queueOvershootBytesMax, session.queuedBytes - session.queueBytesMax);
    }
    check(life.store.failure !== null || life.store.bufferedBytes === 0, "store-buffer-balance", () => `a quiet store still buffers ${life.store.bufferedBytes} B`);
    if (life.store.failure !== null && this.restartAtStep === 0) {
      this.counters.storageFailures++;
      this.restartAtStep = this.step + 1 + this.prng.nextInt(4);
    }
  }

  /** End of run: no more faults; everyone reconnects and drains; every subscription is complete. */
  private async settle(): Promise<void> {
    this.opClock.crashAtOp = Infinity;
    this.disk.capacityBytes = Infinity;
    this.diskFullUntilStep = 0;
    let settled = false;
    for (let round = 0; round < SETTLE_ROUNDS_MAX && !settled; round++) {
      if (this.life !== null && this.life.store.failure !== null) this.crash("process");
      await this.drain();
      this.prepareClients(true);
      this.clock.advance(100_000);
      await this.drain();
      this.afterStep();
      settled = this.life !== null && this.life.store.failure === null && this.clients.every((client) => client.connected && [...client.subscriptions.values()].every((sub) => sub.caughtUp || sub.closing));
    }
    check(settled, "settles", () => `after ${SETTLE_ROUNDS_MAX} quiet rounds some client is still not connected and caught up`);
    const life = this.life!;
    const visibleSeq = life.broker.stats().visibleSeq;
    for (const client of this.clients) {
      check(client.pending.size === 0, "publishes-answered", () => `${client.name}: ${client.pending.size} publishes never answered`);
      for (const sub of client.subscriptions.values()) if (!sub.closing) this.checker.complete(client.name, sub as ClientSubscription, visibleSeq);
    }
  }
}

/** Every message a store holds, in seq order. */
async function readAll(store: Store): Promise<ReferenceMessage[]> {
  const out: ReferenceMessage[] = [];
  const reader = store.read(Filter.of("**"), { seq: 1 });
  for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch()) {
    for (const message of batch) out.push({ seq: message.seq, timeUs: message.timeUs, topic: message.topic, payload: message.payload.slice() });
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
