/**
 * Store benchmark: persisted appends/s and MB/s under fsync always / interval / never with 10 and
 * 10,000 partitions, then disk reads of a 1% filter and of the whole stream, beside the raw
 * sequential write and read speed of the same disk measured in the same run with dd (O_DIRECT).
 * Prints a table. `bun bench/store.bench.ts [--mib N] [--seconds S] [--dir D] [--repeat R]
 * [--files remove|keep] [--cases all|write|read]`: with R, every write case runs R times (the
 * cases alternating) and the table shows the median run; --files: see FilesPolicy; --cases: the
 * write cases, the read cases or both (the dd rows always run).
 * `runStoreBench({ smoke: true })` runs every body once with tiny sizes (see store.bench.test.ts).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { BunDisk, missingRuns } from "../src/runtime/bun_disk.ts";
import { yieldToEvents } from "../src/runtime/clock.ts";
import { nativeCrc32 } from "../src/runtime/crc32.ts";
import { type FsyncPolicy, Store } from "../src/store/mod.ts";
import { WatchedDisk } from "../src/testing/watched_disk.ts";
import { Filter } from "../src/topic/mod.ts";

const MESSAGE_BYTES = 1024;
const PUBLISHERS = 64;

const topicLists = new Map<number, string[]>();

/**
 * The topic of message `seq` over `partitions` partitions (`g<p%100>/p<p>/events`, spread by a
 * multiplicative hash). The strings are made once per partition count, as a server interns its
 * topics: building one per message cost the loop ~0.3 µs, a quarter of an append at 10,000.
 */
function topicOf(seq: number, partitions: number): string {
  let topics = topicLists.get(partitions);
  if (topics === undefined) {
    topics = Array.from({ length: partitions }, (_, p) => `g${p % 100}/p${p}/events`);
    topicLists.set(partitions, topics);
  }
  return topics[((seq * 2654435761) % partitions) >>> 0];
}

async function dd(args: string[]): Promise<number> {
  const child = Bun.spawn(["dd", ...args], { stderr: "pipe", stdout: "ignore" });
  const text = await new Response(child.stderr).text();
  await child.exited;
  const match = /copied, ([\d.]+) s/.exec(text);
  if (match === null) throw new Error(`dd failed: ${text}`);
  const bytes = Number(/^(\d+) bytes/m.exec(text)?.[1]);
  return bytes / Number(match[1]) / 1e6;
}

/**
 * What a write case leaves behind. `remove` (default): its files go when it ends, so the next case
 * writes into page-cache memory the kernel already used and freed. `keep`: they stay until the
 * end, so every case's page cache is memory the machine has not touched before. On this VM that
 * is the larger effect by far: guest memory touched for the first time is backed by the host on
 * demand, and buffered writes into it ran at 318 MB/s against 1.5 GB/s into reused memory (dd
 * conv=fdatasync, 1 GiB; O_DIRECT dd is 1.3-1.5 GB/s either way). The table shows a buffered dd
 * next to the O_DIRECT one.
 */
type FilesPolicy = "remove" | "keep";

/** Writes every dirty page of the machine out (`sync`). */
async function syncFileSystems(): Promise<void> {
  await Bun.spawn(["sync"]).exited;
}

/** The run with the median message rate; its note gains the range of all runs. */
function medianRow(runs: Row[]): Row {
  const sorted = [...runs].sort((a, b) => a.msgPerS - b.msgPerS);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  if (runs.length === 1) return median;
  const range = `${sorted[0].mbPerS.toFixed(0)}–${sorted[sorted.length - 1].mbPerS.toFixed(0)} MB/s`;
  return { ...median, note: `median of ${runs.length} (${range}); ${median.note}` };
}

async function dropCaches(): Promise<boolean> {
  const child = Bun.spawn(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"], {
    stderr: "ignore",
  });
  return (await child.exited) === 0;
}

/** The share of the bytes of the files under `dir` that are in the page cache (mincore over a mapping of each). */
function residentShare(dir: string): number {
  let total = 0;
  let missing = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const size = statSync(path).size;
    if (size === 0) continue;
    const mapping = Bun.mmap(path, { shared: false });
    const runs = missingRuns(mapping);
    total += size;
    for (let i = 0; i < runs.length; i += 2) missing += runs[i + 1] - runs[i];
  }
  return total === 0 ? 0 : (total - missing) / total;
}

type Row = {
  case: string;
  messages: number;
  seconds: number;
  msgPerS: number;
  mbPerS: number;
  note: string;
};

