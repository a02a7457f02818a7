import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SplitReport } from "../split/executor.ts";
import type { PlanMetrics, VolumeTable } from "../split/mod.ts";
import type { OpenData } from "../store/mod.ts";
import { runCli, type CliIo } from "./mod.ts";
import { reportText } from "./split_run.ts";

const DATASETS = ["orders-desk", "services-zipf", "iot-fleet", "even"].map((name) => ({
  name,
  path: join(import.meta.dir, `../../../shared/datasets/${name}.csv`),
}));

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    out: (t: string) => {
      io.stdout += t;
    },
    err: (t: string) => {
      io.stderr += t;
    },
  };
  return io;
}

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = capture();
  const code = await runCli(args, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

interface PlanDocument {
  algorithm: string;
  budget?: number;
  budgetRaisedTo?: number;
  stores: { id: string; partition: string; topics: string[]; bytes: number }[];
  metrics: {
    stores: number;
    wastedBytesTotal: number;
    worstWaste: { topic: string; wastedBytes: number };
    worstRatio: { topic: string; ratio: number };
    subtrees: { count: number };
  };
}

let dir = "";
let example = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "aria-split-"));
  example = join(dir, "example.csv");
  writeFileSync(
    example,
    "topic,bytes,messages\napp/orders/new/eu,9000,90\napp/orders/new/us,1000,10\napp/orders/fill/eu,300,3\napp/orders/fill/us,100,1\napp/orders/cancel,50,1\napp/audit/log,20,1\n",
  );
  writeFileSync(join(dir, "bad.csv"), "topic,bytes,messages\na/b,1,1\na/b,2,2\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("aria split plan --json on every dataset", () => {
  for (const { name, path } of DATASETS) {
    test(name, async () => {
      const topics = (await Bun.file(path).text())
        .trim()
        .split("\n")
        .slice(1)
        .map((line) => line.split(",")[0]);
      const waste: Record<string, number> = {};
      let heuristicStores = 0;
      for (const algorithm of ["heuristic", "adaptive"]) {
        const result = await run(
          "split",
          "plan",
          "--volumes",
          path,
          "--algorithm",
          algorithm,
          "--json",
        );
        expect([result.code, result.stderr]).toEqual([0, ""]);
        expect(result.stdout.endsWith("}\n")).toBe(true);
        const document = JSON.parse(result.stdout) as PlanDocument;
        expect(document.algorithm).toBe(algorithm);
        const listed = document.stores.flatMap((store) => store.topics);
        expect(listed.length).toBe(topics.length);
        expect(new Set(listed)).toEqual(new Set(topics));
        for (const store of document.stores) {
          for (const topic of store.topics)
            expect(topic.split("/").slice(0, 2).join("/")).toBe(store.partition);
        }
        expect(document.metrics.stores).toBe(document.stores.length);
        waste[algorithm] = document.metrics.wastedBytesTotal;
        if (algorithm === "heuristic") heuristicStores = document.stores.length;
        else
          expect([document.budget, document.stores.length]).toEqual([
            heuristicStores,
            heuristicStores,
          ]);
      }
      expect(waste.adaptive).toBeLessThanOrEqual(waste.heuristic);
      // Skewed trees: far less waste. Even sizes: no better than the simple rule.
      if (name === "even") expect(waste.adaptive).toBe(waste.heuristic);
      else expect(waste.adaptive * 5).toBeLessThan(waste.heuristic);
    });
  }
});

test("the summary of the worked example", async () => {
  const result = await run("split", "plan", "--volumes", example, "--algorithm", "adaptive");
  expect(result.code).toBe(0);
  expect(result.stdout).toMatchInlineSnapshot(`
    "algorithm      adaptive, budget 4 stores (the heuristic's store count)
    table          6 topics in 2 partitions, 10.2 KiB
    stores         4
    topic reads    wasted 900 B in total; most 400 B reading app/orders/cancel; worst ratio 9.00x reading app/orders/cancel
    subtree reads  wasted 950 B over 11 subtrees; most 400 B reading app/orders/cancel/**; worst ratio 9.00x reading app/orders/cancel/**

    store              partition    topics      bytes  first topic
    app+audit          app/audit         1       20 B  app/audit/log
    app+orders         app/orders        3      450 B  app/orders/cancel
    app+orders+new     app/orders        1     1000 B  app/orders/new/us
    app+orders+new+eu  app/orders        1    8.8 KiB  app/orders/new/eu
    "
  `);
});

