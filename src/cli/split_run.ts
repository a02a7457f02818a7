/**
 * `aria split` (the rewrite) and `aria split stats`: argument parsing, the owner of the data
 * directory (a running server or this process: src/server/split_owner.ts), the worker pool, the
 * progress line and the before/after table. The work itself is src/split/executor.ts.
 */
import { formatBytes } from "../stdx/format_bytes.ts";
import {
  SEGMENT_AGE_US_MAX,
  SEGMENT_BYTES_MAX,
  SEGMENT_INDEX_INTERVAL_BYTES,
} from "../constants.ts";
import { inProcessRunner } from "../split/in_process.ts";
import {
  executeSplit,
  measureVolumes,
  type SplitProgress,
  type SplitReport,
} from "../split/executor.ts";
import type { OpenData, SealResult } from "../store/mod.ts";
import {
  SPLIT_ALGORITHMS,
  volumeTableOf,
  VOLUME_TABLE_HEADER,
  type PlanMetrics,
  type SplitAlgorithm,
} from "../split/mod.ts";
import { runtime } from "../runtime/mod.ts";
import {
  defaultWorkers,
  nowMs,
  openSplitOwner,
  type SplitOwner,
  stderrIsTerminal,
  workerRunner,
} from "../server/mod.ts";
import { parseCommand, parseCount, stringFlag, UsageError } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";
import { clientTlsOf } from "./tls_files.ts";

/** Usage of `aria split` (the rewrite). */
export const SPLIT_RUN_USAGE = `Usage: aria split [--data-dir DIR] [--algorithm adaptive|heuristic] [--max-stores N] [--workers N] [--seal] [--dry-run] [--ca FILE]

Measures the per-topic volumes of the closed segments and stores of a data directory, plans, and
rewrites each partition into its subtree stores on worker threads (one partition per task), then
switches to the new layout in one durable step and removes the files it replaced. Safe while
'aria serve' uses the directory: the server performs the switch. Ends with the plan metrics of
the layout before and after.

Only closed segments are split. New messages sit in the journal, in a partition's open segment,
until it reaches ${formatBytes(SEGMENT_BYTES_MAX)}, its oldest message is ${SEGMENT_AGE_US_MAX / 60e6} minutes old (while a server runs), or the server
stops cleanly; --seal closes every open segment first, so the split takes all messages so far.

Options:
  --data-dir DIR      the data directory (default ./aria-data)
  --algorithm NAME    adaptive (default) or heuristic
  --max-stores N      adaptive's budget of stores (default: the heuristic's store count)
  --workers N         worker threads (default: the number of cores)
  --seal              close the open segments first, then split (with --dry-run: close them,
                      then only plan)
  --dry-run           measure and plan, print the metrics, change nothing (but what --seal closes)
  --json              print the report as one JSON document
  --ca FILE           trust this CA (PEM) when the server's admin app is HTTPS (default: ARIA_CA,
                      else the system's CAs)
  -h, --help          show this help
`;

/** Usage of `aria split stats`. */
export const SPLIT_STATS_USAGE = `Usage: aria split stats [--data-dir DIR] [--json|--csv] [--ca FILE]

Prints the per-topic volumes (record bytes, messages) of the closed segments and subtree stores
of a data directory: the volume table 'aria split plan --volumes' reads (CSV, the default).
Messages still in open segments (the journal) are not counted: stderr says how many, and
'aria split --seal --dry-run' closes them.

Options:
  --data-dir DIR      the data directory (default ./aria-data)
  --csv               CSV with the header topic,bytes,messages (default)
  --json              {"topics": [{"topic", "bytes", "messages"}], "open": {"partitions", "records",
                      "bytes", "oldestTimeUs", "segmentAgeUs", "segmentBytesMax"}}
  --ca FILE           trust this CA (PEM) when the server's admin app is HTTPS (default: ARIA_CA,
                      else the system's CAs)
  -h, --help          show this help
`;

