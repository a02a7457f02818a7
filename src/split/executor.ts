/**
 * executor: `aria split` end to end, with every effect injected — measure the per-topic volumes
 * of the closed data (one task per partition), plan, rewrite each partition into its new stores
 * (one task per partition, run by a pool of workers), make the new files' names durable, then ask
 * the host to switch: one SWAP record in the manifest replaces every old file at once.
 *
 * The host is the process that owns the data directory: a Store this process opened (no server
 * running) or a running `aria serve` reached over its admin HTTP app (src/server/split_host.ts).
 * Either way the switch is checked there against the layout in force, and the old files are
 * removed only once no read uses them. A failure before the switch removes the new files; a crash
 * before it leaves them as orphans the next open removes; the old layout stays in force.
 *
 * Only closed data is split (segments and earlier stores); the journal is never touched. A
 * partition whose layout already is its plan (same stores, no segment) is left alone, so a
 * second run with the same data does nothing.
 */
import type {
  Disk,
  LayoutSwap,
  OpenData,
  PartitionLayout,
  SealResult,
  SegmentMeta,
  SplitDetails,
  SubtreeStoreMeta,
  TopicCount,
} from "../store/mod.ts";
import { indexPath, SEGMENT_DIR, subtreeStorePath } from "../store/layout.ts";
import { recordSpanOf } from "../store/subtree_store_file.ts";
import { partitionOf } from "../topic/mod.ts";
import { planMetrics, type PlanMetrics } from "./metrics.ts";
import type { PlannedSubtreeStore, SplitAlgorithm, SplitPlan } from "./plan.ts";
import { planSplit } from "./plan_report.ts";
import type { SubtreeStoreAssignment } from "./rewrite.ts";
import type { SourceFile, SplitTask, SplitTaskResult } from "./rewrite_files.ts";
import { volumeTableOf, type VolumeRow, type VolumeTable } from "./volume_table.ts";

/** Who owns the data directory: answers layout questions and performs the switch. */
export interface SplitHost {
  layout(): Promise<PartitionLayout[]>;
  reserveIds(count: number): Promise<number>;
  switchLayout(swap: LayoutSwap): Promise<void>;
  /** The journal's records no closed file holds yet (a host without it: not reported). */
  openData?(): Promise<OpenData>;
  /** Closes the open segments now, so the split sees every record appended so far. */
  seal?(): Promise<SealResult>;
}

/** Per-topic volume of one partition. */
export type MeasureTask = { partition: string; files: SourceFile[] };
export type MeasureResult = { partition: string; rows: VolumeRow[]; bytesRead: number };

/** Runs tasks somewhere (a worker pool, or in-process). */
export interface TaskRunner {
  measure(task: MeasureTask): Promise<MeasureResult>;
  split(task: SplitTask): Promise<SplitTaskResult>;
}

/** Progress of the rewrite, after each finished partition. */
export type SplitProgress = {
  phase: "measure" | "rewrite";
  done: number;
  total: number;
  bytesDone: number;
  bytesTotal: number;
  partition: string;
};

/** Options of executeSplit. */
export type SplitOptions = {
  /** How to group topics: a named planner, or any function (tests give random plans). */
  plan: { algorithm: SplitAlgorithm; maxStores?: number } | ((table: VolumeTable) => SplitPlan);
  workers: number;
  dryRun?: boolean;
  /** Close the open segments first (the host's `seal`), so the journal's records are split too. */
  seal?: boolean;
  /** Wall-clock µs since the epoch: when the split started and switched, kept as the last split's (none: not recorded). */
  nowUs?: () => number;
  intervalBytes: number;
  onProgress?: (progress: SplitProgress) => void;
};

/** What a split did (or, dry, would do). */
export type SplitReport = {
  table: VolumeTable | null;
  before: PlanMetrics | null;
  after: PlanMetrics | null;
  partitionsRewritten: number;
  storesWritten: number;
  filesReplaced: number;
  bytesRead: number;
  bytesWritten: number;
  switched: boolean;
  /** What `seal` closed first (null: not asked). */
  sealed: SealResult | null;
  /** What is still open after the layout was taken: not split (null: the host does not say). */
  open: OpenData | null;
};

/** The closed files of a partition as sources: each store alone, the segments in one chain. */
export function sourcesOf(layout: PartitionLayout): SourceFile[][] {
  const source = (file: SegmentMeta | SubtreeStoreMeta): SourceFile => {
    const span = recordSpanOf(file);
    return { path: span.path, dataStart: span.dataStart, bytes: span.end };
  };
  return [...layout.stores.map((store) => [source(store)]), layout.segments.map(source)];
}

