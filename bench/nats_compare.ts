/**
 * nats_compare: Aria against NATS JetStream on the same machine in one run (issue 32).
 *
 *   npx bun bench/nats_compare.ts [--messages N] [--rounds N] [--json] [--aria-bin PATH]
 *                                 [--phases rows,herd] [--readers N] [--skew S]
 *
 * Installs Debian's nats-server when it is missing (apt-get; never in tests), starts it with
 * JetStream and the built `aria serve` (dist/aria, `bun scripts/build.ts`; or --aria-bin) on
 * temporary directories, publishes the same stream to both (N x 64 B over 10,000 topics
 * `bench/pK/tJ` / `bench.pK.tJ`, a Zipf-like spread over 100 partitions), then, each round, replays
 * on fresh connections from the oldest message, Aria then NATS (NATS first in even rounds):
 *
 *   tip            Aria with a tip holding the whole stream; NATS with its files in the page cache
 *                  (both restarted before each round after the first).
 *   disk, warm     both restarted (Aria with a 1 MiB tip), files in the page cache.
 *   disk, dropped  both restarted before each replay and their files evicted from the page cache.
 *
 * After each restart both sides first replay the smallest partition a few times, unmeasured, so
 * the rows measure servers with warm code (a fresh Aria's first replays are JIT-cold).
 *
 * The herd (phase `herd`, after the rows in each round): per side, both servers restarted with a
 * small tip and their files evicted, one client reads the whole stream; again, then --readers
 * clients connect at once, client k replaying partition k from the oldest message
 * (compare_herd.ts); aggregate msg/s, slowest and median client. `--skew 0` spreads the stream
 * evenly (every partition 1%, as the herd has it); the default 1 is the rows' skew.
 *
 * Rows: the 1% partition subtree, the whole stream, time to first message of the subtree
 * (subscribe → first message on a connected client), and the raw read speed of Aria's and
 * NATS's data files (`dd iflag=direct`, same round). Each figure is the median of the rounds;
 * each ratio the median of the rounds' ratios. A replay that does not deliver exactly the
 * expected messages in order fails the run. Servers are ended by PID at the end, also on failure.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { median } from "../src/bench/stats.ts";
import {
  type Column,
  formatMs,
  formatRatio,
  formatSi,
  markdownTable,
  type Row,
} from "../src/bench/table.ts";
import { ariaPublish, ariaReplay } from "./compare_aria.ts";
import { type HerdFigures, runHerd } from "./compare_herd.ts";
import { NATS_PULL_BATCH, natsPublish, natsReplay, type ReplayTiming } from "./compare_nats.ts";
import {
  dropPageCache,
  ensureNatsServer,
  filesUnder,
  natsServerVersion,
  rawRead,
  type ServerProcess,
  startAria,
  startNats,
  stopAllStarted,
  warmPageCache,
} from "./compare_processes.ts";
import { type CompareStream, compareStream } from "./compare_stream.ts";

/** The tip of the disk rows: small, so a replay after a restart reads the files. */
const SMALL_TIP_BYTES = 1024 * 1024;
/** Unmeasured replays of the smallest partition on each freshly started pair of servers. */
const WARM_UP_REPLAYS = 3;
/** Ring bytes per message that surely hold the whole stream in the tip rows. */
const LARGE_TIP_BYTES_PER_MESSAGE = 256;

/** The parts of a round: the replay rows, and the herd. */
const PHASES = ["rows", "herd"] as const;
type Phase = (typeof PHASES)[number];

interface Args {
  messages: number;
  rounds: number;
  json: boolean;
  ariaBin: string;
  phases: Phase[];
  /** Clients of the herd. */
  readers: number;
  /** Zipf exponent of the stream's partitions (0: every partition 1% of it). */
  skew: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    messages: 1_000_000,
    rounds: 3,
    json: false,
    ariaBin: join(import.meta.dir, "..", "dist", "aria"),
    phases: [...PHASES],
    readers: 100,
    skew: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${flag} needs a value`);
      return next;
    };
    const count = (text: string) => {
      const n = Number(text.replaceAll("_", ""));
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${flag}: ${text} is not a count`);
      return n;
    };
    if (flag === "--messages") args.messages = count(value());
    else if (flag === "--rounds") args.rounds = count(value());
    else if (flag === "--json") args.json = true;
    else if (flag === "--aria-bin") args.ariaBin = value();
    else if (flag === "--readers") args.readers = count(value());
    else if (flag === "--phases") args.phases = phasesOf(value());
    else if (flag === "--skew") {
      args.skew = Number(value());
      if (!(args.skew >= 0)) throw new Error(`--skew: must be a number >= 0`);
    } else
      throw new Error(
        `unknown flag ${flag}: --messages N --rounds N --json --aria-bin PATH --phases ${PHASES.join(",")} --readers N --skew S`,
      );
  }
  return args;
}