/**
 * One write case. `always`: 64 publishers, each appending `inFlight` messages and awaiting
 * `commit()` before the next (1: a publisher that waits for every acknowledgement; more: one that
 * pipelines, as the client library's batching does). Other policies: one producer appending runs
 * of 4096, yielding to the event loop between runs as a server's socket reads do, waiting when
 * 32 MiB are buffered.
 */
async function writeCase(
  dir: string,
  policy: FsyncPolicy,
  partitions: number,
  options: { bytes: number; seconds: number; inFlight?: number; files: FilesPolicy },
): Promise<Row> {
  const path = mkdtempSync(join(dir, `w-${policy}-`));
  const { store } = await Store.open(new BunDisk(path), {
    fsync: policy,
    crc32: nativeCrc32,
    schedule: (ms, run) => setTimeout(run, ms),
  });
  const payload = new Uint8Array(MESSAGE_BYTES);
  for (let i = 0; i < payload.length; i++) payload[i] = i & 0xff;
  const deadline = performance.now() + options.seconds * 1000;
  const limit = Math.floor(options.bytes / MESSAGE_BYTES);
  const start = performance.now();
  let count = 0;
  const inFlight = options.inFlight ?? 1;
  if (policy === "always") {
    const publisher = async () => {
      while (count < limit && performance.now() < deadline) {
        for (let i = 0; i < inFlight; i++, count++) {
          const seq = store.nextSeq;
          store.append(seq, seq, topicOf(seq, partitions), payload);
        }
        await store.commit();
      }
    };
    await Promise.all(Array.from({ length: PUBLISHERS }, publisher));
  } else {
    while (count < limit && performance.now() < deadline) {
      for (let i = 0; i < 4096 && count < limit; i++, count++) {
        const seq = store.nextSeq;
        store.append(seq, seq, topicOf(seq, partitions), payload);
      }
      // Back-pressure as a broker would apply it: wait when too much is buffered.
      if (store.bufferedBytes > 32 * 1024 * 1024) await store.commit();
      else await new Promise((resolve) => setImmediate(resolve));
    }
    await store.commit();
  }
  const seconds = (performance.now() - start) / 1000;
  const sortStart = performance.now();
  await store.idle();
  const stats = store.stats();
  await store.close({ sort: false });
  if (options.files === "remove") rmSync(path, { recursive: true, force: true });
  return {
    case: `write ${policy}${policy === "always" ? `, ${PUBLISHERS} publishers × ${inFlight} in flight` : ""}, ${partitions} partitions`,
    messages: count,
    seconds,
    msgPerS: count / seconds,
    mbPerS: (count * MESSAGE_BYTES) / seconds / 1e6,
    note: `segments ${stats.segmentsWritten}, sort tail ${((performance.now() - sortStart) / 1000).toFixed(2)} s`,
  };
}

/**
 * The read cases over a store of `partitions` written for them. `rawFile` (a file of at least 512
 * MiB, or null): each cold case is bracketed by an O_DIRECT dd read of it, just before and just
 * after, and its note gives its rate as a share of their mean. This VM's disk swings between
 * ~0.9 and ~2.5 GB/s within a minute (dd iflag=direct of the same file), so a ratio to a dd
 * read at the start of the run said more about the moment than about the reader.
 */
async function readCases(
  dir: string,
  partitions: number,
  bytes: number,
  rawFile: string | null,
): Promise<{ rows: Row[]; storedBytes: number }> {
  const path = mkdtempSync(join(dir, "r-"));
  const payload = new Uint8Array(MESSAGE_BYTES).fill(7);
  const opened = await Store.open(new BunDisk(path), { fsync: "never", crc32: nativeCrc32 });
  const limit = Math.floor(bytes / MESSAGE_BYTES);
  for (let seq = 1; seq <= limit; seq++) {
    opened.store.append(seq, seq, topicOf(seq, partitions), payload);
    if (opened.store.bufferedBytes > 32 * 1024 * 1024) await opened.store.commit();
  }
  await opened.store.commit();
  await opened.store.close(); // a clean close sorts everything into segments
  const rows: Row[] = [];
  let storedBytes = 0;
  for (const [name, filter, cold] of [
    [
      `read filter g0/** (${partitions >= 100 ? "1%" : `${Math.round(100 / partitions)}%`} of partitions)`,
      Filter.of("g0/**"),
      true,
    ],
    ["read whole stream (**)", Filter.of("**"), true],
    ["read whole stream (**) again", Filter.of("**"), false],
    // The process's first whole-stream read also pays for compiling the reader's code (its
    // optimizing compiles run on the same two cores as the reads); this one runs optimized code.
    ["read whole stream (**) cold again, compiled", Filter.of("**"), true],
  ] as const) {
    // Pages a process maps stay in the page cache through a drop: the previous case's mapped
    // packs (span reads map them) are unmapped first, when the collector frees their views
    // (the case ran in a function of its own, so no frame here still holds its reader).
    Bun.gc(true);
    const rawBefore = cold && rawFile !== null ? await rawRead(rawFile) : 0;
    const dropped = cold && (await dropCaches());
    const resident = residentShare(path);
    const { row, stored } = await readCase(path, filter);
    const rawAfter = cold && rawFile !== null ? await rawRead(rawFile) : 0;
    const raw =
      rawBefore > 0
        ? `; dd iflag=direct ${rawBefore.toFixed(0)} MB/s before, ${rawAfter.toFixed(0)} after: ${((200 * row.mbPerS) / (rawBefore + rawAfter)).toFixed(0)}% of their mean`
        : "";
    storedBytes = stored;
    rows.push({
      ...row,
      case: `${name}, ${partitions} partitions`,
      note: `${row.note}${dropped ? ", cold cache" : ", warm cache"} (${(100 * resident).toFixed(1)}% resident at the start)${raw}`,
    });
  }
  return { rows, storedBytes };
}