/** Runs `aria split [flags]`. */
export async function splitRunCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    "data-dir": { type: "string" },
    algorithm: { type: "string" },
    "max-stores": { type: "string" },
    workers: { type: "string" },
    "dry-run": { type: "boolean" },
    seal: { type: "boolean" },
    json: { type: "boolean" },
    ca: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SPLIT_RUN_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const algorithm = stringFlag(values, "algorithm", "adaptive");
  if (!SPLIT_ALGORITHMS.includes(algorithm as SplitAlgorithm))
    throw new UsageError(`--algorithm: "${algorithm}" is not heuristic or adaptive`);
  const maxStoresText = stringFlag(values, "max-stores", "");
  if (maxStoresText !== "" && algorithm !== "adaptive")
    throw new UsageError("--max-stores applies to --algorithm adaptive only");
  const maxStores = maxStoresText === "" ? undefined : parseCount(maxStoresText, "--max-stores");
  if (maxStores !== undefined && !Number.isSafeInteger(maxStores))
    throw new UsageError(`--max-stores: ${maxStoresText} is too large`);
  const workersText = stringFlag(values, "workers", "");
  const workers = workersText === "" ? defaultWorkers() : parseCount(workersText, "--workers");
  if (workers < 1 || workers > 256) throw new UsageError("--workers: must be between 1 and 256");
  const dataDir = stringFlag(values, "data-dir", "./aria-data");

  const owner = await splitOwnerOf(dataDir, values, io);
  if (typeof owner === "string") {
    io.err(`aria split: ${owner}\n`);
    return EXIT_FAILURE;
  }
  const started = nowMs();
  const runner = workerRunner(dataDir, workers);
  const terminal = stderrIsTerminal();
  let report: SplitReport;
  try {
    report = await executeSplit(owner.host, runner, owner.disk, {
      plan: { algorithm: algorithm as SplitAlgorithm, maxStores },
      workers,
      dryRun: values["dry-run"] === true,
      seal: values.seal === true,
      nowUs: () => runtime.clock.nowUs(),
      intervalBytes: SEGMENT_INDEX_INTERVAL_BYTES,
      onProgress: terminal
        ? (progress) => io.err(`\r\x1b[K${progressLine(progress, nowMs() - started)}`)
        : undefined,
    });
  } catch (error) {
    if (terminal) io.err("\r\x1b[K");
    io.err(`aria split: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  } finally {
    runner.close();
    await owner.close();
  }
  if (terminal) io.err("\r\x1b[K");
  const seconds = (nowMs() - started) / 1000;
  if (values.json === true) {
    const { table: _table, ...rest } = report;
    io.out(
      `${JSON.stringify({ ...rest, via: owner.via, dryRun: values["dry-run"] === true, seconds })}\n`,
    );
  } else {
    io.out(
      reportText(report, {
        seconds,
        dryRun: values["dry-run"] === true,
        via: owner.via,
        workers,
        nowUs: runtime.clock.nowUs(),
        dataDir,
      }),
    );
  }
  return EXIT_OK;
}

function progressLine(progress: SplitProgress, elapsedMs: number): string {
  const rate = elapsedMs > 0 ? progress.bytesDone / (elapsedMs / 1000) : 0;
  const percent =
    progress.bytesTotal > 0 ? Math.floor((100 * progress.bytesDone) / progress.bytesTotal) : 100;
  return `${progress.phase} ${progress.done}/${progress.total} partitions, ${percent}% (${formatBytes(progress.bytesDone)}, ${formatBytes(rate)}/s) ${progress.partition}`;
}

/** How a report was made, for its text. */
export type ReportContext = {
  seconds: number;
  dryRun: boolean;
  via: string;
  workers: number;
  nowUs: number;
  dataDir: string;
};

/** The closing report: what was done, then the four metrics before and after (bytes as formatBytes prints them). */
export function reportText(report: SplitReport, how: ReportContext): string {
  const lines: string[] = [];
  if (report.sealed !== null) lines.push(sealedText(report.sealed));
  if (report.table === null) {
    if (report.open !== null && report.open.records > 0)
      return `${[...lines, "nothing to split yet: no closed segments", ...openText(report.open, how)].join("\n")}\n`;
    return `${[...lines, "nothing to split: the data directory holds no messages"].join("\n")}\n`;
  }
  if (how.dryRun)
    lines.push(
      `dry run: would rewrite ${report.partitionsRewritten} partition(s); nothing changed`,
    );
  else if (!report.switched)
    lines.push("nothing to do: every partition already has its planned stores");
  else {
    lines.push(
      `rewrote ${report.partitionsRewritten} partition(s) into ${report.storesWritten} store(s), replacing ${report.filesReplaced} file(s); switched by the ${how.via === "server" ? "running server" : "split itself"}`,
    );
    const rate = report.bytesRead / Math.max(how.seconds, 1e-9);
    lines.push(
      `read ${formatBytes(report.bytesRead)}, wrote ${formatBytes(report.bytesWritten)} in ${how.seconds.toFixed(2)} s with ${how.workers} worker(s) (${formatBytes(rate)}/s read)`,
    );
  }
  if (report.open !== null && report.open.records > 0)
    lines.push(
      ...openText(report.open, how).map((line, i) => (i === 0 ? `not split: ${line}` : line)),
    );
  lines.push("");
  const row = (name: string, before: string, after: string) =>
    `${name.padEnd(18)}${before.padEnd(44)}${after}`;
  const b = report.before as PlanMetrics;
  const a = report.after as PlanMetrics;
  lines.push(row("", "before", "after"));
  lines.push(row("stores", String(b.stores), String(a.stores)));
  lines.push(row("wasted bytes", formatBytes(b.wastedBytesTotal), formatBytes(a.wastedBytesTotal)));
  lines.push(
    row(
      "worst waste",
      `${b.worstWaste.topic} (${formatBytes(b.worstWaste.wastedBytes)})`,
      `${a.worstWaste.topic} (${formatBytes(a.worstWaste.wastedBytes)})`,
    ),
  );
  lines.push(
    row(
      "worst ratio",
      `${b.worstRatio.topic} (${b.worstRatio.ratio.toFixed(2)}x)`,
      `${a.worstRatio.topic} (${a.worstRatio.ratio.toFixed(2)}x)`,
    ),
  );
  return `${lines.join("\n")}\n`;
}

function sealedText(sealed: SealResult): string {
  if (sealed.records === 0) return "sealed: no open segment";
  return `sealed: ${messagesText(sealed.records, sealed.bytes)} closed into ${sealed.segmentsClosed} segment(s)`;
}

function messagesText(records: number, bytes: number): string {
  return `${records} message${records === 1 ? "" : "s"} (${formatBytes(bytes)})`;
}

/**
 * What is still open and when it closes: the rules of src/store (a partition's open segment
 * closes at the segment size, at the segment age while a server runs, at a clean stop), when the
 * oldest one would close by age, and how to close them now.
 */
export function openText(
  open: OpenData,
  how: { via: string; nowUs: number; dataDir: string },
): string[] {
  const ageMinutes = Math.round(open.segmentAgeUs / 60e6);
  const lines = [
    `${messagesText(open.records, open.bytes)} in ${open.partitions} partition(s) are in open segments, in the journal`,
  ];
  if (how.via === "server") {
    const byAge =
      open.oldestTimeUs === null ? null : open.oldestTimeUs + open.segmentAgeUs - how.nowUs;
    const when =
      byAge === null
        ? ""
        : byAge <= 0
          ? " (the oldest: any moment now)"
          : ` (the oldest: in about ${durationText(byAge)})`;
    lines.push(
      `a partition's open segment closes at ${formatBytes(open.segmentBytesMax)}, when its oldest message is ${ageMinutes} min old${when}, or when the server stops cleanly`,
    );
  } else {
    lines.push(
      `a partition's open segment closes at ${formatBytes(open.segmentBytesMax)}, when its oldest message is ${ageMinutes} min old while 'aria serve' runs on the directory, or when it stops cleanly`,
    );
  }
  lines.push(
    `close them now: aria split --data-dir ${how.dataDir} --seal (with --dry-run: seal, then only plan)`,
  );
  return lines;
}