function phasesOf(text: string): Phase[] {
  const phases = text.split(",").map((phase) => phase.trim());
  for (const phase of phases)
    if (!(PHASES as readonly string[]).includes(phase))
      throw new Error(`--phases: "${phase}" is not one of ${PHASES.join(", ")}`);
  return phases as Phase[];
}

/** The two sides' servers and how to restart them. */
interface Sides {
  aria: ServerProcess;
  nats: ServerProcess;
  ariaDir: string;
  natsDir: string;
  ariaBin: string;
  natsBin: string;
}

/** One round's measurements, by row key: [Aria, NATS]. */
type Round = Map<string, { aria: ReplayTiming; nats: ReplayTiming }>;

const progress = (text: string) => process.stderr.write(`\r\x1b[K${text}`);

async function restart(sides: Sides, ariaTipBytes: number): Promise<void> {
  await sides.aria.stop();
  await sides.nats.stop();
  sides.nats = await startNats(sides.natsBin, sides.natsDir);
  sides.aria = await startAria(sides.ariaBin, sides.ariaDir, ariaTipBytes);
}

/** Broker recoveries so far (disk, tip) from Aria's admin app. */
async function ariaRecoveries(aria: ServerProcess): Promise<{ disk: number; tip: number }> {
  const stats = (await (await fetch(`${aria.adminUrl}/api/stats`)).json()) as {
    broker: { recoveries: { disk: number; tip: number } };
  };
  return stats.broker.recoveries;
}

/**
 * Replays `partition` on both sides, in `ariaFirst` order; checks Aria served it from where the
 * row says (`tip` or `disk`, by its broker's recovery counters).
 */
async function both(
  sides: Sides,
  stream: CompareStream,
  partition: number,
  ariaFirstSeq: number,
  source: "tip" | "disk",
  ariaFirst: boolean,
): Promise<{ aria: ReplayTiming; nats: ReplayTiming }> {
  const runAria = async () => {
    const before = await ariaRecoveries(sides.aria);
    const timing = await ariaReplay(sides.aria.url, stream, partition, ariaFirstSeq);
    const after = await ariaRecoveries(sides.aria);
    if (after[source] - before[source] !== 1)
      throw new Error(
        `Aria served a ${source} row with ${after.disk - before.disk} disk and ${after.tip - before.tip} tip recoveries`,
      );
    return timing;
  };
  if (ariaFirst) {
    const aria = await runAria();
    return { aria, nats: await natsReplay(sides.nats.url, stream, partition) };
  }
  const nats = await natsReplay(sides.nats.url, stream, partition);
  return { aria: await runAria(), nats };
}

/**
 * Restarts both servers (Aria with a tip of `tipBytes`), then replays the smallest partition on
 * each a few times, unmeasured: the rows measure servers with warm code. A fresh Aria's first tip
 * replays are JIT-cold: 1M messages, 1% subtree, first message after 57, 56, 19, 8, 2.8 ms in
 * five replays in a row on one server.
 */
async function freshPair(
  sides: Sides,
  stream: CompareStream,
  ariaFirstSeq: number,
  options: { tipBytes: number; source: "tip" | "disk"; ariaFirst: boolean },
): Promise<void> {
  await restart(sides, options.tipBytes);
  for (let i = 0; i < WARM_UP_REPLAYS; i++)
    await both(
      sides,
      stream,
      stream.spec.partitions - 1,
      ariaFirstSeq,
      options.source,
      options.ariaFirst,
    );
}

interface RawRound {
  ariaBytes: number;
  ariaMs: number;
  natsBytes: number;
  natsMs: number;
}