/** Measures the per-topic volumes of the closed data in `layouts`. */
export async function measureVolumes(
  layouts: readonly PartitionLayout[],
  runner: TaskRunner,
  options: { workers: number; onProgress?: (p: SplitProgress) => void },
): Promise<{ rows: VolumeRow[]; bytesRead: number }> {
  const rows: VolumeRow[] = [];
  let bytesRead = 0;
  const bytesTotal = layouts.reduce((sum, layout) => sum + layoutBytes(layout), 0);
  let bytesDone = 0;
  let done = 0;
  await runPool(layouts, options.workers, async (layout) => {
    const result = await runner.measure({
      partition: layout.partition,
      files: sourcesOf(layout).flat(),
    });
    rows.push(...result.rows);
    bytesRead += result.bytesRead;
    bytesDone += layoutBytes(layout);
    options.onProgress?.({
      phase: "measure",
      done: ++done,
      total: layouts.length,
      bytesDone,
      bytesTotal,
      partition: layout.partition,
    });
  });
  return { rows, bytesRead };
}

function layoutBytes(layout: PartitionLayout): number {
  let total = 0;
  for (const file of [...layout.segments, ...layout.stores]) total += file.bytes;
  return total;
}

/** The current layout as a plan: a partition's stores when it has only stores, else one store for the partition. */
export function currentPlan(table: VolumeTable, layouts: readonly PartitionLayout[]): SplitPlan {
  const topicIndex = new Map(table.topics.map((topic, index) => [topic, index]));
  const stores: PlannedSubtreeStore[] = [];
  const store = (id: string, partition: string, topics: Iterable<string>) => {
    const indexes = [...topics]
      .map((topic) => topicIndex.get(topic))
      .filter((index): index is number => index !== undefined)
      .sort((a, b) => a - b);
    if (indexes.length === 0) return;
    stores.push({
      id,
      partition,
      topics: Int32Array.from(indexes),
      bytes: indexes.reduce((sum, index) => sum + table.bytes[index], 0),
    });
  };
  const partitionTopics = new Map<string, string[]>();
  for (const topic of table.topics) {
    // By partitionOf, not by prefix: topic "x/a/b" is partition "x/a"'s, never partition "x"'s.
    const partition = partitionOf(topic);
    const layout = layouts.find((l) => l.partition === partition);
    if (layout !== undefined)
      partitionTopics.set(layout.partition, [
        ...(partitionTopics.get(layout.partition) ?? []),
        topic,
      ]);
  }
  for (const layout of layouts) {
    if (layout.segments.length === 0 && layout.stores.length > 0) {
      for (const s of layout.stores) store(s.label, layout.partition, s.topics);
    } else {
      store(
        layout.partition.replaceAll("/", "~"),
        layout.partition,
        partitionTopics.get(layout.partition) ?? [],
      );
    }
  }
  return { algorithm: "heuristic", subtrees: stores, budget: null, budgetRaisedTo: null };
}