test("a budget below the partition count is raised, with a note", async () => {
  const result = await run(
    "split",
    "plan",
    "--volumes",
    example,
    "--algorithm",
    "adaptive",
    "--max-stores",
    "1",
    "--json",
  );
  expect(result.code).toBe(0);
  expect(result.stderr).toMatchInlineSnapshot(`
    "aria split plan: --max-stores 1 is below the table's 2 partitions (a store never mixes partitions): planned for 2 stores
    "
  `);
  const document = JSON.parse(result.stdout) as PlanDocument;
  expect([document.budget, document.budgetRaisedTo, document.stores.length]).toEqual([2, 2, 2]);
});

test("usage errors exit 2 with the subcommand's usage", async () => {
  const cases = [
    ["split", "--workers", "0"],
    ["split", "--max-stores", "99999999999999999999"],
    ["split", "frobnicate"],
    ["split", "--data-dir", "x", "--algorithm", "best"],
    ["split", "--algorithm", "heuristic", "--max-stores", "3"],
    ["split", "stats", "--json", "--csv"],
    ["split", "--fast"],
    ["split", "plan"],
    ["split", "plan", "--volumes", example],
    ["split", "plan", "--volumes", example, "--algorithm", "best"],
    ["split", "plan", "--volumes", example, "--algorithm", "heuristic", "--max-stores", "3"],
    ["split", "plan", "--volumes", example, "--algorithm", "adaptive", "--max-stores", "many"],
    ["split", "plan", "--volumes", example, "--algorithm", "adaptive", "--fast"],
    ["split", "plan", "--volumes", example, "--algorithm", "adaptive", "extra"],
  ];
  const firstLines: string[] = [];
  for (const args of cases) {
    const result = await run(...args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(
      args[1] === "plan"
        ? "Usage: aria split plan"
        : args[1] === "stats"
          ? "Usage: aria split stats"
          : "Usage: aria split [--data-dir DIR]",
    );
    firstLines.push(result.stderr.split("\n")[0].split(". ")[0]); // node:util's own wording after its first sentence
  }
  expect(firstLines).toMatchInlineSnapshot(`
    [
      "aria split: --workers: must be between 1 and 256",
      "aria split: --max-stores: 99999999999999999999 is too large",
      "aria split: unknown subcommand 'frobnicate'",
      "aria split: --algorithm: "best" is not heuristic or adaptive",
      "aria split: --max-stores applies to --algorithm adaptive only",
      "aria split stats: --json and --csv exclude each other",
      "aria split: Unknown option '--fast'",
      "aria split plan: --volumes FILE.csv is required",
      "aria split plan: --algorithm is required (heuristic or adaptive)",
      "aria split plan: --algorithm: "best" is not heuristic or adaptive",
      "aria split plan: --max-stores applies to --algorithm adaptive only",
      "aria split plan: --max-stores: "many" is not a whole number",
      "aria split plan: Unknown option '--fast'",
      "aria split plan: unexpected argument 'extra'",
    ]
  `);
});

test("an unreadable or invalid file exits 1 with a one-line message", async () => {
  const messages: string[] = [];
  for (const path of [join(dir, "missing.csv"), dir, join(dir, "bad.csv")]) {
    const result = await run("split", "plan", "--volumes", path, "--algorithm", "heuristic");
    expect([result.code, result.stdout]).toEqual([1, ""]);
    expect(
      result.stderr.endsWith("\n") && result.stderr.indexOf("\n") === result.stderr.length - 1,
    ).toBe(true);
    messages.push(result.stderr.replaceAll(dir, "DIR").trim());
  }
  expect(messages).toMatchInlineSnapshot(`
    [
      "aria split plan: cannot read "DIR/missing.csv": no such file",
      "aria split plan: cannot read "DIR": is a directory",
      "aria split plan: DIR/bad.csv: line 3: duplicate topic "a/b" (first on line 2)",
    ]
  `);
});

test("--help: split lists plan, stats and the rewrite; plan shows its options", async () => {
  const split = await run("split", "--help");
  expect(split.code).toBe(0);
  expect(split.stdout).toContain("  plan ");
  expect(split.stdout).toContain("stats");
  expect(split.stdout).toContain("aria split [--data-dir DIR]");
  expect((await run("split", "stats", "--help")).stdout).toStartWith("Usage: aria split stats");
  const plan = await run("split", "plan", "--help");
  expect(plan.code).toBe(0);
  expect(plan.stdout).toContain("--max-stores N");
  expect((await run("--help")).stdout).toContain("  split ");
});

test("the split's closing report prints every byte figure in one format (formatBytes)", () => {
  const metrics = (
    stores: number,
    wasted: number,
    topic: string,
    waste: number,
    ratio: number,
  ): PlanMetrics => ({
    stores,
    wastedBytesTotal: wasted,
    worstWaste: { topic, wastedBytes: waste },
    worstRatio: { topic, ratio },
    subtrees: {
      count: 0,
      wastedBytesTotal: 0,
      worstWaste: { subtree: topic, wastedBytes: 0 },
      worstRatio: { subtree: topic, ratio: 1 },
    },
  });
  const report: SplitReport = {
    table: {
      topics: [],
      bytes: new Float64Array(0),
      messages: new Float64Array(0),
      bytesTotal: 0,
    } as unknown as VolumeTable,
    before: metrics(5, 2_566_725, "app/orders/paid/eu", 835_387, 5.41),
    after: metrics(8, 236_168, "ops/metrics/mem", 123_073, 2.09),
    partitionsRewritten: 5,
    storesWritten: 8,
    filesReplaced: 9,
    bytesRead: 3_400_000,
    bytesWritten: 1_700_000,
    switched: true,
    sealed: null,
    open: null,
  };
  expect(
    reportText(report, {
      seconds: 0.16,
      dryRun: false,
      via: "local",
      workers: 2,
      nowUs: 0,
      dataDir: "./aria-data",
    }),
  ).toMatchInlineSnapshot(`
    "rewrote 5 partition(s) into 8 store(s), replacing 9 file(s); switched by the split itself
    read 3.2 MiB, wrote 1.6 MiB in 0.16 s with 2 worker(s) (20.3 MiB/s read)

                      before                                      after
    stores            5                                           8
    wasted bytes      2.4 MiB                                     231 KiB
    worst waste       app/orders/paid/eu (816 KiB)                ops/metrics/mem (120 KiB)
    worst ratio       app/orders/paid/eu (5.41x)                  ops/metrics/mem (2.09x)
    "
  `);
});

describe("what the split says about open segments (the journal's records, in no closed file yet)", () => {
  const open: OpenData = {
    partitions: 3,
    records: 4,
    bytes: 172,
    oldestTimeUs: 1_000_000_000,
    segmentAgeUs: 600_000_000,
    segmentBytesMax: 64 * 1024 * 1024,
  };
  const empty: SplitReport = {
    table: null,
    before: null,
    after: null,
    partitionsRewritten: 0,
    storesWritten: 0,
    filesReplaced: 0,
    bytesRead: 0,
    bytesWritten: 0,
    switched: false,
    sealed: null,
    open,
  };
  const how = {
    seconds: 0.01,
    dryRun: false,
    workers: 2,
    nowUs: 1_020_000_000,
    dataDir: "./aria-data",
  };

  test("nothing closed yet, a server running: what is open, when the oldest closes, how to close it now", () => {
    expect(reportText(empty, { ...how, via: "server" })).toMatchInlineSnapshot(`
      "nothing to split yet: no closed segments
      4 messages (172 B) in 3 partition(s) are in open segments, in the journal
      a partition's open segment closes at 64.0 MiB, when its oldest message is 10 min old (the oldest: in about 9 min 40 s), or when the server stops cleanly
      close them now: aria split --data-dir ./aria-data --seal (with --dry-run: seal, then only plan)
      "
    `);
  });

  test("nothing closed yet, no server: segments close only while one runs, or at its clean stop", () => {
    expect(reportText(empty, { ...how, via: "local" })).toMatchInlineSnapshot(`
      "nothing to split yet: no closed segments
      4 messages (172 B) in 3 partition(s) are in open segments, in the journal
      a partition's open segment closes at 64.0 MiB, when its oldest message is 10 min old while 'aria serve' runs on the directory, or when it stops cleanly
      close them now: aria split --data-dir ./aria-data --seal (with --dry-run: seal, then only plan)
      "
    `);
  });

  test("an empty directory", () => {
    expect(
      reportText(
        { ...empty, open: { ...open, partitions: 0, records: 0, bytes: 0, oldestTimeUs: null } },
        { ...how, via: "local" },
      ),
    ).toMatchInlineSnapshot(`
      "nothing to split: the data directory holds no messages
      "
    `);
  });
});