async function round(
  sides: Sides,
  stream: CompareStream,
  ariaFirstSeq: number,
  index: number,
  largeTipBytes: number,
): Promise<{ measured: Round; raw: RawRound }> {
  const ariaFirst = index % 2 === 0;
  const subtree = stream.onePercent;
  const measured: Round = new Map();
  const label = `round ${index + 1}`;
  const fresh = (tipBytes: number, source: "tip" | "disk") =>
    freshPair(sides, stream, ariaFirstSeq, { tipBytes, source, ariaFirst });
  if (index > 0) await fresh(largeTipBytes, "tip");
  progress(`${label}: tip`);
  await warmPageCache(sides.natsDir);
  measured.set("subtree tip", await both(sides, stream, subtree, ariaFirstSeq, "tip", ariaFirst));
  measured.set("whole tip", await both(sides, stream, -1, ariaFirstSeq, "tip", ariaFirst));

  progress(`${label}: disk, page cache warm`);
  await fresh(SMALL_TIP_BYTES, "disk");
  await warmPageCache(sides.ariaDir);
  await warmPageCache(sides.natsDir);
  measured.set("subtree warm", await both(sides, stream, subtree, ariaFirstSeq, "disk", ariaFirst));
  measured.set("whole warm", await both(sides, stream, -1, ariaFirstSeq, "disk", ariaFirst));

  for (const [key, partition] of [
    ["subtree dropped", subtree],
    ["whole dropped", -1],
  ] as const) {
    progress(`${label}: disk, page cache dropped: ${key}`);
    await fresh(SMALL_TIP_BYTES, "disk");
    await dropPageCache(sides.ariaDir);
    await dropPageCache(sides.natsDir);
    measured.set(key, await both(sides, stream, partition, ariaFirstSeq, "disk", ariaFirst));
  }

  progress(`${label}: raw reads (dd iflag=direct)`);
  const ariaRaw = await rawRead(sides.ariaDir);
  const natsRaw = await rawRead(sides.natsDir);
  return {
    measured,
    raw: {
      ariaBytes: ariaRaw.bytes,
      ariaMs: ariaRaw.wallMs,
      natsBytes: natsRaw.bytes,
      natsMs: natsRaw.wallMs,
    },
  };
}

/** Where a row's replay reads, by the suffix of its key. */
const WHERE: Record<string, string> = {
  tip: "tip",
  warm: "disk, page cache warm",
  dropped: "disk, page cache dropped",
};

const ROWS: { key: string; label: string }[] = ["subtree", "whole"].flatMap((what) =>
  ["tip", "warm", "dropped"].map((where) => ({
    key: `${what} ${where}`,
    label: `${what === "subtree" ? "1% subtree" : "whole stream"}, ${WHERE[where]}`,
  })),
);

function summarize(rounds: Round[]): Row[] {
  const rows: Row[] = [];
  for (const { key, label } of ROWS) {
    const pairs = rounds.map((measured) => measured.get(key)!);
    const aria = median(pairs.map((pair) => pair.aria.wallMs));
    const nats = median(pairs.map((pair) => pair.nats.wallMs));
    rows.push({
      row: label,
      messages: pairs[0].aria.delivered,
      ariaMs: aria,
      natsMs: nats,
      ariaPerSecond: (pairs[0].aria.delivered / aria) * 1000,
      natsPerSecond: (pairs[0].nats.delivered / nats) * 1000,
      ratio: median(pairs.map((pair) => pair.nats.wallMs / pair.aria.wallMs)),
    });
  }
  for (const where of ["tip", "warm", "dropped"]) {
    const pairs = rounds.map((measured) => measured.get(`subtree ${where}`)!);
    rows.push({
      row: `first message, 1% subtree, ${WHERE[where]}`,
      messages: null,
      ariaMs: median(pairs.map((pair) => pair.aria.firstMessageMs)),
      natsMs: median(pairs.map((pair) => pair.nats.firstMessageMs)),
      ariaPerSecond: null,
      natsPerSecond: null,
      ratio: median(pairs.map((pair) => pair.nats.firstMessageMs / pair.aria.firstMessageMs)),
    });
  }
  return rows;
}

