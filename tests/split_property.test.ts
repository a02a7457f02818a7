/**
 * Property test of the split, in process on a SimDisk: random messages on random topics, closed
 * into segments; then one or two *random* split plans (random groupings of each partition's
 * topics, not only the planners'), each executed by the real executor and switched; then random
 * topic and subtree reads from random start points — including one reader in flight across the
 * switch, and reads after a reopen and after a crash — must return the same messages in the same
 * order as the unsplit stream (the reference: every appended message, filtered).
 * FC_SEED / FC_RUNS (src/testing/fc_params.ts) replay and scale it.
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { executeSplit } from "../src/split/executor.ts";
import { inProcessRunner, storeHost } from "../src/split/in_process.ts";
import type { PlannedSubtreeStore, SplitPlan } from "../src/split/plan.ts";
import type { VolumeTable } from "../src/split/volume_table.ts";
import { crc32, Store, type StoredMessage } from "../src/store/mod.ts";
import { fcParams } from "../src/testing/fc_params.ts";
import { SimDisk } from "../src/testing/sim_disk.ts";
import { Filter, partitionOf } from "../src/topic/mod.ts";
import { SMALL_LIMITS } from "./fixtures/store_helpers.ts";

const TOPICS = [
  "app/orders",
  "app/orders/created",
  "app/orders/paid",
  "app/orders/paid/eu",
  "app/users",
  "app/users/eu/1",
  "ops/x/y/z",
  "ops/metrics",
  "solo",
];
const FILTERS = [
  "**",
  "app/**",
  "app/orders/**",
  "app/orders/paid/**",
  "ops/**",
  "solo",
  "app/users/eu/1",
  "app/orders/paid",
  "app/orders",
  "nothing/here/**",
];

type Sent = { seq: number; topic: string; payload: Uint8Array };

function payload(seq: number, size: number): Uint8Array {
  const bytes = new Uint8Array(size + 4);
  new DataView(bytes.buffer).setUint32(0, seq, true);
  for (let i = 4; i < bytes.length; i++) bytes[i] = (seq * 7 + i) & 0xff;
  return bytes;
}

/** A plan grouping each partition's topics by `groupOf[topic index in TOPICS]`. */
function randomPlan(groupOf: readonly number[]): (table: VolumeTable) => SplitPlan {
  return (table) => {
    const groups = new Map<string, { partition: string; topics: number[]; bytes: number }>();
    table.topics.forEach((topic, index) => {
      const partition = partitionOf(topic);
      const key = `${partition}~g${groupOf[TOPICS.indexOf(topic)]}`;
      const group = groups.get(key) ?? { partition, topics: [], bytes: 0 };
      group.topics.push(index);
      group.bytes += table.bytes[index];
      groups.set(key, group);
    });
    const stores: PlannedSubtreeStore[] = [...groups].map(([key, group]) => ({
      id: key.replaceAll("/", "~"),
      partition: group.partition,
      topics: Int32Array.from(group.topics),
      bytes: group.bytes,
    }));
    return { algorithm: "adaptive", subtrees: stores, budget: null, budgetRaisedTo: null };
  };
}

async function readAll(store: Store, filter: Filter, seq: number): Promise<StoredMessage[]> {
  const out: StoredMessage[] = [];
  for await (const message of store.read(filter, { seq })) out.push(message);
  return out;
}

function expected(sent: readonly Sent[], filter: Filter, seq: number): string[] {
  return sent.filter((m) => m.seq >= seq && filter.matches(m.topic)).map(key);
}

function key(m: { seq: number; topic: string; payload: Uint8Array }): string {
  return `${m.seq} ${m.topic} ${Buffer.from(m.payload).toString("hex")}`;
}

