import { describe, expect, test } from "bun:test";
import { SimDisk } from "../testing/sim_disk.ts";
import { ViewCache } from "../stdx/bytes.ts";
import { crc32 } from "./crc32.ts";
import { encodeRecord, recordBytes } from "./record.ts";
import { countRecordsAfter } from "./scan.ts";

/** Records `seqs` back to back (topic "t", a 40-byte payload), as a journal body holds them. */
function records(seqs: number[]): Uint8Array {
  const payload = new Uint8Array(40).fill(9);
  const each = recordBytes(1, payload.length);
  const bytes = new Uint8Array(each * seqs.length);
  const view = new DataView(bytes.buffer);
  const sources = new ViewCache();
  for (const [i, seq] of seqs.entries()) {
    encodeRecord(
      bytes,
      view,
      i * each,
      seq,
      seq * 1000,
      "t",
      payload,
      sources,
      0,
      payload.length,
      crc32,
    );
  }
  return bytes;
}

describe("countRecordsAfter", () => {
  test("after a bad record, counts the valid records of later seqs, stepping over whole older ones (a recycled journal's bytes)", async () => {
    const disk = new SimDisk();
    const file = await disk.open("j", "create");
    // [torn bytes][an older generation's records 1..400][two later records 1001, 1002][older 401..500]
    const torn = new Uint8Array(37).fill(0xa5);
    const parts = [
      torn,
      records(Array.from({ length: 400 }, (_, i) => i + 1)),
      records([1001, 1002]),
      records(Array.from({ length: 100 }, (_, i) => i + 401)),
    ];
    let at = 0;
    for (const part of parts) {
      await file.write(at, part);
      at += part.length;
    }
    const found = await countRecordsAfter(file, 0, 1000, crc32);
    expect(found).toEqual({
      records: 2,
      firstOffset: torn.length + parts[1].length,
      firstSeq: 1001,
      lastSeq: 1002,
    });
    // Older records only: nothing to count.
    expect((await countRecordsAfter(file, 0, 5000, crc32)).records).toBe(0);
  });
});