const COLUMNS: Column[] = [
  { key: "row", header: "replay from the oldest message (fresh connection)" },
  { key: "messages", header: "messages" },
  { key: "ariaMs", header: "Aria ms", format: formatMs },
  { key: "natsMs", header: "NATS ms", format: formatMs },
  { key: "ariaPerSecond", header: "Aria msg/s", format: formatSi },
  { key: "natsPerSecond", header: "NATS msg/s", format: formatSi },
  { key: "ratio", header: "Aria vs NATS (NATS time / Aria time)", format: formatRatio },
];

/** A target of the issue, checked against the measured figure. */
type Target = { target: string; measured: string; met: boolean };

/** The replay rows' table, targets, the raw-read note and their JSON. */
function rowsReport(
  rounds: Round[],
  raws: RawRound[],
  files: { ariaFiles: { bytes: number }[]; natsFiles: { bytes: number }[] },
): { rows: Row[]; targets: Target[]; notes: string[]; json: Record<string, unknown> } {
  const rows = summarize(rounds);
  const rawAriaMBps = median(raws.map((raw) => raw.ariaBytes / raw.ariaMs / 1000));
  const rawNatsMBps = median(raws.map((raw) => raw.natsBytes / raw.natsMs / 1000));
  const wholeDropped = rounds.map((measured) => measured.get("whole dropped")!);
  // Aria's whole-stream replay against dd reading the same files: dd's time / Aria's time.
  const ariaShareOfRaw = median(raws.map((raw, i) => raw.ariaMs / wholeDropped[i].aria.wallMs));
  const natsShareOfRaw = median(raws.map((raw, i) => raw.natsMs / wholeDropped[i].nats.wallMs));
  const first = (key: string) => rows.find((row) => row.row === key)!;
  const ratioOf = (key: string) =>
    first(ROWS.find((row) => row.key === key)!.label).ratio as number;
  const firstTip = first(`first message, 1% subtree, ${WHERE.tip}`);
  const firstDropped = first(`first message, 1% subtree, ${WHERE.dropped}`);
  const targets = [
    {
      target: "whole stream from disk (page cache dropped) >= 4x NATS",
      measured: formatRatio(ratioOf("whole dropped")),
      met: ratioOf("whole dropped") >= 4,
    },
    {
      target: "whole stream from disk >= 70% of the raw read speed of its files",
      measured: `${(ariaShareOfRaw * 100).toFixed(0)}%`,
      met: ariaShareOfRaw >= 0.7,
    },
    {
      target: "first message <= 1 ms from the tip (1% subtree)",
      measured: `${formatMs(firstTip.ariaMs as number)} ms`,
      met: (firstTip.ariaMs as number) <= 1,
    },
    {
      target: "first message <= 5 ms from disk (1% subtree, page cache dropped)",
      measured: `${formatMs(firstDropped.ariaMs as number)} ms`,
      met: (firstDropped.ariaMs as number) <= 5,
    },
  ];
  const sum = (list: { bytes: number }[]) => list.reduce((total, file) => total + file.bytes, 0);
  const notes = [
    `Raw reads (dd iflag=direct bs=1M, dd's own times, same rounds): Aria's files ${(sum(files.ariaFiles) / 1e6).toFixed(1)} MB at ${rawAriaMBps.toFixed(0)} MB/s, NATS's ${(sum(files.natsFiles) / 1e6).toFixed(1)} MB at ${rawNatsMBps.toFixed(0)} MB/s. Whole stream from disk (page cache dropped) as a share of dd's read of the same files: Aria ${(ariaShareOfRaw * 100).toFixed(0)}%, NATS ${(natsShareOfRaw * 100).toFixed(0)}%.`,
  ];
  return {
    rows,
    targets,
    notes,
    json: {
      rows,
      raw: raws,
      rawAriaMBps,
      rawNatsMBps,
      ariaShareOfRaw,
      natsShareOfRaw,
      perRound: rounds.map((measured) => Object.fromEntries(measured)),
    },
  };
}

/** One side's herd round: one client reading the whole stream, then the herd. */
interface HerdSide {
  whole: ReplayTiming;
  herd: HerdFigures;
}

/** One round of the herd phase, both sides. */
interface HerdRound {
  aria: HerdSide;
  nats: HerdSide;
}

/**
 * One round of the herd, each side in turn (Aria first in even rounds): both servers restarted
 * (Aria with a 1 MiB tip), warmed, their files evicted from the page cache; then one client reads
 * the whole stream; restarted and evicted again; then `readers` clients connect at once, client k
 * replaying partition k mod 100 from the oldest message, every replay checked.
 */