/** MB/s of an O_DIRECT read of the first 512 MiB of `file` (the raw read rate of the moment). */
function rawRead(file: string): Promise<number> {
  return dd([`if=${file}`, "of=/dev/null", "bs=1M", "count=512", "iflag=direct"]);
}

/** The bytes covered by the [start, end) pairs of each path's list (overlaps counted once). */
export function distinctBytes(ranges: Map<string, number[]>): number {
  let total = 0;
  for (const list of ranges.values()) {
    const order = Array.from({ length: list.length / 2 }, (_, i) => i).sort(
      (a, b) => list[2 * a] - list[2 * b],
    );
    let end = -1;
    for (const i of order) {
      const start = list[2 * i];
      const stop = list[2 * i + 1];
      if (stop <= end) continue;
      total += stop - Math.max(start, end);
      end = stop;
    }
  }
  return total;
}

/** One timed read of `filter` from seq 1 over the store at `path`, opened for it and closed after. */
async function readCase(path: string, filter: Filter): Promise<{ row: Row; stored: number }> {
  // The bytes the store takes from the disk (reads and mappings), to report read amplification,
  // and how many of them are distinct: a lane that maps the first chunk of an image and then the
  // whole image asks twice for that chunk's bytes, which the page cache serves the second time.
  let bytesRead = 0;
  const ranges = new Map<string, number[]>();
  const tally = (path: string, position: number, bytes: number) => {
    bytesRead += bytes;
    let list = ranges.get(path);
    if (list === undefined) ranges.set(path, (list = []));
    list.push(position, position + bytes);
  };
  const disk = new WatchedDisk(new BunDisk(path), { read: tally, map: tally });
  // The runtime's pauses, as the server opens its store: while reads ahead are in flight the reader lets I/O callbacks run between batches.
  const { store } = await Store.open(disk, { crc32: nativeCrc32, yieldToEvents });
  const stored = store.stats().segmentBytes + store.stats().journalBytes;
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  let count = 0;
  let useful = 0;
  // Borrowed payloads, as the broker reads: each batch is consumed before the next is read.
  const reader = store.read(filter, { seq: 1 }, { borrow: true });
  for (;;) {
    const batch = await reader.nextBatch();
    if (batch.length === 0) break;
    count += batch.length;
    for (const message of batch) useful += message.length ?? message.payload.length; // no view per borrowed message
  }
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  await store.close({ sort: false });
  const row = {
    case: "",
    messages: count,
    seconds,
    msgPerS: count / seconds,
    mbPerS: useful / seconds / 1e6,
    note: `read ${((100 * bytesRead) / stored).toFixed(2)}% of ${(stored / 1e6).toFixed(0)} MB stored (${((100 * distinctBytes(ranges)) / stored).toFixed(2)}% distinct), CPU user ${(cpu.user / 1e3).toFixed(0)} ms, system ${(cpu.system / 1e3).toFixed(0)} ms`,
  };
  return { row, stored };
}

