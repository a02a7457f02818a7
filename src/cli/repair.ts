/**
 * `aria repair --data-dir DIR [--dry-run] [--json]`: salvages a data directory `aria serve`
 * refused (exit 5): keeps every intact record, moves damaged bytes into DIR/damaged/ (never
 * deletes them), and prints which seq ranges are lost and where they were. The work is the
 * store's (src/store/repair.ts); this file parses flags, takes the directory's LOCK (a live
 * server holding it is refused) and prints the report. Exit 0 when the directory is servable
 * now (a dry run: when it would be), 1 on I/O errors or a held lock, 2 on wrong arguments.
 */
import { STORE_DIR_DEFAULT } from "../constants.ts";
import { acquireLock, type ConsumersRepair, repairConsumersFile, runtime } from "../runtime/mod.ts";
import { type RepairReport, repairStore } from "../store/mod.ts";
import { parseCommand, stringFlag, UsageError } from "./args.ts";
import { EXIT_FAILURE, EXIT_OK, type CliIo } from "./cli_io.ts";

/** Usage of `aria repair`. */
export const REPAIR_USAGE = `Usage: aria repair --data-dir DIR [--dry-run] [--json]

Repairs a data directory that \`aria serve\` refused to open (exit code 5): keeps every intact
record (records after a damaged region too), moves the damaged bytes into DIR/damaged/ (never
deletes them), and prints which seq ranges are lost and which files and offsets they were in.
Afterwards \`aria serve\` starts, and the next seq is past every seq ever written. Stop the server
first: a directory a live server holds is refused. Running it again changes nothing.

Options:
  --data-dir DIR   the data directory (default ./aria-data)
  --dry-run        change nothing: print what a repair would do
  --json           print the report as JSON
`;

/** Runs `aria repair`; resolves to the exit code. */
export async function repairCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    "data-dir": { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help === true) {
    io.out(REPAIR_USAGE);
    return EXIT_OK;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const dataDir = stringFlag(values, "data-dir", STORE_DIR_DEFAULT);
  if (dataDir === "") throw new UsageError("--data-dir: must not be empty");
  const dryRun = values["dry-run"] === true;
  const locked = await acquireLock(dataDir, { command: "repair", adminUrl: null }).catch(
    (error: Error) => error,
  );
  if (locked instanceof Error) {
    io.err(`aria repair: cannot lock "${dataDir}": ${locked.message}\n`);
    return EXIT_FAILURE;
  }
  if (!locked.ok) {
    io.err(
      `aria repair: "${dataDir}" is in use by pid ${locked.holder.pid} (aria ${locked.holder.command}); stop it first\n`,
    );
    return EXIT_FAILURE;
  }
  let report: RepairReport;
  let consumers: ConsumersRepair | null;
  try {
    report = await repairStore(runtime.openDisk(dataDir), {
      dryRun,
      crc32: runtime.crc32,
      yieldToEvents: runtime.yieldToEvents,
    });
    // The durable consumers' positions: a file of their own (src/runtime/consumer_file.ts).
    consumers = repairConsumersFile(dataDir, { crc32: runtime.crc32, dryRun });
  } catch (error) {
    io.err(`aria repair: "${dataDir}": ${(error as Error).message}\n`);
    return EXIT_FAILURE;
  } finally {
    await locked.lock.release();
  }
  if (values.json === true)
    io.out(`${JSON.stringify({ ...reportJson(dataDir, report), consumers })}\n`);
  else io.out(reportText(dataDir, report, consumers));
  return EXIT_OK;
}

function reportJson(dataDir: string, report: RepairReport): object {
  return {
    dataDir,
    dryRun: report.dryRun,
    problems: report.recovery.problems.map(({ file, offset, problem }) => ({
      file,
      offset,
      problem,
    })),
    lostSeqs: report.lostSeqs,
    moved: report.moved,
    nextSeq: report.nextSeq,
  };
}

function reportText(
  dataDir: string,
  report: RepairReport,
  consumers: ConsumersRepair | null,
): string {
  const would = report.dryRun ? "would " : "";
  const lines: string[] = [];
  const { problems } = report.recovery;
  if (problems.length === 0 && consumers === null)
    lines.push(`"${dataDir}": no damage found; nothing to repair.`);
  for (const p of problems) lines.push(`damage: "${p.file}" at offset ${p.offset}: ${p.problem}`);
  for (const d of consumers?.damaged ?? []) {
    lines.push(`damage: "${consumers?.file}" at offset ${d.offset}: ${d.reason}`);
    lines.push(
      `${would}move: "${consumers?.file}" bytes ${d.offset}..${d.offset + d.bytes} → "${d.to}"`,
    );
  }
  if (consumers !== null) {
    lines.push(
      `durable consumers: ${consumers.kept} kept; one whose newest record was damaged resumes at its record before, or starts anew`,
    );
    if (consumers.lost.length > 0)
      lines.push(`durable consumers lost (start anew): ${consumers.lost.join(", ")}`);
    if (consumers.older.length > 0)
      lines.push(`durable consumers at an older position: ${consumers.older.join(", ")}`);
    if (consumers.lostStates.length > 0)
      lines.push(
        `MQTT session states lost (their sessions resume from their consumers only): ${consumers.lostStates.join(", ")}`,
      );
    if (consumers.olderStates.length > 0)
      lines.push(`MQTT session states at an older record: ${consumers.olderStates.join(", ")}`);
    if (consumers.unreadable > 0)
      lines.push(
        `durable consumers: ${consumers.unreadable} damaged record(s) whose name is unreadable dropped`,
      );
  }
  for (const m of report.moved)
    lines.push(`${would}move: "${m.file}" bytes ${m.offset}..${m.offset + m.bytes} → "${m.to}"`);
  for (const r of report.lostSeqs)
    lines.push(`lost: seqs ${r.first}..${r.last} (${r.last - r.first + 1}), in "${r.file}"`);
  if (problems.length > 0 && report.lostSeqs.length === 0) lines.push("lost: no seq");
  lines.push(`next seq: ${report.nextSeq}`);
  if (report.dryRun) lines.push("dry run: nothing was changed.");
  else if (problems.length > 0 || consumers !== null)
    lines.push(`repaired: \`aria serve --data-dir ${dataDir}\` starts.`);
  return `${lines.join("\n")}\n`;
}
