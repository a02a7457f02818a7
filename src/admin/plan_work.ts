/**
 * plan_work: the admin app's heavy part as one self-contained job — parse or build a volume
 * table, run the planner(s), write the JSON answer as bytes — so the server runs it on a worker
 * thread (src/server/split_worker.ts) and its event loop only moves bytes. Pure: the same function
 * runs inline where no worker pool is given (tests, embedders).
 *
 * Owns the answers of the split routes (plan JSON, the compare document, their 400/413 reasons).
 * Does not check query parameters (params.ts) or decide when work may start (work_gate.ts).
 * A job holds only structured-cloneable data: text and typed arrays, no object per topic, so
 * handing 100,000 live topics to a worker costs one string and two arrays.
 */
import { ADMIN_SPLIT_TOPICS_MAX } from "../constants.ts";
import {
  parseVolumeTable,
  planJson,
  planSplit,
  volumeTableOf,
  type SplitAlgorithm,
  type VolumeRow,
  type VolumeTable,
  type VolumeTableResult,
} from "../split/mod.ts";
import type { VolumeSource } from "./ports.ts";

/** Volumes measured by the server, packed: topics joined by "\n" (no topic holds one). */
export interface PackedVolumes {
  topics: string;
  bytes: Float64Array;
  messages: Float64Array;
}

/** One plan or compare request, with its table as uploaded CSV or packed live volumes. */
export type PlanWork = {
  source: VolumeSource | "upload";
  input: { csv: string } | { packed: PackedVolumes };
} & (
  | { kind: "plan"; algorithm: SplitAlgorithm; maxStores: number | undefined }
  | { kind: "compare"; maxStores: number | undefined }
);

/** The answer: an HTTP status and its JSON body as UTF-8 (transferred from a worker, not copied). */
export interface PlanAnswer {
  status: 200 | 400 | 413 | 500;
  body: Uint8Array;
}

/** Runs planning work off the event loop; `concurrency` jobs at once at most. */
export interface Planner {
  run(work: PlanWork): Promise<PlanAnswer>;
  readonly concurrency: number;
}

/** Packs measured rows for a PlanWork (rows.length must already be within the admin limit). */
export function packVolumes(rows: readonly VolumeRow[]): PackedVolumes {
  const bytes = new Float64Array(rows.length);
  const messages = new Float64Array(rows.length);
  const topics: string[] = new Array(rows.length);
  for (let index = 0; index < rows.length; index++) {
    topics[index] = rows[index].topic;
    bytes[index] = rows[index].bytes;
    messages[index] = rows[index].messages;
  }
  return { topics: topics.join("\n"), bytes, messages };
}

/** Does the work: the answer a route sends. */
export function runPlanWork(work: PlanWork): PlanAnswer {
  const table = tableOf(work);
  if (!table.ok) return answer(table.status, { error: table.reason });
  if (work.kind === "plan")
    return answer(
      200,
      planJson(
        table.table,
        planSplit(table.table, { algorithm: work.algorithm, maxStores: work.maxStores }),
      ),
    );
  return answer(200, compare(table.table, work.source, work.maxStores));
}

type TableOrError =
  | { ok: true; table: VolumeTable }
  | { ok: false; status: 400 | 413 | 500; reason: string };

function tableOf(work: PlanWork): TableOrError {
  if ("csv" in work.input) {
    const result = checked(parseVolumeTable(work.input.csv), 400);
    if (result.ok && result.table.topics.length > ADMIN_SPLIT_TOPICS_MAX)
      return { ok: false, status: 413, reason: tooManyTopics(result.table.topics.length) };
    return result;
  }
  const { topics, bytes, messages } = work.input.packed;
  const names = topics.split("\n");
  const rows: VolumeRow[] = names.map((topic, index) => ({
    topic,
    bytes: bytes[index],
    messages: messages[index],
  }));
  // Measured by this server: a bad table is its bug, not the caller's.
  return checked(volumeTableOf(rows), 500);
}

function checked(result: VolumeTableResult, status: 400 | 500): TableOrError {
  return result.ok ? result : { ok: false, status, reason: `volume table: ${result.reason}` };
}

/** Both planners on one table, and the table itself (the UI draws it). */
function compare(
  table: VolumeTable,
  source: VolumeSource | "upload",
  maxStores: number | undefined,
): unknown {
  return {
    source,
    table: {
      topics: table.topics,
      bytes: Array.from(table.bytes),
      messages: Array.from(table.messages),
      bytesTotal: table.bytesTotal,
    },
    plans: {
      heuristic: planJson(table, planSplit(table, { algorithm: "heuristic" })),
      adaptive: planJson(table, planSplit(table, { algorithm: "adaptive", maxStores })),
    },
  };
}

function answer(status: PlanAnswer["status"], value: unknown): PlanAnswer {
  return { status, body: new TextEncoder().encode(JSON.stringify(value)) };
}

/** The 413 reason of a table over the admin app's topic limit. */
export function tooManyTopics(count: number): string {
  return `the table has ${count} topics, more than the ${ADMIN_SPLIT_TOPICS_MAX} the admin app plans; use 'aria split plan'`;
}