/** Runs a split against `host`, with tasks run by `runner`; `disk` is the data directory. */
export async function executeSplit(
  host: SplitHost,
  runner: TaskRunner,
  disk: Disk,
  options: SplitOptions,
): Promise<SplitReport> {
  const startedUs = options.nowUs?.() ?? null;
  let sealed: SealResult | null = null;
  if (options.seal === true) {
    if (host.seal === undefined)
      throw new Error(
        "Cannot seal: this data directory's owner does not close open segments on request",
      );
    sealed = await host.seal();
  }
  const layouts = await host.layout();
  const open = (await host.openData?.()) ?? null;
  const report: SplitReport = {
    table: null,
    before: null,
    after: null,
    partitionsRewritten: 0,
    storesWritten: 0,
    filesReplaced: 0,
    bytesRead: 0,
    bytesWritten: 0,
    switched: false,
    sealed,
    open,
  };
  if (layouts.length === 0) return report;
  const measured = await measureVolumes(layouts, runner, options);
  report.bytesRead += measured.bytesRead;
  const built = volumeTableOf(measured.rows);
  if (!built.ok) throw new Error(`Cannot plan the split: ${built.reason}`);
  const table = built.table;
  report.table = table;
  const plan =
    typeof options.plan === "function" ? options.plan(table) : planSplit(table, options.plan).plan;
  report.before = planMetrics(table, currentPlan(table, layouts));
  report.after = planMetrics(table, plan);

  // Per partition: the plan's groups; partitions already laid out so are left alone.
  const groups = new Map<string, { label: string; topics: string[] }[]>();
  for (const store of plan.subtrees) {
    const list = groups.get(store.partition) ?? [];
    list.push({
      label: store.id,
      topics: Array.from(store.topics, (index) => table.topics[index]).sort(),
    });
    groups.set(store.partition, list);
  }
  const work = layouts.filter(
    (layout) => !alreadyPlanned(layout, groups.get(layout.partition) ?? []),
  );
  report.partitionsRewritten = work.length;
  if (options.dryRun === true || work.length === 0) return report;

  const subtreeCount = work.reduce(
    (sum, layout) => sum + (groups.get(layout.partition)?.length ?? 0),
    0,
  );
  let nextId = await host.reserveIds(subtreeCount);
  const generation = nextId;
  const tasks: SplitTask[] = work.map((layout) => {
    const stores: SubtreeStoreAssignment[] = (groups.get(layout.partition) ?? []).map((group) => ({
      id: nextId++,
      ...group,
    }));
    return {
      partition: layout.partition,
      generation,
      sources: sourcesOf(layout),
      subtrees: stores,
      intervalBytes: options.intervalBytes,
    };
  });
  const added: SubtreeStoreMeta[] = [];
  const topics: { id: number; topics: TopicCount[] }[] = [];
  const bytesTotal = work.reduce((sum, layout) => sum + layoutBytes(layout), 0);
  let bytesDone = 0;
  let done = 0;
  let switchAsked = false;
  try {
    await runPool(tasks, options.workers, async (task, index) => {
      const result = await runner.split(task);
      added.push(...result.metas);
      topics.push(...(result.topics ?? []));
      report.bytesRead += result.bytesRead;
      report.bytesWritten += result.bytesWritten;
      bytesDone += layoutBytes(work[index]);
      options.onProgress?.({
        phase: "rewrite",
        done: ++done,
        total: tasks.length,
        bytesDone,
        bytesTotal,
        partition: task.partition,
      });
    });
    await disk.syncDir(SEGMENT_DIR);
    const removed = work.flatMap((layout) => [
      ...layout.stores.map((store) => store.id),
      ...layout.segments.map((segment) => segment.id),
    ]);
    switchAsked = true;
    await host.switchLayout({
      removed,
      added,
      split: splitDetails(options, startedUs, report.after),
      topics,
    });
    report.switched = true;
    report.storesWritten = added.length;
    report.filesReplaced = removed.length;
  } catch (error) {
    // Before the switch was asked for, nothing switched: the new files are orphans, removed now
    // (or by the next open after a crash). Once asked, the switch may have taken even though it
    // failed (a SWAP record whose fsync failed may still reach the disk, a server may die before
    // answering): the files stay, and the owner's next open removes them if they are orphans.
    if (switchAsked) throw error;
    for (const task of tasks) {
      for (const store of task.subtrees) {
        await disk.remove(subtreeStorePath(store.id)).catch(() => {});
        await disk.remove(indexPath(store.id)).catch(() => {});
      }
    }
    throw error;
  }
  return report;
}

/** What the host records of this split at its switch: when, how long, which algorithm, the plan's metrics. */
function splitDetails(
  options: SplitOptions,
  startedUs: number | null,
  after: PlanMetrics | null,
): SplitDetails {
  const finishedUs = options.nowUs?.() ?? null;
  return {
    finishedUs,
    durationUs:
      finishedUs === null || startedUs === null ? null : Math.max(0, finishedUs - startedUs),
    algorithm: typeof options.plan === "function" ? null : options.plan.algorithm,
    plan:
      after === null
        ? null
        : {
            stores: after.stores,
            wastedBytesTotal: after.wastedBytesTotal,
            worstRatio: after.worstRatio.ratio,
          },
  };
}

function alreadyPlanned(layout: PartitionLayout, groups: readonly { topics: string[] }[]): boolean {
  if (layout.segments.length > 0 || layout.stores.length !== groups.length) return false;
  const key = (topics: readonly string[]) => [...topics].sort().join("\n");
  const have = new Set(layout.stores.map((store) => key(store.topics)));
  return groups.every((group) => have.has(key(group.topics)));
}

/** Runs `work` over `items` with at most `concurrency` at once; the first failure rejects (after the rest settle). */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const lane = async () => {
    while (failure === null && next < items.length) {
      const index = next++;
      try {
        await work(items[index], index);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, lane));
  if (failure !== null) throw failure;
}
