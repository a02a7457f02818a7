/**
 * The last split as the data directory records it (manifest_codec.ts, kind 7 SPLIT after the
 * split's SWAP): what the admin app reports after a restart or an offline split. Read back at
 * open, kept by a rewrite of the manifest, left alone by retention, and, where no SPLIT record
 * is found (a split by an earlier build, a manifest rebuilt from files), told by the stores.
 */
import { expect, test } from "bun:test";
import { executeSplit } from "../split/executor.ts";
import { inProcessRunner, storeHost } from "../split/in_process.ts";
import { SimDisk } from "../testing/sim_disk.ts";
import { crc32 } from "./crc32.ts";
import { MANIFEST_PATH } from "./layout.ts";
import { rewriteManifest } from "./manifest.ts";
import { Store, type SplitSummary, type StoreOptions } from "./mod.ts";
import type { PlanMetrics } from "../split/mod.ts";
import type { StoreContext } from "./context.ts";

const OPTIONS: StoreOptions = {
  segmentBytesMax: 2048,
  indexIntervalBytes: 128,
  segmentAgeUsMax: 1e15,
};
const TOPICS = ["app/orders/new", "app/orders/paid", "app/users/eu", "ops/logs"];
const FINISHED_US = 1_700_000_000_000_000;

async function filledStore(disk: SimDisk): Promise<Store> {
  const { store } = await Store.open(disk, OPTIONS);
  for (let seq = 1; seq <= 200; seq++)
    store.append(seq, seq, TOPICS[seq % TOPICS.length], new Uint8Array(20 + (seq % 7)));
  await store.seal();
  return store;
}

async function split(store: Store, disk: SimDisk, nowUs?: () => number) {
  return executeSplit(storeHost(store), inProcessRunner(disk, { crc32 }), disk, {
    plan: { algorithm: "heuristic" },
    workers: 1,
    intervalBytes: 128,
    nowUs,
  });
}

function contextOf(store: Store): StoreContext {
  return (store as unknown as { context: StoreContext }).context;
}

test("a split's switch records it; a reopen, a rewrite of the manifest and retention keep it", async () => {
  const disk = new SimDisk();
  const store = await filledStore(disk);
  expect(store.lastSplit()).toBeNull();
  let now = FINISHED_US - 2_500_000;
  const report = await split(store, disk, () => (now += 1_250_000));
  expect(report.switched).toBe(true);
  const stores = store.layout().flatMap((layout) => layout.stores);
  const after = report.after as PlanMetrics;
  const recorded: SplitSummary = {
    generation: stores[0].generation,
    storesWritten: report.storesWritten,
    storeBytes: stores.reduce((sum, s) => sum + s.bytes, 0),
    finishedUs: FINISHED_US,
    durationUs: 1_250_000,
    algorithm: "heuristic",
    plan: {
      stores: after.stores,
      wastedBytesTotal: after.wastedBytesTotal,
      worstRatio: after.worstRatio.ratio,
    },
  };
  expect(store.lastSplit()).toEqual(recorded);
  await store.close();

  const { store: reopened } = await Store.open(disk, OPTIONS);
  expect(reopened.lastSplit()).toEqual(recorded);
  await rewriteManifest(contextOf(reopened));
  // Retention removes stores with a SWAP that adds nothing: the last split stays what it was.
  await reopened.retain({ bytes: 0 }, 0);
  expect(reopened.layout()).toEqual([]);
  expect(reopened.lastSplit()).toEqual(recorded);
  await rewriteManifest(contextOf(reopened)); // no store left for a SWAP: the SPLIT record alone
  await reopened.close();
  const { store: third } = await Store.open(disk, OPTIONS);
  expect(third.lastSplit()).toEqual(recorded);
  await third.close();
});

test("without a SPLIT record (an earlier build's split, a rebuilt manifest) the stores tell what they can", async () => {
  const disk = new SimDisk();
  const store = await filledStore(disk);
  // The switch as an earlier build asked for it: stores alone.
  const host = storeHost(store);
  await executeSplit(
    {
      ...host,
      switchLayout: (swap) => host.switchLayout({ removed: swap.removed, added: swap.added }),
    },
    inProcessRunner(disk, { crc32 }),
    disk,
    {
      plan: { algorithm: "heuristic" },
      workers: 1,
      intervalBytes: 128,
    },
  );
  const stores = store.layout().flatMap((layout) => layout.stores);
  const told: SplitSummary = {
    generation: stores[0].generation,
    storesWritten: stores.length,
    storeBytes: stores.reduce((sum, s) => sum + s.bytes, 0),
    finishedUs: null,
    durationUs: null,
    algorithm: null,
    plan: null,
  };
  expect(store.lastSplit()).toEqual(told);
  await store.close();
  await disk.remove(MANIFEST_PATH);
  const { store: rebuilt, recovery } = await Store.open(disk, OPTIONS);
  expect(recovery.manifestRebuilt).toBe(true);
  expect(rebuilt.lastSplit()).toEqual(told);
  await rebuilt.close();
});
