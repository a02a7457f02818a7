/**
 * A subscriber from seq 1 after retention removed every closed file while the live journal still
 * covered their seqs (the store then holds nothing below the tip's messages): it gets every
 * message still held, from the oldest (the tip's), then live ones, with no gap.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processLog } from "../src/runtime/mod.ts";
import { connect, startServer } from "../src/server/mod.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

for (const storeHoldsNewer of [false, true])
  test(`a subscriber from seq 1 after retention gets the oldest held message on, then live${storeHoldsNewer ? " (the store holds a newer one)" : ""}`, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "aria-retained-"));
    dirs.push(dataDir);
    const server = await startServer({
      host: "127.0.0.1",
      port: 0,
      adminPort: 0,
      dataDir,
      tipBytes: 4096,
      fsync: "always",
      storeLimits: { segmentBytesMax: 4096, journalBytesMax: 64 * 1024 },
      log: processLog({ level: "error", format: "text" }),
    });
    const client = await connect(server.tcpUrl);
    try {
      const payload = new TextEncoder().encode("m");
      await client.publishBatch(
        Array.from({ length: 1000 }, (_, i) => ({ topic: `t/${i % 7}`, payload })),
      );
      const store = server.store;
      await store.sortAll();
      for (let i = 0; i < 3; i++) await store.retain({ bytes: 1 }, Date.now() * 1000);
      expect(store.layout()).toEqual([]);
      expect(store.firstSeqHeld).toBe(1001);
      // With one more message the store holds seq 1001 (in its journal): a read from seq 1 gets
      // it first, past the seqs only the tip still holds.
      if (storeHoldsNewer) await client.publish("t/newer", "newer");
      const last = storeHoldsNewer ? 1002 : 1001;
      const tipFirst = server.tip.records.firstSeq;
      expect(tipFirst).toBeGreaterThan(1);
      expect(tipFirst).toBeLessThan(1000);
      const seqs: number[] = [];
      const subscription = client.subscribe("**", { from: { seq: 1 } });
      const received = (async () => {
        for await (const message of subscription) {
          seqs.push(message.seq);
          if (message.seq === last) return;
        }
      })();
      await Bun.sleep(100);
      await client.publish("t/live", "live");
      await Promise.race([received, Bun.sleep(3000)]);
      expect(seqs).toEqual(Array.from({ length: last + 1 - tipFirst }, (_, i) => tipFirst + i));
    } finally {
      await client.close();
      await server.stop();
    }
  });