async function herdRound(
  sides: Sides,
  stream: CompareStream,
  ariaFirstSeq: number,
  index: number,
  readers: number,
): Promise<HerdRound> {
  const ariaFirst = index % 2 === 0;
  const label = `round ${index + 1}, herd`;
  const partitions = stream.spec.partitions;
  const cold = async () => {
    await freshPair(sides, stream, ariaFirstSeq, {
      tipBytes: SMALL_TIP_BYTES,
      source: "disk",
      ariaFirst,
    });
    await dropPageCache(sides.ariaDir);
    await dropPageCache(sides.natsDir);
  };
  const ariaSide = async (): Promise<HerdSide> => {
    progress(`${label}: Aria, one client reading the whole stream`);
    await cold();
    const whole = await ariaReplay(sides.aria.url, stream, -1, ariaFirstSeq);
    progress(`${label}: Aria, ${readers} clients at once`);
    await cold();
    const before = await ariaRecoveries(sides.aria);
    const herd = await runHerd(readers, partitions, (partition) =>
      ariaReplay(sides.aria.url, stream, partition, ariaFirstSeq),
    );
    const after = await ariaRecoveries(sides.aria);
    if (after.disk - before.disk < readers)
      throw new Error(
        `Aria's herd: ${after.disk - before.disk} disk recoveries for ${readers} clients (not from disk)`,
      );
    return { whole, herd };
  };
  const natsSide = async (): Promise<HerdSide> => {
    progress(`${label}: NATS, one client reading the whole stream`);
    await cold();
    const whole = await natsReplay(sides.nats.url, stream, -1);
    progress(`${label}: NATS, ${readers} clients at once`);
    await cold();
    const herd = await runHerd(readers, partitions, (partition) =>
      natsReplay(sides.nats.url, stream, partition),
    );
    return { whole, herd };
  };
  if (ariaFirst) {
    const aria = await ariaSide();
    return { aria, nats: await natsSide() };
  }
  const nats = await natsSide();
  return { aria: await ariaSide(), nats };
}

const HERD_COLUMNS: Column[] = [
  { key: "row", header: "readers (page cache dropped, servers restarted)" },
  { key: "messages", header: "messages" },
  { key: "wallMs", header: "wall ms (last done)", format: formatMs },
  { key: "perSecond", header: "msg/s (aggregate)", format: formatSi },
  { key: "medianMs", header: "median client ms", format: formatMs },
  { key: "slowestMs", header: "slowest client ms", format: formatMs },
  { key: "spread", header: "slowest / median", format: formatRatio },
  { key: "firstMessageMs", header: "median first message ms", format: formatMs },
  { key: "ofWhole", header: "vs one whole-stream client", format: formatRatio },
];

