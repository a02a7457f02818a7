/**
 * A lane's head keeps its record's publish time: read once when the record becomes the head (by
 * the record walk, or as the last record of a decoded run), handed out when it is taken.
 */
import { expect, test } from "bun:test";
import { RUN_PARTITIONS_MIN } from "../../constants.ts";
import { SimDisk } from "../../testing/sim_disk.ts";
import { Filter } from "../../topic/filter.ts";
import { Store } from "../mod.ts";

const timeOf = (seq: number) => seq * 10 + 7;

test("every message read has its own time, through decoded runs and the record walk", async () => {
  const { store } = await Store.open(new SimDisk(), { fsync: "never" });
  const partitions = RUN_PARTITIONS_MIN + 44;
  const messages = partitions * 20;
  const payload = new Uint8Array(40).fill(3);
  // Runs of 5 seqs per partition (one topic each: its images are tabulated, and read by runs).
  for (let seq = 1; seq <= messages; seq++) {
    store.append(seq, timeOf(seq), `app/p${Math.floor(seq / 5) % partitions}/t`, payload);
  }
  await store.commit();
  await store.sortAll();
  // Records still in the journal after the sorted ones: the record walk.
  for (let seq = messages + 1; seq <= messages + 500; seq++) {
    store.append(seq, timeOf(seq), `app/p${seq % partitions}/t`, payload);
  }
  await store.commit();
  for (const borrow of [true, false]) {
    const reader = store.read(Filter.of("**"), { seq: 1 }, { borrow });
    let next = 1;
    for (let batch = await reader.nextBatch(); batch.length > 0; batch = await reader.nextBatch()) {
      for (const message of batch) {
        expect(message.seq).toBe(next++);
        expect(message.timeUs).toBe(timeOf(message.seq));
      }
    }
    expect(next).toBe(messages + 501);
    expect(reader.runsTaken).toBeGreaterThan(0);
  }
  await store.close();
});