/** A positive duration in µs, roughly: "9 min 40 s", "40 s". */
function durationText(us: number): string {
  const seconds = Math.max(1, Math.round(us / 1e6));
  const minutes = Math.floor(seconds / 60);
  return minutes === 0 ? `${seconds} s` : `${minutes} min ${seconds % 60} s`;
}

/** Runs `aria split stats`. */
export async function splitStatsCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    "data-dir": { type: "string" },
    json: { type: "boolean" },
    csv: { type: "boolean" },
    ca: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(SPLIT_STATS_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (values.json === true && values.csv === true)
    throw new UsageError("--json and --csv exclude each other");
  const dataDir = stringFlag(values, "data-dir", "./aria-data");
  const owner = await splitOwnerOf(dataDir, values, io);
  if (typeof owner === "string") {
    io.err(`aria split stats: ${owner}\n`);
    return EXIT_FAILURE;
  }
  let rows: Awaited<ReturnType<typeof measureVolumes>>["rows"];
  let open: OpenData | null;
  try {
    const layouts = await owner.host.layout();
    open = (await owner.host.openData?.()) ?? null;
    rows = (
      await measureVolumes(layouts, inProcessRunner(owner.disk, { crc32: runtime.crc32 }), {
        workers: 4,
      })
    ).rows;
  } catch (error) {
    io.err(`aria split stats: ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  } finally {
    await owner.close();
  }
  const built = rows.length === 0 ? null : volumeTableOf(rows);
  const topics =
    built === null || !built.ok
      ? []
      : built.table.topics.map((topic, i) => ({
          topic,
          bytes: built.table.bytes[i],
          messages: built.table.messages[i],
        }));
  if (values.json === true) io.out(`${JSON.stringify({ topics, open })}\n`);
  else
    io.out(
      `${[VOLUME_TABLE_HEADER, ...topics.map((t) => `${csvField(t.topic)},${t.bytes},${t.messages}`)].join("\n")}\n`,
    );
  // The table counts closed files only: say on stderr (the CSV stays a clean table) what it leaves out.
  if (open !== null && open.records > 0) {
    const lines = openText(open, { via: owner.via, nowUs: runtime.clock.nowUs(), dataDir });
    io.err(`aria split stats: not counted: ${lines.join("\n")}\n`);
  }
  return EXIT_OK;
}

function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The owner of `dataDir`, reaching a serving owner's HTTPS admin app with --ca (else ARIA_CA). */
async function splitOwnerOf(
  dataDir: string,
  values: Record<string, unknown>,
  io: CliIo,
): Promise<SplitOwner | string> {
  // The admin URL is known only once the lock is read: take the CA as for a tls:// URL.
  const tls = await clientTlsOf({ ca: values.ca }, "tls://", io);
  if (!tls.ok) return tls.message;
  return await openSplitOwner(dataDir, { ca: tls.tls?.ca });
}