/** The herd's table (medians of the rounds), its targets, notes and JSON. */
function herdReport(
  herds: HerdRound[],
  readers: number,
  stream: CompareStream,
): { rows: Row[]; targets: Target[]; notes: string[]; json: unknown } {
  const rows: Row[] = [];
  for (const side of ["aria", "nats"] as const) {
    const name = side === "aria" ? "Aria" : "NATS";
    const wholes = herds.map((round) => round[side].whole);
    const figures = herds.map((round) => round[side].herd);
    rows.push({
      row: `${name}: 1 client, the whole stream`,
      messages: wholes[0].delivered,
      wallMs: median(wholes.map((whole) => whole.wallMs)),
      perSecond: median(wholes.map((whole) => (whole.delivered / whole.wallMs) * 1000)),
      medianMs: null,
      slowestMs: null,
      spread: null,
      firstMessageMs: median(wholes.map((whole) => whole.firstMessageMs)),
      ofWhole: 1,
    });
    rows.push({
      row: `${name}: ${readers} clients at once, client k partition k`,
      messages: figures[0].delivered,
      wallMs: median(figures.map((herd) => herd.wallMs)),
      perSecond: median(figures.map((herd) => herd.perSecond)),
      medianMs: median(figures.map((herd) => herd.medianMs)),
      slowestMs: median(figures.map((herd) => herd.slowestMs)),
      spread: median(figures.map((herd) => herd.slowestMs / herd.medianMs)),
      firstMessageMs: median(figures.map((herd) => herd.firstMessageMedianMs)),
      ofWhole: median(
        herds.map(
          (round) =>
            round[side].herd.perSecond /
            ((round[side].whole.delivered / round[side].whole.wallMs) * 1000),
        ),
      ),
    });
  }
  const versusNats = median(
    herds.map((round) => round.aria.herd.perSecond / round.nats.herd.perSecond),
  );
  const ariaHerd = rows[1];
  const uniform = stream.spec.skew === 0;
  return {
    rows,
    targets: [
      {
        target: `herd (${readers} clients) aggregate msg/s >= 20x NATS's ${readers} ordered consumers`,
        measured: formatRatio(versusNats),
        met: versusNats >= 20,
      },
      {
        target: "herd aggregate msg/s >= 50% of one client reading the whole stream",
        measured: formatRatio(ariaHerd.ofWhole as number),
        met: (ariaHerd.ofWhole as number) >= 0.5,
      },
      {
        target: `slowest herd client <= 3x the median one${uniform ? "" : " (stream skewed: partitions differ in size)"}`,
        measured: formatRatio(ariaHerd.spread as number),
        met: (ariaHerd.spread as number) <= 3,
      },
    ],
    notes: [
      `The herd: ${readers} clients connect at once, client k replaying partition k mod ${stream.spec.partitions} (Aria bench/pK/**, NATS an ordered consumer of bench.pK.>) from the oldest message until it has all of it; times from the common start, before the first connection. Both servers restarted (Aria with a 1 MiB tip: each client starts on disk, then the tip) and their files evicted from the page cache before each side's herd and before its whole-stream client. Aggregate Aria / NATS: ${formatRatio(versusNats)} (median of the rounds' ratios).`,
    ],
    json: herds,
  };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (!existsSync(args.ariaBin))
    throw new Error(`${args.ariaBin} is missing: run \`npx bun scripts/build.ts\` or --aria-bin`);
  const natsBin = await ensureNatsServer((line) => process.stderr.write(`${line}\n`));
  const natsVersion = await natsServerVersion(natsBin);
  const natsClientVersion = (
    (await Bun.file(
      join(import.meta.dir, "..", "node_modules", "nats", "package.json"),
    ).json()) as {
      version: string;
    }
  ).version;
  const stream = compareStream({
    messages: args.messages,
    partitions: 100,
    topicsPerPartition: 100,
    payloadBytes: 64,
    skew: args.skew,
    seed: 1,
  });
  const largeTipBytes = Math.max(64 * 1024 * 1024, args.messages * LARGE_TIP_BYTES_PER_MESSAGE);
  const root = await mkdtemp(join(process.env.TMPDIR ?? tmpdir(), "nats-compare-"));
  const startedAt = new Date();
  const loadStart = loadavg();
  try {
    const ariaDir = join(root, "aria");
    const natsDir = join(root, "nats");
    const sides: Sides = {
      nats: await startNats(natsBin, natsDir),
      aria: await startAria(args.ariaBin, ariaDir, largeTipBytes),
      ariaDir,
      natsDir,
      ariaBin: args.ariaBin,
      natsBin,
    };
    const natsPublished = await natsPublish(sides.nats.url, stream, progress);
    const ariaPublished = await ariaPublish(sides.aria.url, stream, progress);
    // Unmeasured: both clients' code paths run once before the rounds (JIT warm on both sides).
    progress("warm-up replays");
    for (let i = 0; i < WARM_UP_REPLAYS; i++)
      await both(sides, stream, stream.spec.partitions - 1, ariaPublished.firstSeq, "tip", true);
    const rounds: Round[] = [];
    const raws: RawRound[] = [];
    const herds: HerdRound[] = [];
    const loads: number[] = [];
    for (let index = 0; index < args.rounds; index++) {
      loads.push(loadavg()[0]);
      if (args.phases.includes("rows")) {
        const result = await round(sides, stream, ariaPublished.firstSeq, index, largeTipBytes);
        rounds.push(result.measured);
        raws.push(result.raw);
      }
      if (args.phases.includes("herd"))
        herds.push(await herdRound(sides, stream, ariaPublished.firstSeq, index, args.readers));
    }
    progress("");
    const sections: { title: string; rows: Row[]; columns: Column[] }[] = [];
    const targets: Target[] = [];
    const notes: string[] = [];
    const json: Record<string, unknown> = {};
    if (rounds.length > 0) {
      const report = rowsReport(rounds, raws, {
        ariaFiles: await filesUnder(ariaDir),
        natsFiles: await filesUnder(natsDir),
      });
      sections.push({ title: "Replays", rows: report.rows, columns: COLUMNS });
      targets.push(...report.targets);
      notes.push(...report.notes);
      Object.assign(json, report.json);
    }
    if (herds.length > 0) {
      const report = herdReport(herds, args.readers, stream);
      sections.push({ title: "The herd", rows: report.rows, columns: HERD_COLUMNS });
      targets.push(...report.targets);
      notes.push(...report.notes);
      json.herd = report.json;
    }
    const shares = Array.from(stream.counts, (count) => count / args.messages);
    notes.unshift(
      `Stream: ${args.messages.toLocaleString("en-US")} messages of 64 B over 10,000 topics (100 partitions x 100 topics, partition k drawn with weight 1/(k+1)^${args.skew}, topics uniform within; partitions hold ${(Math.min(...shares) * 100).toFixed(2)}–${(Math.max(...shares) * 100).toFixed(2)}% of it); the 1% subtree is partition ${stream.onePercent} (${stream.counts[stream.onePercent].toLocaleString("en-US")} messages): Aria bench/p${stream.onePercent}/**, NATS bench.p${stream.onePercent}.>.`,
      `Published once, acknowledged, as fast as each took it: Aria ${formatSi(ariaPublished.perSecond)} msg/s (batches of 4,096, 8 in flight, fsync interval), NATS ${formatSi(natsPublished.perSecond)} msg/s (js.publish, 4,096 in flight; file storage).`,
    );
    notes.push(
      `Clients in this process: Aria's client reading DATA frames with frames(); nats.js ${natsClientVersion} ordered consumers with a callback (whole stream: pull consume(), ${NATS_PULL_BATCH.toLocaleString("en-US")} per pull; a subtree: the ordered push consumer, see bench/compare_nats.ts). Every replay was checked: exactly the expected messages, in seq order.`,
      `Servers: ${natsVersion} (-js), the built aria serve (tip ${(largeTipBytes / 2 ** 20).toFixed(0)} MiB for the tip rows, 1 MiB for the disk rows and the herd), restarted between phases; after each start both replay partition ${stream.spec.partitions - 1} ${WARM_UP_REPLAYS} times, unmeasured (warm code paths). ${args.rounds} rounds (${args.phases.join(", ")}); load average (1 min) at the rounds' starts ${loads.map((load) => load.toFixed(1)).join(", ")} on ${navigator.hardwareConcurrency} CPUs (at the start of the run ${loadStart[0].toFixed(1)}).`,
    );
    if (args.json) {
      console.log(
        JSON.stringify(
          {
            date: startedAt.toISOString(),
            messages: args.messages,
            skew: args.skew,
            rounds: args.rounds,
            phases: args.phases,
            nats: natsVersion,
            publish: {
              ariaPerSecond: ariaPublished.perSecond,
              natsPerSecond: natsPublished.perSecond,
            },
            ...json,
            loads,
            targets,
          },
          null,
          2,
        ),
      );
    } else {
      console.log(`## Aria vs NATS JetStream (${startedAt.toISOString()})\n`);
      for (const section of sections) {
        console.log(`### ${section.title}\n`);
        console.log(markdownTable(section.columns, section.rows));
      }
      console.log(
        markdownTable(
          [
            { key: "target", header: "target (issue 32)" },
            { key: "measured", header: "measured (median)" },
            { key: "met", header: "met" },
          ],
          targets,
        ),
      );
      for (const note of notes) console.log(`- ${note}`);
    }
    return 0;
  } finally {
    await stopAllStarted();
    await rm(root, { recursive: true, force: true });
  }
}

// Interrupted (Ctrl-C, a timeout): end the servers by PID before exiting.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stderr.write(`\nnats_compare: ${signal}, stopping the servers\n`);
    void stopAllStarted().finally(() => process.exit(130));
  });
}

try {
  process.exitCode = await main();
} catch (error) {
  process.stderr.write(`\nnats_compare: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
}