/** Runs the benchmark; `smoke` uses tiny sizes and skips dd. Returns the rows printed. */
export async function runStoreBench(
  options: {
    smoke?: boolean;
    mib?: number;
    seconds?: number;
    dir?: string;
    repeat?: number;
    files?: FilesPolicy;
    cases?: "all" | "write" | "read";
  } = {},
): Promise<Row[]> {
  const smoke = options.smoke ?? false;
  const files = options.files ?? "remove";
  const repeat = smoke ? 1 : (options.repeat ?? 1);
  const bytes = (smoke ? 1 : (options.mib ?? 512)) * 1024 * 1024;
  const seconds = smoke ? 0.2 : (options.seconds ?? 5);
  const base = mkdtempSync(join(options.dir ?? tmpdir(), "aria-bench-"));
  const rows: Row[] = [];
  try {
    if (!smoke) {
      const file = join(base, "dd.bin");
      const write = await dd(["if=/dev/zero", `of=${file}`, "bs=1M", "count=1024", "oflag=direct"]);
      const read = await dd([`if=${file}`, "of=/dev/null", "bs=1M", "iflag=direct"]);
      rows.push({
        case: "raw sequential write (dd oflag=direct)",
        messages: 0,
        seconds: 0,
        msgPerS: 0,
        mbPerS: write,
        note: "1 GiB, bs=1M",
      });
      rows.push({
        case: "raw sequential read (dd iflag=direct)",
        messages: 0,
        seconds: 0,
        msgPerS: 0,
        mbPerS: read,
        note: "1 GiB, bs=1M",
      });
      // Through the page cache, as the store writes: in the state the cases meet (see FilesPolicy).
      const buffered = join(base, "dd-buffered.bin");
      if (files === "keep")
        await dd([
          "if=/dev/zero",
          `of=${join(base, "dd-kept.bin")}`,
          "bs=1M",
          "count=1024",
          "conv=fdatasync",
        ]);
      const bufferedWrite = await dd([
        "if=/dev/zero",
        `of=${buffered}`,
        "bs=1M",
        "count=1024",
        "conv=fdatasync",
      ]);
      if (files === "remove") rmSync(buffered);
      rows.push({
        case: "raw buffered write (dd conv=fdatasync)",
        messages: 0,
        seconds: 0,
        msgPerS: 0,
        mbPerS: bufferedWrite,
        note: `1 GiB, bs=1M, files ${files === "keep" ? "kept (fresh memory)" : "removed (reused memory)"}`,
      });
    }
    const which = options.cases ?? "all";
    for (const partitions of which === "read" ? [] : [10, 10_000]) {
      const count = smoke ? Math.min(partitions, 50) : partitions;
      const cases: [FsyncPolicy, number | undefined][] = [
        ["always", undefined],
        ["always", 16],
        ["interval", undefined],
        ["never", undefined],
      ];
      const runs: Row[][] = cases.map(() => []);
      // Rounds alternate the cases, so a slow stretch of the shared disk hits all of them alike.
      for (let round = 0; round < repeat; round++) {
        for (const [i, [policy, inFlight]] of cases.entries()) {
          // Each case starts with no dirty pages of an earlier one still being written back.
          if (!smoke) await syncFileSystems();
          runs[i].push(await writeCase(base, policy, count, { bytes, seconds, inFlight, files }));
        }
      }
      rows.push(...runs.map(medianRow));
    }
    if (which !== "write") {
      const rawFile = smoke ? null : join(base, "dd.bin");
      rows.push(...(await readCases(base, smoke ? 5 : 10, bytes, rawFile)).rows);
      rows.push(...(await readCases(base, smoke ? 50 : 10_000, bytes, rawFile)).rows);
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  return rows;
}

function printTable(rows: Row[]): void {
  console.log("| case | messages | s | msg/s | MB/s | note |");
  console.log("| --- | ---: | ---: | ---: | ---: | --- |");
  for (const r of rows) {
    console.log(
      `| ${r.case} | ${r.messages || ""} | ${r.seconds ? r.seconds.toFixed(2) : ""} | ${r.msgPerS ? Math.round(r.msgPerS).toLocaleString("en") : ""} | ${r.mbPerS.toFixed(0)} | ${r.note} |`,
    );
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      mib: { type: "string" },
      seconds: { type: "string" },
      dir: { type: "string" },
      repeat: { type: "string" },
      files: { type: "string" },
      cases: { type: "string" },
    },
  });
  if (values.files !== undefined && values.files !== "keep" && values.files !== "remove")
    throw new Error("--files is keep or remove");
  if (values.cases !== undefined && !["all", "write", "read"].includes(values.cases))
    throw new Error("--cases is all, write or read");
  printTable(
    await runStoreBench({
      mib: values.mib ? Number(values.mib) : undefined,
      seconds: values.seconds ? Number(values.seconds) : undefined,
      dir: values.dir,
      repeat: values.repeat ? Number(values.repeat) : undefined,
      files: values.files as FilesPolicy | undefined,
      cases: values.cases as "all" | "write" | "read" | undefined,
    }),
  );
}