const scenario = fc.record({
  messages: fc.array(fc.tuple(fc.nat(TOPICS.length - 1), fc.nat(60)), {
    minLength: 1,
    maxLength: 250,
  }),
  tail: fc.array(fc.tuple(fc.nat(TOPICS.length - 1), fc.nat(60)), { maxLength: 20 }),
  plans: fc.array(fc.array(fc.nat(3), { minLength: TOPICS.length, maxLength: TOPICS.length }), {
    minLength: 1,
    maxLength: 2,
  }),
  between: fc.array(fc.tuple(fc.nat(TOPICS.length - 1), fc.nat(60)), { maxLength: 40 }),
  reads: fc.array(
    fc.tuple(fc.nat(FILTERS.length - 1), fc.double({ min: 0, max: 1.05, noNaN: true })),
    { minLength: 1, maxLength: 6 },
  ),
  inFlight: fc.tuple(fc.nat(FILTERS.length - 1), fc.nat(3)),
  seed: fc.nat(),
});

test("random splits, then random reads: the unsplit stream's messages, in order, once", async () => {
  await fc.assert(
    fc.asyncProperty(
      scenario,
      async ({ messages, tail, plans, between, reads, inFlight, seed }) => {
        const disk = new SimDisk({ seed });
        const options = { ...SMALL_LIMITS, crc32 };
        let store = (await Store.open(disk, options)).store;
        const sent: Sent[] = [];
        const publish = async (batch: [number, number][]) => {
          for (const [topicIndex, size] of batch) {
            const seq = store.nextSeq;
            const message = { seq, topic: TOPICS[topicIndex], payload: payload(seq, size) };
            store.append(seq, 1000 + seq, message.topic, message.payload);
            sent.push(message);
          }
          await store.commit();
        };
        await publish(messages);
        await store.sortAll();
        await publish(tail);
        const runner = inProcessRunner(disk, { crc32, chunkBytes: 256 });

        // A reader in flight across the switch (and across the second split, if any).
        const flightFilter = Filter.of(FILTERS[inFlight[0]]);
        const flight = store.read(flightFilter, { seq: 1 }, { batchBytesMax: 64 });
        const flown: StoredMessage[] = [];
        for (let i = 0; i < inFlight[1]; i++) flown.push(...(await flight.nextBatch()));

        for (const [round, groupOf] of plans.entries()) {
          const report = await executeSplit(storeHost(store), runner, disk, {
            plan: randomPlan(groupOf),
            workers: 2,
            intervalBytes: 128,
          });
          flown.push(...(await flight.nextBatch()));
          if (round === 0) expect(report.switched).toBe(true);
          // New data after a split: segments after the stores, then a re-split merges them.
          await publish(between);
          await store.sortAll();
        }
        expect(store.stats().stores).toBeGreaterThan(0);
        for await (const message of flight) flown.push(message);
        expect(flown.map(key)).toEqual(expected(sent, flightFilter, 1));

        const total = sent.length;
        for (const [filterIndex, fraction] of reads) {
          const filter = Filter.of(FILTERS[filterIndex]);
          const seq = Math.max(1, Math.floor(fraction * (total + 1)));
          expect((await readAll(store, filter, seq)).map(key)).toEqual(expected(sent, filter, seq));
        }
        // Every store holds only its topics' records: the whole stream is read exactly once.
        expect((await readAll(store, Filter.of("**"), 1)).map(key)).toEqual(
          expected(sent, Filter.of("**"), 1),
        );

        // Reopen (recovery replays the SWAP records), then crash and reopen.
        await store.close({ sort: false });
        store = (await Store.open(disk, options)).store;
        expect((await readAll(store, Filter.of("**"), 1)).map(key)).toEqual(
          expected(sent, Filter.of("**"), 1),
        );
        disk.crash();
        store = (await Store.open(disk, options)).store;
        for (const [filterIndex, fraction] of reads) {
          const filter = Filter.of(FILTERS[filterIndex]);
          const seq = Math.max(1, Math.floor(fraction * (total + 1)));
          expect((await readAll(store, filter, seq)).map(key)).toEqual(expected(sent, filter, seq));
        }
        await store.close({ sort: false });
      },
    ),
    fcParams({ runs: 60 }),
  );
}, 60_000);
